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
import subprocess
import tempfile
import threading
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
    assert sec["runner"]["commands"] == "allowed"
    assert sec["runner"]["writes"].startswith(
        "commands are not confined to the workspace on this platform")
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
    # Commands run (in a Job object: test_windows_runner.py says more).
    r = tool_ok(c, sid, "run_command", {"argv": ["cmd", "/c", "echo hi"]})
    assert r["stdout"] == "hi\r\n" and r["exit_code"] == 0, r


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


CLEAN_OFFSET = 48        # the segment header's clean marker (test_disklog.py)


def append(c, data, durable=True):
    return c.call("log.append", {"type": "user.test", "data": data, "durable": durable})


def read_all(c, after=0):
    out = []
    while True:
        r = c.call("log.read", {"after_seq": after, "limit": 1000})["result"]
        out += r["records"]
        if r["records"]:
            after = r["records"][-1]["seq"]
        if not r["more"]:
            return out


def segments(d):
    logdir = os.path.join(d.state, "log")
    return sorted(f for f in os.listdir(logdir) if f.endswith(".seg"))


def test_torn_tail_is_cut_at_the_next_start(win_daemon):
    # Without the hash chain, whose head at shutdown would be the last
    # record (the one cut): the test counts the records it appended.
    d = win_daemon(config="[log]\nchain = no\n")
    c = d.conn()
    for i in range(50):
        assert "result" in append(c, {"i": i})
    c.close()
    assert d.shutdown() == 0
    seg = os.path.join(d.state, "log", segments(d)[-1])
    # What a process ended in the middle of a write leaves: the clean
    # marker unset and the last record cut short.
    with open(seg, "r+b") as f:
        f.seek(CLEAN_OFFSET)
        f.write(b"\0" * 8)
        f.seek(0, os.SEEK_END)
        f.truncate(f.tell() - 7)
    v = d.ctl("log", "verify", "--state-dir", wine.winpath(d.state))
    assert v.returncode == 1 and "TORN" in v.stdout, (v.stdout, v.stderr)
    d.start()
    c = d.conn()
    st = c.call("daemon.status")["result"]["disklog"]
    assert st["torn_tail"] is not None and st["previous_shutdown"] == "crash"
    assert "torn tail" in d.log()
    assert [x["data"]["i"] for x in read_all(c)] == list(range(49))
    assert append(c, "next")["result"]["seq"] == 50
    c.close()
    d.shutdown()
    assert d.ctl("log", "verify", "--state-dir", wine.winpath(d.state)).returncode == 0


@pytest.mark.parametrize("how", ["sigkill", "taskkill"])
def test_killed_while_appending_loses_nothing_acknowledged(win_daemon, how):
    """Writers append durable records as fast as they can; gbrd.exe is
    ended mid-stream. Every record it acknowledged is there after a
    restart, byte for byte, and the log is whole."""
    d = win_daemon()
    winpid = d.conn().hello["pid"]
    acked = {}
    lock = threading.Lock()
    stop = threading.Event()

    def writer(k):
        i = 0
        try:
            c = d.conn()
            while not stop.is_set():
                data = {"w": k, "i": i, "pad": "x" * (i % 300)}
                r = append(c, data)
                if "result" in r:
                    with lock:
                        acked[r["result"]["seq"]] = data
                i += 1
        except (EOFError, TimeoutError, BrokenPipeError, OSError):
            pass

    threads = [threading.Thread(target=writer, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    deadline = time.time() + 20
    while len(acked) < 300 and time.time() < deadline:
        time.sleep(0.05)
    if how == "sigkill":
        d.kill9()
    else:
        r = d.taskkill(winpid)
        assert r.returncode == 0, (r.stdout, r.stderr)
    stop.set()
    for t in threads:
        t.join(30)
    assert len(acked) >= 300
    d.start()
    c = d.conn()
    got = {x["seq"]: x["data"] for x in read_all(c)}
    missing = [seq for seq in acked if got.get(seq) != acked[seq]]
    assert missing == [], "acknowledged records lost: %r" % missing[:10]
    assert c.call("daemon.status")["result"]["disklog"]["previous_shutdown"] == "crash"
    c.close()
    d.shutdown()
    assert d.ctl("log", "verify", "--state-dir", wine.winpath(d.state)).returncode == 0


def test_gbrctl_starts_gbrd_once_and_gbrd_reports_its_start(win_daemon, root):
    d = win_daemon(start=False)
    d.env["LOCALAPPDATA"] = wine.winpath(os.path.join(root, "localappdata"))
    # Nobody listens: gbrctl start runs gbrd.exe, which goes to the
    # background and returns once its pipe answers.
    r = d.ctl("start")
    assert r.returncode == 0, (r.stdout, r.stderr)
    pid = d.ctl_json("status")["pid"]
    # A second start finds it and starts nothing.
    assert d.ctl("start").returncode == 0
    assert d.ctl_json("status")["pid"] == pid
    assert d.ctl("shutdown").returncode == 0
    deadline = time.time() + 30
    while d.ctl("ping").returncode != 3:
        assert time.time() < deadline, "gbrd.exe did not stop"
        time.sleep(0.2)
    # A daemon that cannot start says why, through the detached start.
    bad = os.path.join(root, "bad.conf")
    with open(bad, "w") as f:
        f.write("[daemon]\nmax_clients = -1\n")
    with tempfile.TemporaryFile() as err:
        p = subprocess.run([wine.WINE, wine.GBRD_EXE, "-c", wine.winpath(bad)],
                           env=d.env, stdin=subprocess.DEVNULL,
                           stdout=subprocess.DEVNULL, stderr=err, timeout=60)
        err.seek(0)
        text = err.read().decode()
    assert p.returncode == 1 and "max_clients" in text, (p.returncode, text)
    assert d.ctl("ping").returncode == 3


def test_profiles_reload_live(win_daemon, ws):
    """The profile watcher polls on Windows (ADR-0012's 2 s): an edited
    profile is in force within seconds, a broken one is refused and the
    one in force stays."""
    d = win_daemon()
    c = d.conn()
    os.makedirs(os.path.join(ws, ".gbr_envs"))
    prof = os.path.join(ws, ".gbr_envs", "default.ini")
    with open(prof, "w") as f:
        f.write("[env]\nprotected_files = a.txt\n")
    sid = c.call("session.create", {"workspace": wine.winpath(ws)})["result"]["id"]
    c.call("session.attach", {"session": sid})
    show = c.call("env.show", {"session": sid})["result"]
    assert "a.txt" in json.dumps(show)
    time.sleep(1.1)
    with open(prof, "w") as f:
        f.write("[env]\nprotected_files = b.txt\n")
    c.wait_event(lambda m: m.get("method") == "event" and
                 m["params"]["type"] == "env.reloaded", timeout=20)
    show = c.call("env.show", {"session": sid})["result"]
    assert "b.txt" in json.dumps(show) and "a.txt" not in json.dumps(show)
    time.sleep(1.1)
    with open(prof, "w") as f:
        f.write("[env]\nautonomy = reckless\n")
    c.wait_event(lambda m: m.get("method") == "event" and
                 m["params"]["type"] == "env.invalid", timeout=20)
    show = c.call("env.show", {"session": sid})["result"]
    assert "b.txt" in json.dumps(show)


def test_a_client_that_does_not_read_is_evicted(win_daemon, ws):
    """The bounded queue holds on Windows too: the bridge passes the
    backpressure through, and a client that stops reading is evicted, the
    daemon unaffected."""
    d = win_daemon(config="[daemon]\nclient_queue_bytes = 64K\n")
    c = d.conn()
    sid = c.call("session.create", {"workspace": wine.winpath(ws)})["result"]["id"]
    slow = d.conn()
    slow.call("session.attach", {"session": sid})
    slow.pause()
    big = "y" * 3000
    for i in range(600):
        assert "result" in c.call("session.send", {"session": sid, "text": big + str(i)})
        if c.call("session.list")["result"]["sessions"][0]["attached"] == 0:
            break
    assert c.call("session.list")["result"]["sessions"][0]["attached"] == 0
    slow.resume()
    assert slow.closed(timeout=20)
    # Its last message says why; what it did get has no gap.
    assert slow.events[-1]["params"]["type"] == "evicted", slow.events[-3:]
    got = [e["params"]["seq"] for e in slow.events
           if e.get("method") == "event" and "seq" in e["params"]]
    assert got == list(range(got[0], got[0] + len(got)))
    assert "result" in c.call("daemon.ping")
    assert c.call("daemon.status")["result"]["clients"]["evicted"] >= 1


def test_gbrctl_mcp_serves_the_tools_over_stdio(win_daemon, ws):
    """gbrctl.exe mcp: an MCP client's stdin and stdout, pumped to sockets
    its poll loop waits on, through the same sandbox."""
    d = win_daemon()
    msgs = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize",
         "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                    "clientInfo": {"name": "pytest", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "write_file", "arguments": {"path": "m.txt", "content": "via mcp"}}},
        {"jsonrpc": "2.0", "id": 4, "method": "tools/call",
         "params": {"name": "write_file", "arguments": {"path": "../out.txt", "content": "x"}}},
    ]
    # An MCP client keeps its end open while it waits (the bridge ends
    # when stdin does): the requests, then the answers, then the end.
    p = subprocess.Popen([wine.WINE, wine.GBRCTL_EXE, "mcp", "--workspace",
                          wine.winpath(ws)], env=d.env, stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
    got = {}
    for m in msgs:
        p.stdin.write((json.dumps(m) + "\n").encode())
        p.stdin.flush()
        if "id" in m:
            while m["id"] not in got:
                line = p.stdout.readline()
                assert line, "gbrctl mcp ended early"
                r = json.loads(line)
                if "id" in r:
                    got[r["id"]] = r
    p.stdin.close()
    assert p.wait(30) == 0
    assert got[1]["result"]["serverInfo"]["name"] == "gbr"
    names = [t["name"] for t in got[2]["result"]["tools"]]
    assert "write_file" in names and "read_file" in names
    assert got[3]["result"]["isError"] is False
    with open(os.path.join(ws, "m.txt")) as f:
        assert f.read() == "via mcp"
    assert got[4]["result"]["isError"] is True
    assert got[4]["result"]["content"][0]["text"].startswith("path_traversal")
    assert not os.path.exists(os.path.join(os.path.dirname(ws), "out.txt"))


def test_max_clients_holds_on_the_pipe(win_daemon):
    """The Unix limits are the limits on the pipe: past max_clients a new
    client gets busy and is closed; the others go on."""
    d = win_daemon(config="[daemon]\nmax_clients = 2\n")
    a = d.conn()
    b = d.conn()
    c = d.conn(hello=False)
    r = c.recv()
    assert r["error"]["data"]["kind"] == "busy", r
    assert c.closed()
    assert "result" in a.call("daemon.ping")
    assert "result" in b.call("daemon.ping")
    st = a.call("daemon.status")["result"]
    assert st["listener"]["refused_busy"] >= 1
    # Room again for gbrctl's shutdown at the end.
    for x in (a, b, c):
        x.close()
