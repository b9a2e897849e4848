"""tool.list and tool.call against a real gbrd: the attack suite (every
path escape the sandbox must refuse, through the same path the agent
uses), the legitimate cases that must work, the sandbox.denied event on
an attached client, the history records, request_id idempotence, and
gbrctl tool."""
import json
import os
import time

import pytest

from conftest import Conn

TOOLS = {"read_file", "write_file", "edit_file", "list_directory", "search"}
DENIED = {"path_traversal", "protected_path", "read_only", "not_found",
          "not_a_file", "too_large", "invalid_path", "permission_denied"}


def evparams(conn):
    return [e["params"] for e in conn.events if e.get("method") == "event"]


def wait_for(conn, pred, timeout=10.0):
    deadline = time.time() + timeout
    while not any(pred(p) for p in evparams(conn)):
        assert time.time() < deadline, evparams(conn)[-5:]
        conn.sock.settimeout(max(0.1, deadline - time.time()))
        m = conn.recv()
        if m.get("method") == "event":
            conn.events.append(m)
    return [p for p in evparams(conn) if pred(p)]


def snapshot(top):
    out = {}
    for d, dirs, files in os.walk(top):
        for n in dirs + files:
            p = os.path.join(d, n)
            st = os.lstat(p)
            out[p] = (st.st_size, st.st_mtime_ns)
    return out


@pytest.fixture
def world(daemon, tmpdir_short):
    """/w/proj (the workspace), /w/proj-evil and /w/outside with a secret."""
    top = os.path.join(tmpdir_short, "w")
    ws = os.path.join(top, "proj")
    evil = os.path.join(top, "proj-evil")
    out = os.path.join(top, "outside")
    for d in (ws, evil, out):
        os.makedirs(d)
    secret = os.path.join(out, "secret.txt")
    with open(secret, "w") as f:
        f.write("TOP SECRET\n")
    with open(os.path.join(evil, "x.txt"), "w") as f:
        f.write("evil\n")
    with open(os.path.join(ws, "hello.txt"), "w") as f:
        f.write("hello\n")
    c = daemon.conn()
    s = c.call("session.create", {"workspace": ws})["result"]
    w = daemon.conn()
    w.call("session.attach", {"session": s["id"]})
    return dict(top=top, ws=ws, evil=evil, out=out, secret=secret, c=c, w=w,
                sid=s["id"], d=daemon)


def call(world, tool, **args):
    return world["c"].call("tool.call", {"session": world["sid"], "tool": tool,
                                         "args": args})


def test_tool_list(daemon):
    r = daemon.conn().call("tool.list")["result"]["tools"]
    names = {t["name"] for t in r}
    assert TOOLS <= names
    for t in r:
        assert t["inputSchema"]["type"] == "object"
        assert set(t["annotations"]) >= {"readOnlyHint", "destructiveHint"}
    ro = {t["name"]: t["annotations"]["readOnlyHint"] for t in r}
    assert ro["read_file"] is True and ro["write_file"] is False


def test_status_says_resolver(daemon):
    sec = daemon.conn().call("daemon.status")["result"]["security"]
    assert sec["sandbox_resolver"] in ("openat2", "openat-walk")


def test_read_write_records_history(world):
    r = call(world, "read_file", path="hello.txt")["result"]
    assert "hello" in json.dumps(r["result"])
    r = call(world, "write_file", path="new/deep/a.txt", content="x")
    assert "result" in r, r
    with open(os.path.join(world["ws"], "new/deep/a.txt")) as f:
        assert f.read() == "x"
    evs = wait_for(world["w"], lambda p: p["type"] == "tool.result" and
                   p["tool"] == "write_file")
    types = [p["type"] for p in evparams(world["w"])]
    assert types.count("tool.call") == 2 and types.count("tool.result") == 2
    h = world["c"].call("session.history", {"session": world["sid"]})["result"]
    roles = [m["role"] for m in h["messages"]]
    assert roles == ["assistant", "tool", "assistant", "tool"]
    assert h["system"]["role"] == "system" and h["system"]["content"]


def test_request_id_runs_once(world):
    p = {"session": world["sid"], "tool": "write_file",
         "args": {"path": "once.txt", "content": "1"}, "request_id": "w-1"}
    r1 = world["c"].call("tool.call", p)["result"]
    with open(os.path.join(world["ws"], "once.txt"), "w") as f:
        f.write("changed by a human")
    r2 = world["c"].call("tool.call", p)["result"]
    assert r2["duplicate"] is True and r2["call_id"] == r1["call_id"]
    with open(os.path.join(world["ws"], "once.txt")) as f:
        assert f.read() == "changed by a human"
    h = world["c"].call("session.history", {"session": world["sid"]})["result"]
    assert len(h["messages"]) == 2


def test_unknown_tool_and_bad_args(world):
    r = call(world, "nope")
    assert r["error"]["data"]["kind"] == "method_not_found"
    r = call(world, "read_file", pathx="a")
    assert r["error"]["data"]["kind"] == "invalid_params"
    r = world["c"].call("tool.call", {"session": "zzz", "tool": "read_file",
                                      "args": {"path": "a"}})
    assert r["error"]["data"]["kind"] == "session_not_found"


def make_links(world):
    ws, out, secret = world["ws"], world["out"], world["secret"]
    os.symlink(secret, os.path.join(ws, "ln_file"))
    os.symlink(out, os.path.join(ws, "ln_dir"))
    os.symlink("ln_file", os.path.join(ws, "ln_chain"))
    os.symlink("../outside/secret.txt", os.path.join(ws, "ln_rel"))
    os.symlink("/nonexistent/zzz", os.path.join(ws, "ln_dangling"))
    os.symlink("ln_loop2", os.path.join(ws, "ln_loop1"))
    os.symlink("ln_loop1", os.path.join(ws, "ln_loop2"))
    os.symlink("/proc/self/root" + secret, os.path.join(ws, "ln_proc_root"))
    os.symlink("/proc/self/fd/0", os.path.join(ws, "ln_proc_fd"))
    os.symlink(os.path.join(ws, "hello.txt"), os.path.join(ws, "ln_abs_inside"))
    os.symlink("hello.txt", os.path.join(ws, "ln_inside"))
    os.makedirs(os.path.join(ws, "sub"))
    os.symlink("..", os.path.join(ws, "sub", "up"))
    try:
        os.link(secret, os.path.join(ws, "hardlink"))
    except OSError:
        pass


ATTACKS = [
    "../outside/secret.txt", "../../outside/secret.txt", "a/../../outside/secret.txt",
    "./../outside/secret.txt", "sub/../../outside/secret.txt",
    "..", "../proj-evil/x.txt", "{evil}/x.txt", "{secret}", "/etc/passwd",
    "ln_file", "ln_dir/secret.txt", "ln_chain", "ln_rel", "ln_dangling",
    "ln_loop1", "ln_abs_inside", "ln_proc_root", "ln_proc_fd", "sub/up/ln_file",
    "/proc/self/root{secret}", "/proc/self/fd/0", "a\u0000b", "a\u0007b",
    "a\u202eb.txt", "x" * 5000, ("d/" * 3000) + "f",
]


@pytest.mark.parametrize("tool", ["read_file", "write_file"])
@pytest.mark.parametrize("attack", ATTACKS)
def test_attack(world, tool, attack):
    make_links(world)
    path = attack.format(evil=world["evil"], secret=world["secret"])
    before = snapshot(world["top"])
    before = {k: v for k, v in before.items() if not k.startswith(world["ws"])}
    args = {"path": path}
    if tool == "write_file":
        args["content"] = "PWNED"
    if "\u0000" in path:
        # The protocol layer refuses a NUL inside any JSON string (-32700,
        # id null): it never reaches the sandbox.
        world["c"].request("tool.call", {"session": world["sid"], "tool": tool,
                                         "args": args})
        r = world["c"].recv()
        assert r["id"] is None and r["error"]["code"] == -32700, r
        with open(world["secret"]) as f:
            assert f.read() == "TOP SECRET\n"
        return
    r = call(world, tool, **args)
    assert "error" in r, (path, r)
    kind = r["error"]["data"]["kind"]
    assert kind in DENIED, (path, kind)
    with open(world["secret"]) as f:
        assert f.read() == "TOP SECRET\n"
    after = {k: v for k, v in snapshot(world["top"]).items()
             if not k.startswith(world["ws"])}
    assert after == before
    evs = wait_for(world["w"], lambda p: p["type"] == "sandbox.denied")
    assert evs[-1]["kind"] == kind and evs[-1]["tool"] == tool
    assert "\n" not in evs[-1]["path"] and "\u202e" not in evs[-1]["path"] \
        and "\u0000" not in evs[-1]["path"]


def test_hard_link_write_refused(world):
    make_links(world)
    if not os.path.exists(os.path.join(world["ws"], "hardlink")):
        pytest.skip("no hard links here")
    r = call(world, "write_file", path="hardlink", content="PWNED")
    assert "error" in r and r["error"]["data"]["kind"] in DENIED
    with open(world["secret"]) as f:
        assert f.read() == "TOP SECRET\n"


def test_gbr_envs_protected(world):
    # Never written silently: the call waits for a human (test_approvals.py
    # has the rest); write_kind denies it, and nothing is written.
    from test_approvals import write_kind
    assert write_kind(world["c"], world["sid"], ".gbr_envs/default.ini",
                      "[env]\nautonomy = full\n") == "env_dir"
    assert not os.path.exists(os.path.join(world["ws"], ".gbr_envs"))
    evs = wait_for(world["w"], lambda p: p["type"] == "approval.resolved")
    assert evs[-1]["approval"]["state"] == "denied"
    assert write_kind(world["c"], world["sid"], "gleam.toml") == \
        "protected_path"
    assert not os.path.exists(os.path.join(world["ws"], "gleam.toml"))


@pytest.mark.parametrize("path", ["a..b.txt", "ln_inside",
                                  "d1/d2/d3/d4/d5/d6/d7/f.txt", "héllo-ünï.txt",
                                  "日本語.txt", "sub/../hello.txt"])
def test_legitimate(world, path):
    make_links(world)
    target = os.path.join(world["ws"], path)
    if not os.path.lexists(target):
        os.makedirs(os.path.dirname(target), exist_ok=True)
        with open(target, "w") as f:
            f.write("hello\n")
    r = call(world, "read_file", path=path)
    assert "result" in r, (path, r)
    assert "hello" in json.dumps(r["result"])
    if not os.path.islink(target):
        r = call(world, "write_file", path=path, content="new")
        assert "result" in r, (path, r)
        with open(target) as f:
            assert f.read() == "new"


def test_gbrctl_tool(world):
    d = world["d"]
    r = d.ctl("--json", "tool", world["sid"], "read_file", '{"path":"hello.txt"}')
    assert r.returncode == 0, r.stderr
    assert "hello" in r.stdout
    r = d.ctl("tool", world["sid"], "read_file", '{"path":"../outside/secret.txt"}')
    assert r.returncode == 1 and "path_traversal" in r.stderr
    r = d.ctl("tools")
    assert r.returncode == 0 and "read_file" in r.stdout


def test_answered_reads_survive_kill9(daemon, tmpdir_short):
    """A read is answered only once its two records are written, with or
    without a client attached: kill -9 right after the answer loses
    nothing. A resent request_id is answered as a duplicate, never run
    again."""
    ws = os.path.join(tmpdir_short, "ws")
    os.makedirs(ws)
    with open(os.path.join(ws, "a.txt"), "w") as f:
        f.write("a\n")
    c = daemon.conn()
    sid = c.call("session.create", {"workspace": ws})["result"]["id"]
    p = {"session": sid, "tool": "read_file", "args": {"path": "a.txt"},
         "request_id": "r-1"}
    r1 = c.call("tool.call", p)["result"]
    r2 = c.call("tool.call", p)
    assert "result" in r2, r2
    r2 = r2["result"]
    assert r2["duplicate"] is True and r2["call_id"] == r1["call_id"]
    # Twenty more, each followed at once by kill -9 for the last one.
    calls = [r1["call_id"]]
    for i in range(20):
        calls.append(c.call("tool.call", {"session": sid, "tool": "read_file",
                                          "args": {"path": "a.txt"}})
                     ["result"]["call_id"])
    daemon.kill9()
    daemon.start()
    h = daemon.conn().call("session.history",
                           {"session": sid, "limit": 100})["result"]
    assert [m["role"] for m in h["messages"]] == ["assistant", "tool"] * 21
    assert [m["call_id"] for m in h["messages"][1::2]] == calls


def test_history_after_a_read_has_it(daemon, tmpdir_short):
    """The history asked for right after a read has its records
    (read-your-writes), every time."""
    ws = os.path.join(tmpdir_short, "ws")
    os.makedirs(ws)
    with open(os.path.join(ws, "a.txt"), "w") as f:
        f.write("a\n")
    c = daemon.conn()
    sid = c.call("session.create", {"workspace": ws})["result"]["id"]
    for i in range(20):
        r = c.call("tool.call", {"session": sid, "tool": "read_file",
                                 "args": {"path": "a.txt"}})["result"]
        h = c.call("session.history", {"session": sid, "limit": 1})["result"]
        assert h["total"] == 2 * (i + 1)
        assert h["messages"][-1]["call_id"] == r["call_id"]
