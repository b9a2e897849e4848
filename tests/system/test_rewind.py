"""Rewind (issue 27): undoing what the agent changed in a workspace, from
its file tools and from its commands, against a real gbrd: after
write_file, edit_file and a command that creates, edits and deletes
files; a refusal naming the file a person changed afterwards (and --force
through it); across kill -9 and a restart; a rewind of a rewind; from a
second terminal; files the agent never touched left alone; the shadow
store kept out of the workspace."""
import json
import os
import re

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
    p = world["d"].ctl("rewind", world["sid"], "--to", str(base), "--dry-run")
    assert re.search(r"^conflict: a\.txt: .+", p.stdout, re.M), p.stdout
    assert get(world, "a.txt") == "the person's\n"
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


# Rewinding the conversation (session.rewind with conversation: true).

PAD_CONF = "[log]\nsegment_bytes = 64K\nmax_bytes = 1M\n"


def conv_world(make_daemon, fake, tmpdir_short, config=""):
    """A session on a fake model: turn 1 writes a.txt (v1), turn 2 writes
    it again (v2); each answers with a text the tests look for."""
    d = os.path.join(tmpdir_short, "cws")
    os.makedirs(d)
    agent.profile(d, "[env]\nautonomy = full\n")
    fake.push({"tool_calls": [{"name": "write_file", "args": {
        "path": "a.txt", "content": "v1\n"}}]}, {"text": "answer-one"},
        {"tool_calls": [{"name": "write_file", "args": {
            "path": "a.txt", "content": "v2\n"}}]}, {"text": "answer-two"})
    dm = make_daemon(config=agent.conf(fake, "openai", config),
                     env={agent.KEYVAR["openai"]: agent.KEY})
    c, sid = agent.session(dm, d, name="cv")
    agent.run_turn(c, sid, "first question")
    agent.run_turn(c, sid, "second question")
    return {"d": dm, "c": c, "sid": sid, "ws": d}


def reattach(w):
    """A new connection attached to the session (after a restart)."""
    c = w["d"].conn()
    ok(c.call("session.attach", {"session": w["sid"]}))
    return c


def last_request(fake):
    return fake.llm_requests()[-1]


def next_turn(w, fake, text):
    """Runs a turn; returns what the model was sent for it."""
    n = len(fake.llm_requests())
    agent.run_turn(w["c"], w["sid"], text)
    assert len(fake.llm_requests()) == n + 1
    return last_request(fake)


def seen_by_model(req):
    """What of the test's texts a request carries."""
    body = req.raw.decode()
    return [t for t in ("first question", "answer-one", "second question",
                        "answer-two", "v2\\n", "third question",
                        "fourth question") if t in body]


def test_conversation_rewind_drops_the_later_messages(make_daemon, fake,
                                                      tmpdir_short):
    w = conv_world(make_daemon, fake, tmpdir_short)
    c, sid = w["c"], w["sid"]
    before = agent.history(c, sid)
    assert len(before) == 8, before
    # The dry run says what would go, and changes nothing.
    dry = ok(rewind(w, turn=2, dry_run=True, conversation=True))
    assert dry["conversation"]["messages"] == 4, dry
    assert dry["conversation"]["first_user"] == "second question"
    assert [x["path"] for x in dry["changes"]] == ["a.txt"]
    assert get(w, "a.txt") == "v2\n"
    assert agent.history(c, sid) == before
    r = ok(rewind(w, turn=2, conversation=True))
    assert [x["path"] for x in r["changes"]] == ["a.txt"]
    assert r["conversation"]["messages"] == 4
    assert r["conversation"]["from_turn"] == 2
    assert r["conversation"]["seq"] == r["seq"] + 1
    assert get(w, "a.txt") == "v1\n"
    # The history keeps everything, and says what happened.
    after = agent.history(c, sid)
    assert after[:8] == before
    mark = after[8]
    assert mark["role"] == "rewind" and mark["messages"] == 4
    assert mark["to_seq"] == before[4]["seq"] - 1
    assert before[4]["content"] == "second question"
    assert mark["who"]["uid"] == os.getuid()
    evs = agent.wait_for(c, lambda p: p["type"] == "conversation.rewound")
    assert evs[0]["to_seq"] == mark["to_seq"], evs
    # The next turn's request holds turn 1, not turn 2.
    fake.push({"text": "answer-three"})
    req = next_turn(w, fake, "third question")
    assert seen_by_model(req) == ["first question", "answer-one",
                                  "third question"], req.raw
    assert req.user_texts() == ["first question", "third question"]
    # The same after kill -9 and a restart (the cut is replayed).
    w["d"].kill9()
    w["d"].start()
    w["c"] = reattach(w)
    fake.push({"text": "answer-four"})
    req = next_turn(w, fake, "fourth question")
    assert req.user_texts() == ["first question", "third question",
                                "fourth question"]
    assert "answer-two" not in req.raw.decode()
    assert "answer-three" in req.raw.decode()


def test_conversation_rewind_alone_by_seq_and_twice(make_daemon, fake,
                                                    tmpdir_short):
    """A turn that changed no file: the conversation alone is rewound.
    --to SEQ cuts after that event; a later cut to an earlier point also
    drops what the first one kept."""
    w = conv_world(make_daemon, fake, tmpdir_short)
    c, sid = w["c"], w["sid"]
    fake.push({"text": "answer-three"})
    next_turn(w, fake, "third question")
    r = ok(rewind(w, turn=3, conversation=True))
    assert r["changes"] == [] and r["conversation"]["messages"] == 2, r
    assert "undo_to_seq" not in r
    assert get(w, "a.txt") == "v2\n"
    fake.push({"text": "answer-four"})
    req = next_turn(w, fake, "fourth question")
    assert req.user_texts() == ["first question", "second question",
                                "fourth question"], req.raw
    assert "answer-three" not in req.raw.decode()
    # Nothing after the last message: not_found, nothing recorded.
    h = agent.history(c, sid)
    r = rewind(w, seq=h[-1]["seq"], conversation=True)
    assert r["error"]["data"]["kind"] == "not_found", r
    assert agent.history(c, sid) == h
    # After turn 1's last message (h[3]): turn 2's file goes back too.
    assert h[3]["content"] == "answer-one"
    r = ok(rewind(w, seq=h[3]["seq"], conversation=True))
    assert [x["path"] for x in r["changes"]] == ["a.txt"]
    assert r["conversation"]["messages"] == 6, r
    assert get(w, "a.txt") == "v1\n"
    fake.push({"text": "answer-five"})
    req = next_turn(w, fake, "fifth question")
    assert seen_by_model(req) == ["first question", "answer-one"], req.raw
    assert req.user_texts() == ["first question", "fifth question"]
    # Back to before turn 1: everything goes, what the cuts kept too.
    r = ok(rewind(w, turn=1, conversation=True))
    assert r["conversation"]["messages"] == 6, r
    assert r["conversation"]["first_user"] == "first question"
    fake.push({"text": "answer-six"})
    req = next_turn(w, fake, "sixth question")
    assert req.user_texts() == ["sixth question"], req.raw


def test_a_persons_tool_calls_are_not_counted(make_daemon, fake,
                                             tmpdir_short):
    """A person's own tool.call is in the history but was never sent to
    the model: after the last turn it is nothing to drop (not_found),
    and it is not counted with a turn's messages."""
    w = conv_world(make_daemon, fake, tmpdir_short)
    c, sid = w["c"], w["sid"]
    last = agent.history(c, sid)[-1]["seq"]
    ok(call(w, "read_file", path="a.txt"))
    assert len(agent.history(c, sid)) == 10
    r = rewind(w, seq=last, conversation=True, dry_run=True)
    assert r["error"]["data"]["kind"] == "not_found", r
    r = ok(rewind(w, turn=2, conversation=True, dry_run=True))
    assert r["conversation"]["messages"] == 4, r


def test_a_full_history_refuses_before_the_files_change(make_daemon, fake,
                                                       tmpdir_short):
    """The marker would not fit in a full history: refused (limit_reached)
    with nothing undone, rather than files rewound and messages kept."""
    w = conv_world(make_daemon, fake, tmpdir_short,
                   config="[session]\nhistory_messages = 8\n")
    assert len(agent.history(w["c"], w["sid"])) == 8
    r = rewind(w, turn=2, conversation=True)
    assert r["error"]["data"]["kind"] == "limit_reached", r
    assert "is full" in r["error"]["message"]
    assert get(w, "a.txt") == "v2\n"
    ok(rewind(w, turn=2))                      # the files alone still can
    assert get(w, "a.txt") == "v1\n"


def test_conversation_rewind_refused_while_a_turn_runs(make_daemon, fake,
                                                       tmpdir_short):
    import threading
    w = conv_world(make_daemon, fake, tmpdir_short)
    c, sid = w["c"], w["sid"]
    hold = threading.Event()
    fake.push({"text": "slow", "hold": hold})
    agent.send(c, sid, "third question")
    fake.wait_requests(5)
    n = len(agent.history(c, sid))
    for dry in (True, False):
        r = rewind(w, turn=2, conversation=True, dry_run=dry)
        assert r["error"]["data"]["kind"] == "busy", r
        assert "while a turn runs" in r["error"]["message"]
    assert get(w, "a.txt") == "v2\n"           # nothing was done
    hold.set()
    agent.wait_for(c, agent.turn_end(3))
    assert len(agent.history(c, sid)) == n + 1  # the answer only
    ok(rewind(w, turn=2, conversation=True))


def test_conversation_rewind_survives_a_snapshot(make_daemon, fake,
                                                 tmpdir_short):
    """The cut is a history message: a disk log snapshot keeps it in the
    history's side file, and the history read back from it after a
    restart still leaves the dropped messages out."""
    w = conv_world(make_daemon, fake, tmpdir_short, config=PAD_CONF)
    c, sid = w["c"], w["sid"]
    ok(rewind(w, turn=2, conversation=True))
    for i in range(2500):
        assert "result" in c.call("log.append", {"type": "user.pad", "data": {
            "i": i, "pad": "p" * 300}})
    w["d"].kill9()
    logdir = os.path.join(w["d"].state, "log")
    sides = [f for f in os.listdir(logdir) if f.startswith("hist-")]
    assert sides, os.listdir(logdir)
    with open(os.path.join(logdir, sides[0])) as f:
        assert '"role":"rewind"' in f.read()
    w["d"].start()
    w["c"] = reattach(w)
    fake.push({"text": "answer-three"})
    req = next_turn(w, fake, "third question")
    assert req.user_texts() == ["first question", "third question"], req.raw
    assert "answer-two" not in req.raw.decode()
    # Still there for a person to read.
    roles = [m["role"] for m in agent.history(w["c"], sid)]
    assert roles.count("rewind") == 1 and len(roles) == 11, roles
    # A turn that changed no file is rewound in the conversation alone.
    r = ok(w["c"].call("session.rewind", {"session": sid, "turn": 3,
                                           "conversation": True}))
    assert r["changes"] == [] and r["conversation"]["messages"] == 2, r
    # The files' changes came through the snapshot too (their memory is in
    # it): turn 1's write can still be undone.
    assert ok(w["c"].call("session.changes", {"session": sid}))["floor"] == 0
    r = ok(w["c"].call("session.rewind", {"session": sid, "turn": 1,
                                           "dry_run": True}))
    assert [x["path"] for x in r["changes"]] == ["a.txt"], r


def test_gbrctl_rewind_conversation(make_daemon, fake, tmpdir_short):
    w = conv_world(make_daemon, fake, tmpdir_short)
    d = w["d"]
    p = d.ctl("rewind", "cv", "--turn", "2", "--conversation", "--dry-run")
    assert p.returncode == 0, p.stderr
    assert "restore a.txt" in p.stdout, p.stdout
    assert "4 messages" in p.stdout and "second question" in p.stdout, \
        p.stdout
    assert get(w, "a.txt") == "v2\n"
    p = d.ctl("rewind", "cv", "--turn", "2", "--conversation")
    assert p.returncode == 0, p.stderr
    assert "restored a.txt" in p.stdout, p.stdout
    assert "dropped 4 messages" in p.stdout, p.stdout
    p = d.ctl("--help")
    assert "--conversation" in p.stdout + p.stderr
    p = d.ctl("audit")
    assert "rewound  the conversation by" in p.stdout, p.stdout
    assert "4 message(s) after seq" in p.stdout, p.stdout
    fake.push({"text": "answer-three"})
    req = next_turn(w, fake, "third question")
    assert req.user_texts() == ["first question", "third question"]


def test_repl_offers_and_takes_the_conversation(make_daemon, fake,
                                                tmpdir_short):
    """In a terminal: /rewind N shows the diff and what the conversation
    would lose, and "c" drops it too; /rewind N --conversation on a turn
    that changed no file asks about the messages alone."""
    import shutil
    import pytest
    if shutil.which("tmux") is None:
        pytest.skip("tmux is not installed")
    from test_repl import GBR, Term, quit_repl
    import uuid
    import subprocess
    w = conv_world(make_daemon, fake, tmpdir_short)
    c, sid = w["c"], w["sid"]
    server = "gbrt-" + uuid.uuid4().hex[:8]
    try:
        t = Term(server, "rw", w["d"].env, w["ws"])
        t.keys("clear; %s" % GBR, "Enter")
        t.wait(r"^gbr:cv>\s*$")
        t.type("/rewind 2")
        t.keys("Enter")
        s = t.wait(r"undo these changes\? \[y/N, c: and drop the 4 later "
                   r"messages\]")
        assert "restore a.txt" in s, s
        assert re.search(r'the conversation after seq \d+: 4 messages, from '
                         r'"second question"', s), s
        assert get(w, "a.txt") == "v2\n"
        t.type("c")
        t.keys("Enter")
        s = t.wait(r"dropped 4 messages from the conversation")
        assert "restored a.txt" in s
        t.wait(r"\* conversation rewound: 4 messages after seq \d+ dropped")
        assert get(w, "a.txt") == "v1\n"
        assert [m["role"] for m in agent.history(c, sid)][-1] == "rewind"
        # The next message from the REPL: the model has forgotten turn 2.
        fake.push({"text": "answer-three"})
        t.type("third question")
        t.keys("Enter")
        t.wait(r"answer-three")
        assert last_request(fake).user_texts() == ["first question",
                                                   "third question"]
        # A turn that changed no file: the messages alone; "n" keeps them.
        n = len(agent.history(c, sid))
        t.type("/rewind 3 --conversation")
        t.keys("Enter")
        t.wait(r"drop these 2 messages from the conversation\? \[y/N\]")
        t.type("n")
        t.keys("Enter")
        t.wait(r"^nothing was undone")
        assert len(agent.history(c, sid)) == n
        t.type("/rewind --conversation 3")
        t.keys("Enter")
        t.wait(r"drop these 2 messages from the conversation\? \[y/N\]\s*$")
        t.type("y")
        t.keys("Enter")
        t.wait(r"dropped 2 messages from the conversation")
        assert agent.history(c, sid)[-1]["role"] == "rewind"
        quit_repl(t)
    finally:
        subprocess.run(["tmux", "-L", server, "kill-server"],
                       capture_output=True)


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
