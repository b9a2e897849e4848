"""Rewind (issue 27): undoing what the agent changed in a workspace, from
its file tools and from its commands, against a real gbrd: after
write_file, edit_file and a command that creates, edits and deletes
files; a refusal naming the file a person changed afterwards (and --force
through it); across kill -9 and a restart; a rewind of a rewind; from a
second terminal; files the agent never touched left alone; the shadow
store kept out of the workspace."""
import os

import test_agent as agent
from test_agent import fake  # noqa: F401 (a fixture)
from test_tools import call, world  # noqa: F401 (world is a fixture)


def ok(r):
    assert "result" in r, r
    return r["result"]


def put(world, rel, text):
    p = os.path.join(world["ws"], rel)
    os.makedirs(os.path.dirname(p), exist_ok=True)
    with open(p, "w") as f:
        f.write(text)


def get(world, rel):
    p = os.path.join(world["ws"], rel)
    if not os.path.exists(p):
        return None
    with open(p) as f:
        return f.read()


def rewind(world, conn=None, **params):
    params["session"] = world["sid"]
    return (conn or world["c"]).call("session.rewind", params)


def changes(world):
    return ok(world["c"].call("session.changes",
                              {"session": world["sid"]}))["changes"]


def seq_now(world):
    """The session's last seq (everything after it is undone by --to)."""
    for s in ok(world["c"].call("session.list"))["sessions"]:
        if s["id"] == world["sid"]:
            return s["seq"]
    raise AssertionError("no session")


def sh(world, script):
    return ok(call(world, "run_script", language="sh", code=script))


def test_write_file_is_undone(world):
    put(world, "a.txt", "one\n")
    base = seq_now(world)
    ok(call(world, "write_file", path="a.txt", content="two\n"))
    ok(call(world, "write_file", path="new/b.txt", content="fresh\n"))
    ch = changes(world)
    assert [c["files"] for c in ch] == [["a.txt"], ["new/b.txt"]]
    dry = ok(rewind(world, seq=base, dry_run=True))
    acts = {c["path"]: c["action"] for c in dry["changes"]}
    assert acts == {"a.txt": "restore", "new/b.txt": "remove"}
    d = [c for c in dry["changes"] if c["path"] == "a.txt"][0]["diff"]
    assert "-two" in d and "+one" in d
    assert get(world, "a.txt") == "two\n"      # a dry run changes nothing
    r = ok(rewind(world, seq=base))
    assert sorted(c["path"] for c in r["changes"]) == ["a.txt", "new/b.txt"]
    assert get(world, "a.txt") == "one\n"
    assert get(world, "new/b.txt") is None
    assert get(world, "hello.txt") == "hello\n"


def test_edit_file_is_undone(world):
    put(world, "e.txt", "alpha\nbeta\n")
    base = seq_now(world)
    ok(call(world, "edit_file", path="e.txt", old_string="beta",
            new_string="gamma"))
    assert get(world, "e.txt") == "alpha\ngamma\n"
    ok(rewind(world, seq=base))
    assert get(world, "e.txt") == "alpha\nbeta\n"


def test_command_changes_are_undone(world):
    put(world, "keep.txt", "keep\n")
    put(world, "edit.txt", "old\n")
    put(world, "gone.txt", "bye\n")
    put(world, "sub/deep.txt", "deep\n")
    base = seq_now(world)
    sh(world, "echo new > made.txt; echo changed > edit.txt; rm gone.txt; "
       "rm -r sub; mkdir -p x/y; echo z > x/y/z.txt")
    files = sorted(changes(world)[-1]["files"])
    assert files == ["edit.txt", "gone.txt", "made.txt", "sub/deep.txt",
                     "x/y/z.txt"]
    # A file the person makes meanwhile is not the agent's: left alone.
    put(world, "mine.txt", "mine\n")
    ok(rewind(world, seq=base))
    assert get(world, "made.txt") is None
    assert get(world, "x/y/z.txt") is None
    assert get(world, "edit.txt") == "old\n"
    assert get(world, "gone.txt") == "bye\n"
    assert get(world, "sub/deep.txt") == "deep\n"
    assert get(world, "keep.txt") == "keep\n"
    assert get(world, "mine.txt") == "mine\n"


def test_refuses_a_file_someone_changed_then_force(world):
    put(world, "a.txt", "one\n")
    base = seq_now(world)
    ok(call(world, "write_file", path="a.txt", content="two\n"))
    ok(call(world, "write_file", path="b.txt", content="bee\n"))
    put(world, "a.txt", "the person's\n")
    r = rewind(world, seq=base)
    assert r["error"]["data"]["kind"] == "conflict", r
    assert "a.txt" in r["error"]["message"]
    assert [c["path"] for c in r["error"]["data"]["conflicts"]] == ["a.txt"]
    assert get(world, "a.txt") == "the person's\n"    # nothing was done
    assert get(world, "b.txt") == "bee\n"
    ok(rewind(world, seq=base, force=True))
    assert get(world, "a.txt") == "one\n"
    assert get(world, "b.txt") is None


def test_rewind_of_a_rewind(world):
    put(world, "a.txt", "one\n")
    base = seq_now(world)
    ok(call(world, "write_file", path="a.txt", content="two\n"))
    r = ok(rewind(world, seq=base))
    assert get(world, "a.txt") == "one\n"
    assert changes(world)[-1]["rewind"] is True
    ok(rewind(world, seq=r["undo_to_seq"]))
    assert get(world, "a.txt") == "two\n"
    # Nothing left to undo after the same point twice.
    r2 = rewind(world, seq=r["seq"] + 1)
    assert r2["error"]["data"]["kind"] == "not_found", r2


def test_rewind_across_kill9(world):
    d = world["d"]
    put(world, "a.txt", "one\n")
    base = seq_now(world)
    ok(call(world, "write_file", path="a.txt", content="two\n"))
    sh(world, "echo cmd > c.txt")
    d.kill9()
    d.start()
    world["c"] = d.conn()
    files = [c["files"] for c in changes(world)]
    assert ["a.txt"] in files and ["c.txt"] in files
    ok(rewind(world, seq=base))
    assert get(world, "a.txt") == "one\n"
    assert get(world, "c.txt") is None


def test_two_terminals(world):
    put(world, "a.txt", "one\n")
    base = seq_now(world)
    ok(call(world, "write_file", path="a.txt", content="two\n"))
    other = world["d"].conn()
    other.call("session.attach", {"session": world["sid"]})
    ok(rewind(world, conn=other, seq=base))
    assert get(world, "a.txt") == "one\n"
    # The first terminal hears of it as an event of the session.
    seen = []
    for _ in range(50):
        m = world["w"].recv()
        if m.get("method") == "event":
            seen.append(m["params"]["type"])
            if m["params"]["type"] == "workspace.rewound":
                break
    assert "workspace.changed" in seen and "workspace.rewound" in seen


def test_shadow_store_is_outside_the_workspace(world):
    ok(call(world, "write_file", path="a.txt", content="x\n"))
    sh(world, "echo y > b.txt")
    assert sorted(os.listdir(world["ws"])) == ["a.txt", "b.txt", "hello.txt"]
    shadow = os.path.join(world["d"].state, "shadow")
    r = call(world, "read_file", path=shadow)
    assert "error" in r


def test_user_git_is_never_touched(world):
    os.makedirs(os.path.join(world["ws"], ".git"))
    put(world, ".git/HEAD", "ref: refs/heads/main\n")
    base = seq_now(world)
    sh(world, "echo y > b.txt")
    assert changes(world)[-1]["files"] == ["b.txt"]
    ok(rewind(world, seq=base))
    assert get(world, ".git/HEAD") == "ref: refs/heads/main\n"
    assert sorted(os.listdir(os.path.join(world["ws"], ".git"))) == ["HEAD"]


def test_turns_and_gbrctl(make_daemon, fake, tmpdir_short):  # noqa: F811
    """Two agent turns; gbrctl lists them with their files, shows the diff
    of --turn 2 without changing anything, then undoes turn 2 only."""
    d = os.path.join(tmpdir_short, "ws")
    os.makedirs(d)
    with open(os.path.join(d, "a.txt"), "w") as f:
        f.write("v0\n")
    agent.profile(d, "[env]\nautonomy = full\n")
    fake.push({"tool_calls": [{"name": "write_file", "args": {
        "path": "a.txt", "content": "v1\n"}}]}, {"text": "one"},
        {"tool_calls": [{"name": "run_script", "args": {
            "language": "sh", "code": "echo v2 > a.txt; echo b > b.txt"}}]},
        {"text": "two"})
    dm = agent.start(make_daemon, fake, "openai")
    c, sid = agent.session(dm, d, name="rw")
    for text in ("first", "second"):
        p = dm.ctl("send", "rw", text)
        assert p.returncode == 0, (p.stdout, p.stderr)
    p = dm.ctl("rewind", "rw")
    assert p.returncode == 0, p.stderr
    lines = p.stdout.splitlines()
    assert len(lines) == 2, p.stdout
    assert "turn 1" in lines[0] and "write_file: a.txt" in lines[0]
    assert "turn 2" in lines[1] and "run_script: a.txt b.txt" in lines[1]
    p = dm.ctl("rewind", "rw", "--turn", "2", "--dry-run")
    assert p.returncode == 0, p.stderr
    assert "restore a.txt" in p.stdout and "remove b.txt" in p.stdout
    assert "-v2\n+v1\n" in p.stdout, p.stdout
    with open(os.path.join(d, "a.txt")) as f:
        assert f.read() == "v2\n"
    p = dm.ctl("rewind", "rw", "--turn", "2")
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert "to undo this rewind: gbrctl rewind rw --to" in p.stdout
    with open(os.path.join(d, "a.txt")) as f:
        assert f.read() == "v1\n"
    assert not os.path.exists(os.path.join(d, "b.txt"))
    # A person's edit makes the next rewind refuse, naming the file.
    with open(os.path.join(d, "a.txt"), "w") as f:
        f.write("mine\n")
    p = dm.ctl("rewind", "rw", "--turn", "1")
    assert p.returncode == 1 and "a.txt" in p.stderr, (p.stdout, p.stderr)
    with open(os.path.join(d, "a.txt")) as f:
        assert f.read() == "mine\n"


def test_repl_lists_shows_the_diff_and_asks(world):
    """/rewind lists what changed; /rewind to SEQ shows the diff and asks;
    n leaves everything, y undoes it (gbr on plain stdin, as a script)."""
    import subprocess
    from conftest import GBR
    put(world, "a.txt", "one\n")
    base = seq_now(world)
    ok(call(world, "write_file", path="a.txt", content="two\n"))
    script = "/rewind\n/rewind to %d\nn\n" % base
    r = subprocess.run([GBR, "-s", world["sid"]], input=script,
                       env=world["d"].env, capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    assert "a.txt" in r.stdout and "restore a.txt" in r.stdout, r.stdout
    assert "-two" in r.stdout and "+one" in r.stdout, r.stdout
    assert "nothing was undone" in r.stdout
    assert get(world, "a.txt") == "two\n"
    r = subprocess.run([GBR, "-s", world["sid"]],
                       input="/rewind to %d\ny\n" % base,
                       env=world["d"].env, capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, r.stderr
    assert "restored a.txt" in r.stdout, r.stdout
    assert get(world, "a.txt") == "one\n"


def test_what_a_snapshot_dropped_is_gone_and_said(make_daemon, tmpdir_short):
    """A disk log snapshot drops the records it covers: after a restart,
    changes from before it can no longer be rewound, and rewind says so
    (gone, with the earliest seq it can still reach); later ones can."""
    d = make_daemon(config="[log]\nsegment_bytes = 64K\nmax_bytes = 1M\n")
    ws = os.path.join(tmpdir_short, "snapws")
    os.makedirs(ws)
    c = d.conn()
    sid = c.call("session.create", {"workspace": ws})["result"]["id"]
    w = {"c": c, "sid": sid, "ws": ws, "d": d}
    base = seq_now(w)
    ok(call(w, "write_file", path="old.txt", content="old\n"))
    for i in range(2500):
        assert "result" in c.call("log.append", {"type": "user.pad", "data": {
            "i": i, "pad": "p" * 300}})
    d.stop()
    d.start()
    c = w["c"] = d.conn()
    mid = seq_now(w)
    ok(call(w, "write_file", path="new.txt", content="new\n"))
    r = rewind(w, seq=base)
    assert r["error"]["data"]["kind"] == "gone", r
    assert "dropped" in r["error"]["message"]
    floor = r["error"]["data"]["floor"]
    assert floor >= base
    assert ok(c.call("session.changes", {"session": sid}))["floor"] == floor
    p = d.ctl("rewind", sid)
    assert "can no longer be rewound" in p.stdout, p.stdout
    ok(rewind(w, seq=mid))
    assert get(w, "new.txt") is None and get(w, "old.txt") == "old\n"


# A command's snapshots are taken off the event loop: while a first
# snapshot of a big workspace runs, other clients are answered at once.

BIG_FILES = 6000


def big_workspace(path, n=BIG_FILES):
    """n files of ~1 KiB in folders of 100: a first snapshot of them takes
    hundreds of ms to seconds."""
    body = "".join("line %d of a file of a project\n" % i for i in range(32))
    for i in range(n):
        d = os.path.join(path, "d%03d" % (i // 100))
        if i % 100 == 0:
            os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "f%03d.txt" % (i % 100)), "w") as f:
            f.write("%d\n%s" % (i, body))


def pinged_during(d, ws, command):
    """Runs command as a run_script tool call in a new session on ws while
    another client pings gbrd every 10 ms: (seconds the call took, its
    reply, the ping round trips during it)."""
    import threading
    import time
    a = d.conn(timeout=60)
    sid = a.call("session.create", {"workspace": ws})["result"]["id"]
    a.call("session.attach", {"session": sid})
    b = d.conn(timeout=60)
    lat, done = [], threading.Event()

    def pinger():
        while not done.is_set():
            t = time.monotonic()
            assert "result" in b.call("daemon.ping")
            lat.append(time.monotonic() - t)
            time.sleep(0.01)    # a client, not a load generator

    th = threading.Thread(target=pinger)
    th.start()
    time.sleep(0.05)    # the pinger is going
    t0 = time.monotonic()
    r = a.call("tool.call", {"session": sid, "tool": "run_script",
                             "args": {"language": "sh", "code": command}})
    took = time.monotonic() - t0
    done.set()
    th.join()
    return took, r, lat, a, sid


def test_snapshots_do_not_hold_the_loop(make_daemon, tmpdir_short):
    """The same first command on the same big workspace, twice: with the
    snapshots forced onto the loop (the test hook; what gbrd did before),
    a ping waits about as long as the snapshot, which shows this measure
    catches a held loop; with the worker, the pings keep coming back fast
    while the call runs, and what the command changed is still recorded
    before its result."""
    ws = os.path.join(tmpdir_short, "big")
    big_workspace(ws)
    held = make_daemon(env={"GBR_TEST_SHADOW_INLINE": "1"})
    took_h, r, lat_h, _, _ = pinged_during(held, ws, "true")
    ok(r)
    held.stop()
    # The store is in each gbrd's state folder: a first snapshot again.
    d = make_daemon()
    took, r, lat, a, sid = pinged_during(d, ws, "echo x > made.txt")
    ok(r)
    assert took > 0.2, "the workspace is too small to show anything"
    # Held: one ping waited for (most of) a snapshot.
    assert max(lat_h) > took_h / 3, (took_h, max(lat_h))
    # Not held: many pings during the call, none waited a quarter of it.
    assert len(lat) >= 10, (took, lat)
    assert max(lat) < took / 4, (took, max(lat), sorted(lat)[-5:])
    ch = ok(a.call("session.changes", {"session": sid}))["changes"]
    assert ch[-1]["files"] == ["made.txt"]
    # The session's events: workspace.changed came before the tool.result.
    seen = [(m["params"]["type"], m["params"]["seq"]) for m in a.events
            if m.get("method") == "event"]
    types = [t for t, _ in seen]
    assert "workspace.changed" in types and "tool.result" in types, seen
    assert types.index("workspace.changed") < types.index("tool.result")


def start_call(conn, sid, code, rid):
    return conn.request("tool.call", {"session": sid, "tool": "run_script",
                                      "request_id": rid, "args": {
                                          "language": "sh", "code": code}})


def reply(conn, rid):
    while True:
        m = conn.recv()
        if m.get("id") == rid and "method" not in m:
            return m
        conn.events.append(m)


def test_cancel_and_close_while_the_snapshot_runs(make_daemon, tmpdir_short):
    """A command cancelled, or its session closed, while its "before"
    snapshot is being taken never runs, and gbrd goes on answering."""
    ws = os.path.join(tmpdir_short, "big")
    big_workspace(ws)
    d = make_daemon()
    a, b = d.conn(timeout=60), d.conn(timeout=60)
    sid = a.call("session.create", {"workspace": ws})["result"]["id"]
    rid = start_call(a, sid, "echo ran > ran.txt", "r-cancel")
    import time
    time.sleep(0.1)
    assert "result" in b.call("tool.cancel", {"session": sid,
                                              "request_id": "r-cancel"})
    r = reply(a, rid)
    assert r["error"]["data"]["kind"] == "cancelled", r
    assert not os.path.exists(os.path.join(ws, "ran.txt"))
    assert changes({"c": a, "sid": sid}) == []
    # The same, the session closed instead; another session meanwhile.
    sid2 = a.call("session.create", {"workspace": ws})["result"]["id"]
    rid = start_call(a, sid2, "echo ran > ran2.txt", "r-close")
    time.sleep(0.1)
    assert "result" in b.call("session.close", {"session": sid2})
    r = reply(a, rid)
    assert r["error"]["data"]["kind"] in ("cancelled", "session_not_found"), r
    assert not os.path.exists(os.path.join(ws, "ran2.txt"))
    # Both ended while their snapshot was being taken, not after it.
    assert d.log().count("snapshot was being taken") == 2, d.log()[-3000:]
    assert "result" in b.call("daemon.ping")
    # The store is not broken by it: the next command is recorded.
    sh({"c": a, "sid": sid}, "echo y > y.txt")
    assert changes({"c": a, "sid": sid})[-1]["files"] == ["y.txt"]
    assert d.stop() == 0


def test_stop_with_snapshots_in_flight(make_daemon, tmpdir_short):
    """gbrd stopped while one first snapshot is being taken and another
    waits for it: it stops at once, not after the snapshot (faster than
    half a first snapshot takes), cleanly (the fixture checks the exit
    code and the sanitizers), and starts again with working rewind."""
    import time
    d = make_daemon()
    a = d.conn(timeout=60)
    sids = []
    for name in ("big1", "big2"):
        ws = os.path.join(tmpdir_short, name)
        big_workspace(ws)
        sid = a.call("session.create", {"workspace": ws})["result"]["id"]
        sids.append((sid, ws))
    for sid, ws in sids:
        start_call(a, sid, "echo ran > ran.txt", "r-" + sid)
    time.sleep(0.2)
    t0 = time.monotonic()
    assert d.stop() == 0
    stopped = time.monotonic() - t0
    for _, ws in sids:
        assert not os.path.exists(os.path.join(ws, "ran.txt"))
    d.start()
    c = d.conn(timeout=60)
    sid, ws = sids[1]       # the one that waited: never snapshotted
    t0 = time.monotonic()
    sh({"c": c, "sid": sid}, "echo y > y.txt")
    took = time.monotonic() - t0
    assert changes({"c": c, "sid": sid})[-1]["files"] == ["y.txt"]
    # The snapshot in progress was cut short, not waited for.
    assert stopped < took / 2, (stopped, took)


def test_a_failed_snapshot_does_not_stop_the_command(world):
    """Rewind is best effort: a store whose index cannot be read (a folder
    in its place) fails the worker's snapshot; the command still runs,
    unrecorded, and gbrd says why in its log."""
    import hashlib
    import subprocess
    h = hashlib.sha256(os.path.realpath(world["ws"]).encode()).hexdigest()
    gitdir = os.path.join(world["d"].state, "shadow", h[:32] + ".git")
    subprocess.run(["git", "init", "-q", "--bare", gitdir], check=True)
    os.makedirs(os.path.join(gitdir, "index"))
    r = sh(world, "echo ran > ran.txt")
    assert r["result"]["exit_code"] == 0, r
    assert get(world, "ran.txt") == "ran\n"
    assert changes(world) == []
    # The worker's own handle failed (not the store's opening on the loop).
    assert "rewind: the shadow store: %s: " % os.path.realpath(world["ws"]) \
        in world["d"].log(), world["d"].log()[-3000:]
