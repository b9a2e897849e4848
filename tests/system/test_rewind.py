"""Rewind (issue 27): undoing what the agent changed in a workspace, from
its file tools and from its commands, against a real gbrd: after
write_file, edit_file and a command that creates, edits and deletes
files; a refusal naming the file a person changed afterwards (and --force
through it); across kill -9 and a restart; a rewind of a rewind; from a
second terminal; files the agent never touched left alone; the shadow
store kept out of the workspace."""
import json
import os

import pytest

import test_agent as agent
from test_disklog_history import rewrite_snapshot
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


def snapshot_world(make_daemon, tmpdir_short):
    """A daemon whose log snapshots itself often, a session in a
    workspace, a write_file and a command recorded, then enough records
    that a snapshot covers them: (world, base seq, snapshot path)."""
    d = make_daemon(config="[log]\nsegment_bytes = 64K\nmax_bytes = 1M\n"
                    "snapshot_bytes = 64K\n")
    ws = os.path.join(tmpdir_short, "snapws")
    os.makedirs(ws)
    c = d.conn()
    sid = c.call("session.create", {"workspace": ws})["result"]["id"]
    w = {"c": c, "sid": sid, "ws": ws, "d": d}
    put(w, "old.txt", "before\n")
    base = seq_now(w)
    ok(call(w, "write_file", path="old.txt", content="old\n"))
    sh(w, "printf 'b\\000\\377' > bin.dat; echo cmd > c.txt")
    last = seq_now(w)
    for i in range(400):
        assert "result" in c.call("log.append", {"type": "user.pad", "data": {
            "i": i, "pad": "p" * 300}})
    logdir = os.path.join(d.state, "log")
    snaps = sorted(f for f in os.listdir(logdir) if f.endswith(".snap"))
    assert snaps, os.listdir(logdir)
    snap = os.path.join(logdir, snaps[-1])
    with open(snap, "rb") as f:
        body = json.loads(f.read()[64:])
    mine = [o for o in body["modules"]["session"]["sessions"]
            if o["id"] == sid][0]
    assert mine["seq"] >= last        # the snapshot covers the changes
    return w, base, snap, body


def test_rewind_survives_a_snapshot_and_kill9(make_daemon, tmpdir_short):
    """What rewind remembers is in the disk log snapshot: after the
    records of the changes were covered by one, a kill -9 and a restart,
    both changes are still known and undone, to the byte."""
    w, base, snap, body = snapshot_world(make_daemon, tmpdir_short)
    mine = [o for o in body["modules"]["session"]["sessions"]
            if o["id"] == w["sid"]][0]
    part = mine["rewind"]
    assert part["floor"] == 0
    # [seq, ts, turn, rewind, call_id, tool, [[path, before, after]]]
    assert [ch[5] for ch in part["changes"]] == ["write_file", "run_script"]
    assert sorted(f[0] for ch in part["changes"] for f in ch[6]) == \
        ["bin.dat", "c.txt", "old.txt"]
    d = w["d"]
    d.kill9()
    d.start()
    w["c"] = d.conn()
    got = ok(w["c"].call("session.changes", {"session": w["sid"]}))
    assert got["floor"] == 0
    assert sorted(f for ch in got["changes"] for f in ch["files"]) == \
        ["bin.dat", "c.txt", "old.txt"]
    ok(rewind(w, seq=base))
    assert get(w, "old.txt") == "before\n"
    assert get(w, "c.txt") is None and get(w, "bin.dat") is None


@pytest.mark.parametrize("part", [
    None,                                           # an older gbrd's
    {"floor": 0, "changes": "x"},
    {"floor": 0, "changes": [[1, 0, 0, False, "c", "write_file",
                              [["a", "not an id", ""]]]]},
    {"floor": 0, "changes": [[10 ** 9, 0, 0, False, "c", "write_file", []]]},
    {"changes": []},
])
def test_a_snapshot_without_rewind_part_is_gone_and_said(make_daemon,
                                                         tmpdir_short, part):
    """A snapshot written before rewind's part existed (or whose part does
    not read) still loads: changes from before it can no longer be
    rewound, and rewind says so (gone, with the earliest seq it can still
    reach); later ones can."""
    w, base, snap, body = snapshot_world(make_daemon, tmpdir_short)
    d = w["d"]
    d.stop()
    logdir = os.path.join(d.state, "log")
    snap = sorted(os.path.join(logdir, f) for f in os.listdir(logdir)
                  if f.endswith(".snap"))[-1]
    with open(snap, "rb") as f:
        body = json.loads(f.read()[64:])
    n = 0
    for o in body["modules"]["session"]["sessions"]:
        n += o.pop("rewind", None) is not None
        if part is not None:
            o["rewind"] = part
    assert n == 1
    rewrite_snapshot(snap, json.dumps(body, separators=(",", ":")).encode())
    d.start()
    c = w["c"] = d.conn()
    mid = seq_now(w)
    ok(call(w, "write_file", path="new.txt", content="new\n"))
    r = rewind(w, seq=base)
    assert r["error"]["data"]["kind"] == "gone", r
    assert "dropped" in r["error"]["message"]
    floor = r["error"]["data"]["floor"]
    assert floor >= base
    assert ok(c.call("session.changes", {"session": w["sid"]}))["floor"] == \
        floor
    p = d.ctl("rewind", w["sid"])
    assert "can no longer be rewound" in p.stdout, p.stdout
    ok(rewind(w, seq=mid))
    assert get(w, "new.txt") is None and get(w, "old.txt") == "old\n"
