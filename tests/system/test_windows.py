"""gbr on Windows, under Wine: gbrd.exe on a named pipe, driven through
gbrctl.exe and a raw pipe client. The same protocol, byte for byte, as the
Unix socket: hello, bad input, sessions, attach with after_seq from two
clients, the file tools through tool.call and their sandbox, the disk log
surviving a process killed in the middle of its work, one daemon per pipe,
and what gbrctl status says holds there. Skips, saying why, without a
Windows build (GBR_WIN_BUILD_DIR) or Wine (see wine.py)."""
import json
import os
import shutil
import tempfile
import time

import pytest

import wine

pytestmark = pytest.mark.skipif(wine.why_not() is not None,
                                reason=wine.why_not() or "")


@pytest.fixture(scope="module", autouse=True)
def wine_ready():
    wine.boot()


@pytest.fixture
def root():
    d = tempfile.mkdtemp(prefix="gbrw-", dir="/tmp")
    os.chmod(d, 0o700)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def win_daemon(root):
    made = []

    def make(config=None, start=True):
        sub = os.path.join(root, "d%d" % len(made))
        os.makedirs(sub, mode=0o700)
        d = wine.WinDaemon(sub, config=config)
        made.append(d)
        if start:
            d.start()
        return d

    yield make
    for d in made:
        d.stop()


@pytest.fixture
def ws(root):
    d = os.path.join(root, "ws")
    os.makedirs(d)
    return d


def params(events):
    return [e["params"] for e in events if e.get("method") == "event"]


def session_events(events):
    return [p for p in params(events)
            if p["type"] not in ("replay_complete", "resync_required")]


def tool(c, sid, name, args):
    return c.call("tool.call", {"session": sid, "tool": name, "args": args})


def tool_ok(c, sid, name, args):
    """The tool's own result, once it succeeded."""
    r = tool(c, sid, name, args)
    assert "result" in r, r
    return r["result"]["result"]


def test_hello_and_status_over_the_pipe(win_daemon):
    d = win_daemon()
    c = d.conn()
    assert c.hello["protocol"] == 1 and c.hello["server"] == "gbrd"
    assert len(c.hello["epoch"]) == 16
    st = d.ctl_json("status")
    sec = st["security"]
    # What holds on Windows, said plainly.
    assert sec["listener"]["kind"] == "named pipe"
    assert sec["listener"]["dacl"] == "owner only"
    assert sec["listener"]["remote_clients"] == "rejected"
    assert sec["runner"]["commands"] == "unavailable"
    assert "confine" in sec["runner"]["refusal"]
    # A second client sees another epoch only after a restart.
    assert d.conn().hello["epoch"] == c.hello["epoch"]


def test_malformed_json_is_answered_and_the_pipe_stays(win_daemon):
    d = win_daemon()
    c = d.conn()
    c.send_raw(b'{"jsonrpc":"2.0","id":1,"method":\n')
    r = c.recv()
    assert r["error"]["code"] == -32700 and r["id"] is None
    c.send_raw(b'[1,2,3]\n')
    r = c.recv()
    assert r["error"]["code"] == -32600
    assert "result" in c.call("daemon.ping")


def test_oversized_line_gets_too_large_and_is_closed(win_daemon):
    d = win_daemon(config="[daemon]\nmax_line_bytes = 65536\n")
    c = d.conn()
    c.send_raw(b'{"jsonrpc":"2.0","id":9,"method":"daemon.ping","params":{"x":"' +
               b"a" * 200000 + b'"}}\n')
    r = c.recv()
    assert r["error"]["data"]["kind"] == "too_large"
    assert c.closed()
    # The daemon itself is fine.
    assert "result" in d.conn().call("daemon.ping")


def test_sessions_create_list_close(win_daemon, ws):
    d = win_daemon()
    c = d.conn()
    s = c.call("session.create", {"workspace": wine.winpath(ws), "name": "w"})["result"]
    assert s["workspace"].lower() == wine.winpath(ws).lower()
    lst = c.call("session.list")["result"]["sessions"]
    assert [x["name"] for x in lst] == ["w"]
    assert c.call("session.create", {"workspace": "rel"})["error"]["data"]["kind"] == "invalid_params"
    assert c.call("session.create", {"workspace": wine.winpath(ws) + "/nope"})["error"]["data"]["kind"] == "not_found"
    assert c.call("session.close", {"session": "w"})["result"]["closed"] is True
    assert c.call("session.list")["result"]["sessions"] == []


def test_file_tools_through_tool_call_and_their_sandbox(win_daemon, ws, root):
    d = win_daemon()
    c = d.conn()
    sid = c.call("session.create", {"workspace": wine.winpath(ws)})["result"]["id"]
    r = tool_ok(c, sid, "write_file", {"path": "src/a.txt", "content": "one\ntwo\n"})
    assert r["created"] is True and r["bytes"] == 8
    with open(os.path.join(ws, "src", "a.txt"), "rb") as f:
        assert f.read() == b"one\ntwo\n"
    r = tool_ok(c, sid, "read_file", {"path": "src/a.txt"})
    assert r["content"] == "one\ntwo\n" and r["total_lines"] == 2
    tool_ok(c, sid, "edit_file", {"path": "src/a.txt", "old_string": "two", "new_string": "deux"})
    with open(os.path.join(ws, "src", "a.txt"), "rb") as f:
        assert f.read() == b"one\ndeux\n"
    r = tool_ok(c, sid, "list_directory", {"path": "src"})
    assert [e["path"] for e in r["entries"]] == ["a.txt"]
    hits = tool_ok(c, sid, "search", {"pattern": "de+ux"})
    assert [(m["path"], m["line"]) for m in hits["matches"]] == [("src/a.txt", 2)]
    # Names differ only in case are one file on Windows: the same file.
    assert tool_ok(c, sid, "read_file", {"path": "SRC/A.TXT"})["content"] == "one\ndeux\n"
    # Out of the workspace: refused, and nothing is written there.
    outside = os.path.join(root, "outside.txt")
    for p in ("../outside.txt", wine.winpath(outside), "src/../../outside.txt"):
        r = tool(c, sid, "write_file", {"path": p, "content": "x"})
        assert r["error"]["data"]["kind"] == "path_traversal", (p, r)
    assert not os.path.exists(outside)
    # .gbr_envs is always protected: the write waits for a human, who says no.
    rid = c.request("tool.call", {"session": sid, "tool": "write_file",
                                  "args": {"path": ".gbr_envs/default.ini", "content": "[env]\n"}})
    h = d.conn()
    deadline = time.time() + 20
    while not (pending := h.call("approval.list", {"session": sid})["result"]["approvals"]):
        assert time.time() < deadline, "no approval was asked for"
        time.sleep(0.1)
    assert [a["path"] for a in pending] == [".gbr_envs/default.ini"]
    assert "result" in h.call("approval.resolve", {"id": pending[0]["id"], "decision": "deny",
                                                   "reason": "no"})
    while True:
        m = c.recv()
        if m.get("id") == rid:
            break
    assert m["error"]["data"]["kind"] == "denied", m
    assert not os.path.exists(os.path.join(ws, ".gbr_envs", "default.ini"))
    # Commands are refused, naming why.
    r = tool(c, sid, "run_command", {"argv": ["cmd", "/c", "echo hi"]})
    assert r["error"]["data"]["kind"] == "unavailable"


def test_attach_after_seq_from_two_clients(win_daemon, ws):
    d = win_daemon()
    a, b = d.conn(), d.conn()
    sid = a.call("session.create", {"workspace": wine.winpath(ws)})["result"]["id"]
    a.call("session.attach", {"session": sid})
    tool(b, sid, "write_file", {"path": "one.txt", "content": "1"})
    a.wait_event(lambda m: m.get("method") == "event" and m["params"]["type"] == "tool.result")
    last = session_events(a.events)[-1]["seq"]
    assert a.call("session.detach", {"session": sid})["result"]["detached"] == 1
    a.events.clear()
    for n in ("two", "three"):
        tool(b, sid, "write_file", {"path": n + ".txt", "content": n})
    b.call("session.attach", {"session": sid, "after_seq": last})
    b.wait_event(lambda m: m.get("method") == "event" and m["params"]["type"] == "replay_complete")
    missed = session_events(b.events)
    assert missed and [p["seq"] for p in missed] == list(range(last + 1, last + 1 + len(missed)))
    r = a.call("session.attach", {"session": sid, "after_seq": last})["result"]
    assert r["seq"] == missed[-1]["seq"]
    a.wait_event(lambda m: m.get("method") == "event" and m["params"]["type"] == "replay_complete")
    assert session_events(a.events) == missed


def test_disk_log_survives_a_killed_daemon(win_daemon, ws):
    d = win_daemon()
    c = d.conn()
    sid = c.call("session.create", {"workspace": wine.winpath(ws), "name": "k"})["result"]["id"]
    for i in range(20):
        tool(c, sid, "write_file", {"path": "f%d.txt" % i, "content": str(i)})
    before = c.call("session.list")["result"]["sessions"][0]
    c.call("session.attach", {"session": sid, "after_seq": 0})
    c.wait_event(lambda m: m.get("method") == "event" and m["params"]["type"] == "replay_complete")
    seen = [json.dumps(p, sort_keys=True) for p in session_events(c.events)]
    epoch = c.hello["epoch"]
    d.kill9()
    d.start()
    c2 = d.conn()
    assert c2.hello["epoch"] != epoch
    after = c2.call("session.list")["result"]["sessions"][0]
    assert after["seq"] == before["seq"] and after["name"] == "k"
    c2.call("session.attach", {"session": sid, "after_seq": 0})
    c2.wait_event(lambda m: m.get("method") == "event" and m["params"]["type"] == "replay_complete")
    assert [json.dumps(p, sort_keys=True) for p in session_events(c2.events)] == seen


def test_one_daemon_per_pipe(win_daemon):
    d = win_daemon()
    r = d.ctl("ping")
    assert r.returncode == 0
    import subprocess
    p = subprocess.run([wine.WINE, wine.GBRD_EXE, "-f"], env=d.env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode != 0
    assert "already" in p.stderr
    assert d.ctl("ping").returncode == 0


def test_gbrctl_exit_codes(win_daemon):
    d = win_daemon()
    assert d.ctl("ping").returncode == 0
    assert d.ctl("call", "no.such.method").returncode == 1
    assert d.ctl("frobnicate").returncode == 2
    d.shutdown()
    assert d.ctl("ping").returncode == 3
