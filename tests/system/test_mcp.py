"""gbrctl mcp, the MCP server over stdio.

Two kinds of client drive it. The official MCP TypeScript SDK
(@modelcontextprotocol/sdk, installed from npm into tests/mcp by `npm ci`
the first time; if that cannot be done the SDK tests FAIL, they never skip)
through tests/mcp/client.mjs: tools, reads and writes, the sandbox suite's
path attacks, concurrency, cancellation and approvals. And a raw client
written here, for what an SDK would never send: version negotiation, calls
before initialize, malformed and over-long lines, notifications/cancelled
on the wire, gbrd going away, the command line.

Every line the bridge writes to stdout must be a JSON-RPC message: the raw
client parses every one, and the SDK would reject anything else.
"""
import fcntl
import json
import os
import select
import shutil
import signal
import subprocess
import time

import pytest

from conftest import GBRCTL, SANITIZER_MARKS, TOP, Conn
from test_tools import ATTACKS, make_links, snapshot

MCP_DIR = os.path.join(TOP, "tests", "mcp")
CLIENT = os.path.join(MCP_DIR, "client.mjs")
TOOLS = {"read_file", "write_file", "edit_file", "list_directory", "search"}


# --- the SDK driver --------------------------------------------------------------

_sdk_ready = []


def ensure_sdk():
    """Installs tests/mcp's packages once (npm ci); fails loudly if it cannot."""
    if _sdk_ready:
        return
    node = shutil.which("node") or shutil.which("nodejs")
    npm = shutil.which("npm")
    if node is None or npm is None:
        pytest.fail("node and npm are needed for the MCP SDK tests "
                    "(contrib/install-deps installs nodejs and npm)")
    marker = os.path.join(MCP_DIR, "node_modules", "@modelcontextprotocol",
                          "sdk", "package.json")
    # Several test runs may share the tree: one installs, the others wait.
    with open(os.path.join(MCP_DIR, "package.json")) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        lockfile = os.path.join(MCP_DIR, "package-lock.json")
        stamp = os.path.join(MCP_DIR, "node_modules", ".package-lock.json")
        if not os.path.exists(marker) or not os.path.exists(stamp) or \
                os.path.getmtime(stamp) < os.path.getmtime(lockfile):
            r = subprocess.run([npm, "ci", "--no-audit", "--no-fund"],
                               cwd=MCP_DIR, capture_output=True, text=True,
                               timeout=600)
            if r.returncode != 0 or not os.path.exists(marker):
                pytest.fail("npm ci in tests/mcp failed; the MCP SDK tests "
                            "need @modelcontextprotocol/sdk:\n%s\n%s"
                            % (r.stdout[-3000:], r.stderr[-3000:]))
    _sdk_ready.append(node)


class Sdk:
    """tests/mcp/client.mjs: the SDK as an MCP client of `gbrctl mcp`."""

    def __init__(self, d, args, root):
        ensure_sdk()
        self.errlog = os.path.join(root, "sdk-%d.log" % time.monotonic_ns())
        self.err = open(self.errlog, "wb")
        self.proc = subprocess.Popen([_sdk_ready[0], CLIENT], cwd=MCP_DIR,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.err, env=d.env)
        self.buf = b""
        self.answers = {}
        self.progress = {}
        self.next_tag = 1
        env = dict(d.env)
        r = self.run("connect", command=GBRCTL, args=["mcp"] + list(args), env=env)
        assert r["ok"], (r, self.stderr())
        self.info = r["result"]

    def send(self, op, **kw):
        tag = "t%d" % self.next_tag
        self.next_tag += 1
        kw.update(tag=tag, op=op)
        self.proc.stdin.write(json.dumps(kw).encode() + b"\n")
        self.proc.stdin.flush()
        return tag

    def _read(self, timeout):
        r, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not r:
            return False
        chunk = os.read(self.proc.stdout.fileno(), 65536)
        if not chunk:
            raise EOFError("the SDK driver exited:\n" + self.stderr())
        self.buf += chunk
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            m = json.loads(line)
            if "progress" in m:
                self.progress.setdefault(m["tag"], []).append(m["progress"])
            else:
                self.answers[m["tag"]] = m
        return True

    def wait(self, tag, timeout=60.0):
        deadline = time.time() + timeout
        while tag not in self.answers:
            left = deadline - time.time()
            assert left > 0, "no answer to %s:\n%s" % (tag, self.stderr())
            self._read(left)
        return self.answers.pop(tag)

    def wait_until(self, pred, timeout=30.0):
        deadline = time.time() + timeout
        while not pred():
            left = deadline - time.time()
            assert left > 0, self.stderr()
            self._read(min(left, 0.2))

    def run(self, op, **kw):
        return self.wait(self.send(op, **kw))

    def call(self, name, **args):
        r = self.run("call", name=name, arguments=args)
        assert r["ok"], r
        return r["result"]

    def stderr(self):
        self.err.flush()
        return open(self.errlog, errors="replace").read()[-6000:]

    def close(self):
        if self.proc.poll() is None:
            try:
                self.run("close", timeout=15)
            except (EOFError, BrokenPipeError):
                pass
            self.proc.wait(15)
        self.err.close()
        text = open(self.errlog, errors="replace").read()
        for mark in SANITIZER_MARKS:
            assert mark not in text, text[-6000:]


def text_of(result):
    assert [c["type"] for c in result["content"]] == ["text"], result
    return result["content"][0]["text"]


# --- the raw client --------------------------------------------------------------


class Raw:
    """`gbrctl mcp` with our own hands on its stdin and stdout."""

    def __init__(self, d, args, root, env=None):
        self.errlog = os.path.join(root, "raw-%d.log" % time.monotonic_ns())
        self.err = open(self.errlog, "wb")
        e = dict(d.env)
        if env:
            e.update(env)
        self.proc = subprocess.Popen([GBRCTL, "mcp"] + list(args), env=e,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.err)
        self.buf = b""
        self.msgs = []
        self.next_id = 1

    def send_raw(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, obj):
        self.send_raw(json.dumps(obj).encode() + b"\n")

    def request(self, method, params=None, rid=None):
        if rid is None:
            rid = self.next_id
            self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return rid

    def recv(self, timeout=30.0):
        """The next message; every line must be one JSON-RPC message."""
        deadline = time.time() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.time()
            if left <= 0:
                return None
            r, _, _ = select.select([self.proc.stdout], [], [], left)
            if not r:
                return None
            chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
            if not chunk:
                raise EOFError("gbrctl mcp closed stdout:\n" + self.stderr())
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        m = json.loads(line)
        assert m.get("jsonrpc") == "2.0", m
        self.msgs.append(m)
        return m

    def wait(self, rid, timeout=30.0):
        deadline = time.time() + timeout
        for m in self.msgs:
            if "method" not in m and m.get("id") == rid:
                self.msgs.remove(m)
                return m
        while True:
            m = self.recv(max(0.0, deadline - time.time()))
            assert m is not None, "no reply to %r:\n%s" % (rid, self.stderr())
            if "method" not in m and m.get("id") == rid:
                self.msgs.remove(m)
                return m

    def call(self, method, params=None, timeout=30.0):
        return self.wait(self.request(method, params), timeout)

    def init(self, version="2025-11-25"):
        r = self.call("initialize", {"protocolVersion": version, "capabilities": {},
                                     "clientInfo": {"name": "pytest", "version": "1"}})
        assert "result" in r, (r, self.stderr())
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return r["result"]

    def tool(self, name, timeout=30.0, meta=None, **args):
        p = {"name": name, "arguments": args}
        if meta:
            p["_meta"] = meta
        r = self.call("tools/call", p, timeout)
        assert "result" in r, r
        return r["result"]

    def stderr(self):
        if not self.err.closed:
            self.err.flush()
        return open(self.errlog, errors="replace").read()[-6000:]

    def close(self, timeout=15.0):
        """Closes stdin (the MCP shutdown); returns the exit status."""
        if self.proc.stdin and not self.proc.stdin.closed:
            self.proc.stdin.close()
        rc = self.proc.wait(timeout)
        self.err.close()
        text = open(self.errlog, errors="replace").read()
        for mark in SANITIZER_MARKS:
            assert mark not in text, text[-6000:]
        return rc


# --- fixtures --------------------------------------------------------------------


@pytest.fixture
def ws(tmpdir_short):
    """/w/proj (the workspace, with hello.txt), /w/outside with a secret."""
    top = os.path.join(tmpdir_short, "w")
    w = os.path.join(top, "proj")
    for p in (w, os.path.join(top, "proj-evil"), os.path.join(top, "outside")):
        os.makedirs(p)
    with open(os.path.join(top, "outside", "secret.txt"), "w") as f:
        f.write("TOP SECRET\n")
    with open(os.path.join(top, "proj-evil", "x.txt"), "w") as f:
        f.write("evil\n")
    with open(os.path.join(w, "hello.txt"), "w") as f:
        f.write("hello\n")
    return w


@pytest.fixture
def raw(daemon, ws, tmpdir_short):
    made = []

    def make(args=None, env=None):
        r = Raw(daemon, ["--workspace", ws] if args is None else args,
                tmpdir_short, env)
        made.append(r)
        return r
    yield make
    for r in made:
        if r.proc.poll() is None:
            assert r.close() == 0, r.stderr()


@pytest.fixture
def sdk(daemon, ws, tmpdir_short):
    made = []

    def make(args=None):
        s = Sdk(daemon, ["--workspace", ws] if args is None else args,
                tmpdir_short)
        made.append(s)
        return s
    yield make
    for s in made:
        s.close()


def session_of(daemon, ws):
    ss = daemon.conn().call("session.list", {"workspace": ws})["result"]["sessions"]
    assert len(ss) == 1, ss
    return ss[0]["id"]


# --- through the official SDK ----------------------------------------------------


def test_sdk_list_read_write(daemon, ws, sdk):
    s = sdk()
    assert s.info["serverVersion"]["name"] == "gbr"
    assert s.info["capabilities"]["tools"] is not None
    assert ws in s.info["instructions"]
    tools = s.run("list")["result"]["tools"]
    byname = {t["name"]: t for t in tools}
    assert TOOLS <= set(byname)
    assert byname["read_file"]["annotations"]["readOnlyHint"] is True
    assert byname["write_file"]["annotations"]["destructiveHint"] is True
    assert byname["read_file"]["inputSchema"]["required"] == ["path"]

    r = s.call("read_file", path="hello.txt")
    assert r["isError"] is False and text_of(r) == "hello\n"
    # The text block is the file; structuredContent has the rest of the result.
    assert r["structuredContent"]["total_lines"] == 1
    assert "content" not in r["structuredContent"]
    r = s.call("write_file", path="new/deep/a.txt", content="written over MCP\n")
    assert r["isError"] is False, r
    with open(os.path.join(ws, "new", "deep", "a.txt")) as f:
        assert f.read() == "written over MCP\n"
    r = s.call("edit_file", path="new/deep/a.txt", old_string="over", new_string="through")
    assert r["isError"] is False, r
    # The model wrote the change: it is not sent the diff (the history has it).
    assert "diff" not in r["structuredContent"] and "diff" not in text_of(r)
    assert r["structuredContent"]["replacements"] == 1
    assert text_of(s.call("read_file", path="new/deep/a.txt")) == "written through MCP\n"
    r = s.call("list_directory", path=".")
    assert "hello.txt" in text_of(r)

    # The same record as the agent's calls: the session's history has them.
    sid = session_of(daemon, ws)
    h = daemon.conn().call("session.history", {"session": sid})["result"]["messages"]
    tools_called = [m["tool"] for m in h if m["role"] == "assistant"]
    assert tools_called == ["read_file", "write_file", "edit_file", "read_file",
                            "list_directory"]
    diffs = [m["result"]["diff"] for m in h if m["role"] == "tool" and
             m["tool"] in ("write_file", "edit_file")]
    assert diffs[1].endswith("-written over MCP\n+written through MCP\n")


def test_sdk_errors(daemon, ws, sdk):
    s = sdk()
    r = s.call("read_file", path="../outside/secret.txt")
    assert r["isError"] is True
    assert text_of(r).startswith("path_traversal: ")
    assert r["structuredContent"]["error"]["kind"] == "path_traversal"
    r = s.call("read_file", path="nope.txt")
    assert r["isError"] is True and r["structuredContent"]["error"]["kind"] == "not_found"
    # Arguments outside the schema: a tool execution error the model can read.
    r = s.call("read_file", pathx="hello.txt")
    assert r["isError"] is True and text_of(r).startswith("invalid_params: ")
    # An unknown tool is a protocol error, -32602.
    r = s.run("call", name="no_such_tool", arguments={})
    assert r["ok"] is False and r["error"]["code"] == -32602, r
    # .gbr_envs waits for a human; denied, it is an isError result.
    t = s.send("call", name="write_file", arguments={
        "path": ".gbr_envs/default.ini", "content": "[env]\nautonomy = full\n"},
        timeout=120000)
    sid = session_of(daemon, ws)
    s.wait_until(lambda: pending_approvals(daemon, sid))
    (a,) = pending_approvals(daemon, sid)
    assert daemon.ctl("deny", a["id"]).returncode == 0
    r = s.wait(t)
    assert r["ok"] and r["result"]["isError"] is True, r
    assert r["result"]["structuredContent"]["error"]["kind"] == "denied"
    assert not os.path.exists(os.path.join(ws, ".gbr_envs", "default.ini"))


def test_sdk_path_attacks(daemon, ws, sdk):
    """The sandbox suite's attacks, through MCP: each is an isError result
    with the kind gbrd gives the same call on its own protocol, and nothing
    outside the workspace changes."""
    top = os.path.dirname(ws)
    world = dict(ws=ws, out=os.path.join(top, "outside"),
                 secret=os.path.join(top, "outside", "secret.txt"))
    make_links(world)
    s = sdk()
    s.call("read_file", path="hello.txt")
    sid = session_of(daemon, ws)
    c = Conn(daemon.socket)
    before = {k: v for k, v in snapshot(top).items() if not k.startswith(ws)}
    wrong = []
    for tool in ("read_file", "write_file"):
        for attack in ATTACKS:
            path = attack.format(evil=os.path.join(top, "proj-evil"),
                                 secret=world["secret"])
            args = {"path": path}
            if tool == "write_file":
                args["content"] = "PWNED"
            r = s.call(tool, **args)
            kind = r.get("structuredContent", {}).get("error", {}).get("kind")
            if "\u0000" in path:
                # gbr's protocol cannot carry a NUL: the bridge refuses it.
                expect = "invalid_path"
            else:
                g = c.call("tool.call", {"session": sid, "tool": tool, "args": args})
                expect = g.get("error", {}).get("data", {}).get("kind")
            if r["isError"] is not True or kind is None or kind != expect or \
                    not text_of(r).startswith(kind + ": "):
                wrong.append((tool, path[:60], kind, expect, text_of(r)[:100]))
    assert wrong == []
    with open(world["secret"]) as f:
        assert f.read() == "TOP SECRET\n"
    after = {k: v for k, v in snapshot(top).items() if not k.startswith(ws)}
    assert after == before


def test_sdk_concurrent_progress_and_cancel(daemon, ws, sdk):
    s = sdk()
    slow = s.send("call", name="run_command", arguments={"argv": ["sleep", "3"]},
                  progress=True)
    fast = s.send("call", name="read_file", arguments={"path": "hello.txt"})
    # The read does not wait behind the running command.
    r = s.wait(fast)
    assert r["ok"] and text_of(r["result"]) == "hello\n"
    assert slow not in s.answers
    r = s.wait(slow)
    assert r["ok"] and r["result"]["isError"] is False, r
    assert r["result"]["structuredContent"]["exit_code"] == 0
    # It ran for 3 s with a progress token: at least one progress notification.
    msgs = [p.get("message", "") for p in s.progress.get(slow, [])]
    assert msgs and all("run_command" in m for m in msgs), msgs
    values = [p["progress"] for p in s.progress[slow]]
    assert values == sorted(set(values))

    # Cancelled: the SDK sends notifications/cancelled and stops waiting;
    # the bridge goes on serving.
    doomed = s.send("call", name="run_command", arguments={"argv": ["sleep", "2"]})
    time.sleep(0.3)
    s.run("cancel", target=doomed)
    r = s.wait(doomed)
    assert r["ok"] is False
    r = s.call("read_file", path="hello.txt")
    assert text_of(r) == "hello\n"


def test_sdk_many_in_flight(daemon, ws, sdk):
    for i in range(20):
        with open(os.path.join(ws, "f%d.txt" % i), "w") as f:
            f.write("file %d\n" % i)
    s = sdk()
    tags = [(i, s.send("call", name="read_file", arguments={"path": "f%d.txt" % i}))
            for i in range(20)]
    for i, t in tags:
        r = s.wait(t)
        assert r["ok"] and text_of(r["result"]) == "file %d\n" % i


def approvals_available(daemon):
    return "approval.list" in daemon.conn().hello["capabilities"]


def pending_approvals(daemon, sid):
    r = daemon.conn().call("approval.list", {"session": sid})
    assert "result" in r, r
    return [a for a in r["result"]["approvals"] if a.get("state") == "pending"]


def test_sdk_approval_wait(daemon, ws, sdk):
    """Approvals: a write to a protected file waits for a human; gbrctl
    approve lets it complete, gbrctl deny makes it an isError result, and a
    client that goes away withdraws its approval."""
    assert approvals_available(daemon)
    s = sdk()
    s.call("read_file", path="hello.txt")
    sid = session_of(daemon, ws)
    target = os.path.join(ws, ".gbr_envs", "x.ini")

    t = s.send("call", name="write_file", arguments={
        "path": ".gbr_envs/x.ini", "content": "[env]\nautonomy = supervised\n"},
        progress=True, timeout=120000)
    s.wait_until(lambda: pending_approvals(daemon, sid))
    (a,) = pending_approvals(daemon, sid)
    assert t not in s.answers and not os.path.exists(target)
    # The progress message tells the person how to answer.
    s.wait_until(lambda: any("gbrctl approve " + a["id"] in p.get("message", "")
                             for p in s.progress.get(t, [])))
    r = daemon.ctl("approve", a["id"])
    assert r.returncode == 0, r.stderr
    r = s.wait(t)
    assert r["ok"] and r["result"]["isError"] is False, r
    with open(target) as f:
        assert f.read() == "[env]\nautonomy = supervised\n"

    t = s.send("call", name="write_file", arguments={
        "path": ".gbr_envs/y.ini", "content": "[env]\n"}, timeout=120000)
    s.wait_until(lambda: pending_approvals(daemon, sid))
    (a,) = pending_approvals(daemon, sid)
    r = daemon.ctl("deny", a["id"], "--reason", "not today")
    assert r.returncode == 0, r.stderr
    r = s.wait(t)
    assert r["ok"] and r["result"]["isError"] is True, r
    assert text_of(r["result"]).startswith("denied: ")
    assert not os.path.exists(os.path.join(ws, ".gbr_envs", "y.ini"))

    # The client goes away while waiting: the approval is withdrawn.
    s.send("call", name="write_file", arguments={
        "path": ".gbr_envs/z.ini", "content": "[env]\n"}, timeout=120000)
    s.wait_until(lambda: pending_approvals(daemon, sid))
    s.close()
    deadline = time.time() + 15
    while pending_approvals(daemon, sid):
        assert time.time() < deadline, "the approval was not withdrawn"
        time.sleep(0.1)
    assert not os.path.exists(os.path.join(ws, ".gbr_envs", "z.ini"))


# --- the raw protocol ------------------------------------------------------------


@pytest.mark.parametrize("asked,expect", [
    ("2025-11-25", "2025-11-25"), ("2025-06-18", "2025-06-18"),
    ("2025-03-26", "2025-03-26"), ("2024-11-05", "2024-11-05"),
    ("2099-01-01", "2025-11-25"), ("not a version", "2025-11-25")])
def test_raw_version_negotiation(raw, asked, expect):
    r = raw()
    res = r.init(asked)
    assert res["protocolVersion"] == expect
    assert res["capabilities"] == {"tools": {"listChanged": False}}
    assert res["serverInfo"]["name"] == "gbr" and res["serverInfo"]["version"]
    out = r.tool("read_file", path="hello.txt")
    # structuredContent exists from 2025-06-18 on.
    assert ("structuredContent" in out) == (expect >= "2025-06-18"), out


def test_raw_initialize_errors(raw):
    r = raw()
    m = r.call("initialize", {"capabilities": {}})
    assert m["error"]["code"] == -32602 and m["error"]["data"]["field"] == "protocolVersion"
    r.init()
    m = r.call("initialize", {"protocolVersion": "2025-11-25"})
    assert m["error"]["code"] == -32600


def test_raw_before_initialize(raw):
    r = raw()
    assert r.call("ping")["result"] == {}
    for method in ("tools/list", "tools/call"):
        m = r.call(method, {"name": "read_file", "arguments": {"path": "hello.txt"}}
                   if method == "tools/call" else {})
        assert m["error"]["code"] == -32600, m
        assert m["error"]["data"]["kind"] == "not_initialized"
    r.init()
    assert "result" in r.call("tools/list")


def test_raw_malformed_and_unknown(raw):
    r = raw()
    r.init()
    cases = [
        (b"garbage\n", -32700, None),
        (b'{"jsonrpc":"2.0","id":1,\n', -32700, None),
        (b'\xff\xfe{}\n', -32700, None),
        (b'{"jsonrpc":"2.0","id":5,"id":6,"method":"ping"}\n', -32700, None),
        (b'[{"jsonrpc":"2.0","id":1,"method":"ping"}]\n', -32600, None),
        (b'"just a string"\n', -32600, None),
        (b'{"jsonrpc":"1.0","id":7,"method":"ping"}\n', -32600, 7),
        (b'{"jsonrpc":"2.0","id":null,"method":"ping"}\n', -32600, None),
        (b'{"jsonrpc":"2.0","id":{"a":1},"method":"ping"}\n', -32600, None),
        (b'{"jsonrpc":"2.0","id":8,"method":7}\n', -32600, 8),
        (b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":[1]}\n', -32602, 9),
        (b'{"jsonrpc":"2.0","id":10,"method":"resources/list"}\n', -32601, 10),
        (b'{"jsonrpc":"2.0","id":"s","method":"no/such"}\n', -32601, "s"),
        (b'{"jsonrpc":"2.0","id":11,"method":"tools/call","params":{"arguments":{}}}\n',
         -32602, 11),
        (b'{"jsonrpc":"2.0","id":12,"method":"tools/call","params":{"name":"read_file",'
         b'"arguments":"x"}}\n', -32602, 12),
        (b'{"jsonrpc":"2.0","id":13,"method":"tools/list","params":{"cursor":"c"}}\n',
         -32602, 13),
        # gbrd would refuse it without an id to answer: refused here, with one.
        (b'{"jsonrpc":"2.0","id":14,"method":"tools/call","params":{"name":"read_file",'
         b'"arguments":{"path":' + b'[' * 62 + b']' * 62 + b'}}}\n', -32600, 14),
    ]
    for raw_line, code, rid in cases:
        r.send_raw(raw_line)
        m = r.recv()
        assert m is not None, (raw_line, r.stderr())
        assert m.get("error", {}).get("code") == code, (raw_line, m)
        assert m["id"] == rid, (raw_line, m)
    assert r.call("tools/call", {"name": "read_file", "arguments": {"path": "hello.txt"}}
                  )["result"]["isError"] is False
    # Notifications (known or not) and responses get no answer.
    r.msgs.clear()
    r.send({"jsonrpc": "2.0", "method": "notifications/whatever", "params": {}})
    r.send({"jsonrpc": "2.0", "id": 99, "result": {}})
    r.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": 12345}})
    m = r.call("ping")
    assert m["result"] == {} and r.msgs == []


def test_raw_overlong_line(raw):
    r = raw()
    r.init()
    big = b'{"jsonrpc":"2.0","id":1,"method":"ping","params":{"x":"' + \
        b"a" * (9 * 1024 * 1024) + b'"}}\n'
    r.send_raw(big)
    m = r.recv()
    assert m["id"] is None and m["error"]["data"]["kind"] == "too_large", m
    assert m["error"]["data"]["max_bytes"] == 8 * 1024 * 1024
    # The rest of that line is skipped; the next message is served.
    assert r.call("ping")["result"] == {}


def test_raw_write_bigger_than_gbrd_takes(raw, ws):
    r = raw()
    r.init()
    out = r.tool("write_file", path="big.txt", content="x" * (1536 * 1024))
    assert out["isError"] is True and out["structuredContent"]["error"]["kind"] == "too_large"
    assert not os.path.exists(os.path.join(ws, "big.txt"))
    # The connection to gbrd is still fine.
    assert r.tool("read_file", path="hello.txt")["isError"] is False


def test_raw_cancelled_call_gets_no_reply(raw, daemon, ws):
    r = raw()
    r.init()
    r.request("tools/call", {"name": "run_command", "arguments": {"argv": ["sleep", "60"]},
                             "_meta": {"progressToken": "tok"}}, rid="slow")
    sid = session_of(daemon, ws)
    # The command is running in gbrd before the client gives up on it.
    deadline = time.time() + 30
    while not any(m["role"] == "assistant" and m.get("tool") == "run_command"
                  for m in daemon.conn().call("session.history", {"session": sid})
                  ["result"]["messages"]):
        assert time.time() < deadline
        time.sleep(0.05)
    r.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": "slow", "reason": "changed my mind"}})
    assert r.call("ping")["result"] == {}
    # gbrd was asked to give up (tool.cancel): the 60 s command is stopped
    # and its result recorded long before it would have ended.
    deadline = time.time() + 30
    while True:
        h = daemon.conn().call("session.history", {"session": sid})["result"]["messages"]
        done = [m for m in h if m["role"] == "tool" and m["tool"] == "run_command"]
        if done:
            break
        assert time.time() < deadline
        time.sleep(0.05)
    assert done[0]["ok"] is False and done[0]["error"]["kind"] == "cancelled", done
    # A read sent now is answered after gbrd's reply to the cancelled call.
    assert r.tool("read_file", path="hello.txt")["isError"] is False
    assert r.call("ping")["result"] == {}
    assert not [m for m in r.msgs if m.get("id") == "slow"], r.msgs
    # No progress for a cancelled call either.
    assert not [m for m in r.msgs if m.get("method") == "notifications/progress"]


def test_raw_cancelled_approval_is_withdrawn(raw, daemon, ws):
    r = raw()
    r.init()
    assert r.tool("read_file", path="hello.txt")["isError"] is False
    sid = session_of(daemon, ws)
    r.request("tools/call", {"name": "write_file", "arguments": {
        "path": ".gbr_envs/never.ini", "content": "[env]\n"}}, rid="w")
    deadline = time.time() + 15
    while not pending_approvals(daemon, sid):
        assert time.time() < deadline
        time.sleep(0.05)
    (a,) = pending_approvals(daemon, sid)
    r.send({"jsonrpc": "2.0", "method": "notifications/cancelled",
            "params": {"requestId": "w"}})
    assert r.call("ping")["result"] == {}
    deadline = time.time() + 15
    while pending_approvals(daemon, sid):
        assert time.time() < deadline
        time.sleep(0.05)
    got = daemon.conn().call("approval.list", {"session": sid, "all": True})
    (b,) = [x for x in got["result"]["approvals"] if x["id"] == a["id"]]
    assert b["state"] == "withdrawn", b
    # Approving it now is refused; nothing was written.
    assert daemon.ctl("approve", a["id"]).returncode != 0
    assert not os.path.exists(os.path.join(ws, ".gbr_envs", "never.ini"))
    assert not [m for m in r.msgs if m.get("id") == "w"], r.msgs


def test_raw_stdin_eof_exits_promptly(raw):
    r = raw()
    r.init()
    r.request("tools/call", {"name": "run_command",
                             "arguments": {"argv": ["sleep", "300"]}})
    assert r.call("ping")["result"] == {}
    # It does not wait for the command (which would take 300 s) to end.
    assert r.close(timeout=60) == 0


def test_raw_gbrd_goes_away(raw, daemon, ws):
    r = raw()
    r.init()
    assert r.tool("read_file", path="hello.txt")["isError"] is False
    rid = r.request("tools/call", {"name": "run_command",
                                   "arguments": {"argv": ["sleep", "20"]}})
    sid = session_of(daemon, ws)
    deadline = time.time() + 15
    while not any(m["role"] == "assistant" and m["tool"] == "run_command" for m in
                  daemon.conn().call("session.history", {"session": sid})
                  ["result"]["messages"]):
        assert time.time() < deadline
        time.sleep(0.05)
    daemon.kill9()
    m = r.wait(rid)
    assert m["result"]["isError"] is True
    assert m["result"]["structuredContent"]["error"]["kind"] == "unavailable"
    assert "unknown" in m["result"]["content"][0]["text"]
    daemon.start()
    # The next call connects again and finds the same session.
    assert r.tool("read_file", path="hello.txt")["isError"] is False
    assert session_of(daemon, ws) == sid


def test_raw_session_option(raw, daemon, ws):
    s = daemon.ctl_json("new", "--name", "mcp-s", ws)
    r = raw(["--session", "mcp-s"])
    r.init()
    assert r.tool("write_file", path="via-session.txt", content="s")["isError"] is False
    h = daemon.conn().call("session.history", {"session": s["id"]})["result"]["messages"]
    assert [m["tool"] for m in h if m["role"] == "assistant"] == ["write_file"]


def test_raw_command_line_errors(raw, daemon, ws):
    for args, rc, says in [
            (["--session", "no-such-session"], 1, "no-such-session"),
            (["--workspace", "/nonexistent/folder"], 2, "/nonexistent/folder"),
            (["--session", "x", "--workspace", ws], 2, "do not go together"),
            (["--bogus"], 2, "usage"),
            (["--workspace", ws, "--env", "nope"], 1, "invalid_env")]:
        r = raw(args)
        assert r.close() == rc, (args, r.stderr())
        assert says in r.stderr(), (args, r.stderr())
        assert r.proc.stdout.read() == b""


def test_help():
    r = subprocess.run([GBRCTL, "mcp", "--help"], capture_output=True, text=True,
                       timeout=10)
    assert r.returncode == 0 and "--workspace" in r.stdout and r.stderr == ""


def test_raw_unreachable(raw, tmpdir_short):
    sockdir = os.path.join(tmpdir_short, "nobody")
    os.makedirs(sockdir, mode=0o700)
    r = raw(env={"GBR_SOCKET": os.path.join(sockdir, "s.sock"), "GBRD": "/bin/false"})
    assert r.close() == 3
    assert r.proc.stdout.read() == b""


def test_raw_starts_gbrd(make_daemon, ws, tmpdir_short):
    """Nobody listens: the bridge starts gbrd (as gbr does), and gbrd's
    output never reaches the protocol stream."""
    d = make_daemon(start=False)
    r = Raw(d, ["--workspace", ws], tmpdir_short)
    try:
        r.init()
        assert r.tool("read_file", path="hello.txt")["isError"] is False
        assert r.close() == 0
    finally:
        if r.proc.poll() is None:
            r.proc.kill()
        d.ctl("shutdown")
    deadline = time.time() + 10
    while os.path.exists(d.socket):
        assert time.time() < deadline
        time.sleep(0.05)


def test_raw_full_history_moves_to_a_new_session(make_daemon, ws, tmpdir_short):
    """Every call and result is in the session's bounded history; an MCP
    client calls tools all day, so a full history moves the bridge to a
    new session on the workspace (the failed call says to call again)."""
    d = make_daemon(config="[session]\nhistory_messages = 6\n")
    r = Raw(d, ["--workspace", ws], tmpdir_short)
    try:
        r.init()
        for _ in range(3):
            assert r.tool("read_file", path="hello.txt")["isError"] is False
        first = session_of(d, ws)
        out = r.tool("read_file", path="hello.txt")
        assert out["isError"] is True, out
        assert out["structuredContent"]["error"]["kind"] == "limit_reached"
        assert "gbr goes on in a new session" in out["content"][0]["text"]
        assert r.tool("read_file", path="hello.txt")["isError"] is False
        ss = d.conn().call("session.list", {"workspace": ws})["result"]["sessions"]
        assert len(ss) == 2 and ss[0]["id"] == first
        assert ss[1]["messages"] == 2
    finally:
        assert r.close() == 0, r.stderr()


def test_raw_approval_survives_gbrd_restart(raw, daemon, ws):
    """A call waiting for a human when gbrd dies (kill -9): the approval is
    durable, so the bridge connects again (here it starts gbrd itself, as
    it would for a user), asks again with the same request_id, and the
    human's decision still reaches the client."""
    assert approvals_available(daemon)
    r = raw()
    r.init()
    assert r.tool("read_file", path="hello.txt")["isError"] is False
    sid = session_of(daemon, ws)
    rid = r.request("tools/call", {"name": "write_file", "arguments": {
        "path": ".gbr_envs/kept.ini", "content": "[env]\n"},
        "_meta": {"progressToken": 7}})
    deadline = time.time() + 15
    while not pending_approvals(daemon, sid):
        assert time.time() < deadline
        time.sleep(0.05)
    (a,) = pending_approvals(daemon, sid)
    # The bridge has seen the approval (its progress names it).
    while not any(m.get("method") == "notifications/progress" and a["id"] in
                  m["params"].get("message", "") for m in r.msgs):
        assert r.recv(15) is not None
    try:
        daemon.kill9()
        # Nobody answers now: the bridge starts gbrd on the same state.
        deadline = time.time() + 20
        while True:
            try:
                c = Conn(daemon.socket)
                if pending_approvals(daemon, sid):
                    break
            except OSError:
                pass
            assert time.time() < deadline, r.stderr()
            time.sleep(0.1)
        assert not [m for m in r.msgs if m.get("id") == rid]
        assert daemon.ctl("approve", a["id"]).returncode == 0
        m = r.wait(rid)
        assert m["result"]["isError"] is False, m
        with open(os.path.join(ws, ".gbr_envs", "kept.ini")) as f:
            assert f.read() == "[env]\n"
        assert "asked gbrd again" in r.stderr(), r.stderr()
        c.close()
    finally:
        daemon.ctl("shutdown")
