"""gbrctl acp, the Agent Client Protocol agent over stdio.

The official ACP TypeScript SDK (@agentclientprotocol/sdk, installed from
npm into tests/acp by `npm ci` the first time; if that cannot be done the
tests FAIL, they never skip) plays the editor through tests/acp/client.mjs,
against a real gbrd whose model is tests/system/fakellm.py: a prompt that
streams text and runs tools, permissions answered in the editor or from a
terminal, cancel, session/load of a session made elsewhere. A raw client
sends what an SDK never would (malformed lines, requests out of order).
"""
import fcntl
import json
import os
import select
import shutil
import subprocess
import time

import pytest

from conftest import GBRCTL, SANITIZER_MARKS, TOP
from fakellm import FakeLLM
from test_agent import conf, profile

ACP_DIR = os.path.join(TOP, "tests", "acp")
CLIENT = os.path.join(ACP_DIR, "client.mjs")
KEY = "sk-gbr-TEST-acp-3e1f"

_sdk_ready = []


def ensure_sdk():
    """Installs tests/acp's packages once (npm ci); fails loudly if it cannot."""
    if _sdk_ready:
        return
    node = shutil.which("node") or shutil.which("nodejs")
    npm = shutil.which("npm")
    if node is None or npm is None:
        pytest.fail("node and npm are needed for the ACP SDK tests "
                    "(contrib/install-deps installs nodejs and npm)")
    marker = os.path.join(ACP_DIR, "node_modules", "@agentclientprotocol",
                          "sdk", "package.json")
    with open(os.path.join(ACP_DIR, "package.json")) as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        lockfile = os.path.join(ACP_DIR, "package-lock.json")
        stamp = os.path.join(ACP_DIR, "node_modules", ".package-lock.json")
        if not os.path.exists(marker) or not os.path.exists(stamp) or \
                os.path.getmtime(stamp) < os.path.getmtime(lockfile):
            r = subprocess.run([npm, "ci", "--no-audit", "--no-fund"],
                               cwd=ACP_DIR, capture_output=True, text=True,
                               timeout=600)
            if r.returncode != 0 or not os.path.exists(marker):
                pytest.fail("npm ci in tests/acp failed; the ACP tests need "
                            "@agentclientprotocol/sdk:\n%s\n%s"
                            % (r.stdout[-3000:], r.stderr[-3000:]))
    _sdk_ready.append(node)


class Editor:
    """tests/acp/client.mjs: the SDK as the editor of `gbrctl acp`."""

    def __init__(self, d, args, root):
        ensure_sdk()
        self.errlog = os.path.join(root, "acp-%d.log" % time.monotonic_ns())
        self.err = open(self.errlog, "wb")
        self.proc = subprocess.Popen([_sdk_ready[0], CLIENT], cwd=ACP_DIR,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.err, env=d.env)
        self.buf = b""
        self.answers = {}
        self.updates = []
        self.perms = []
        self.aborted = []
        self.next_tag = 1
        r = self.run("connect", command=GBRCTL, args=["acp"] + list(args),
                     env=dict(d.env))
        assert r["ok"], (r, self.stderr())
        self.init = self.request("initialize", {
            "protocolVersion": 1, "clientInfo": {"name": "pytest", "version": "1"},
            "clientCapabilities": {"fs": {"readTextFile": True,
                                          "writeTextFile": True}}})

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
            return
        chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
        if not chunk:
            raise EOFError("the SDK driver exited:\n" + self.stderr())
        self.buf += chunk
        while b"\n" in self.buf:
            line, self.buf = self.buf.split(b"\n", 1)
            m = json.loads(line)
            if "update" in m:
                self.updates.append(m["update"])
            elif "permission" in m:
                self.perms.append(m)
            elif "aborted" in m:
                self.aborted.append(m["aborted"])
            else:
                self.answers[m["tag"]] = m

    def wait(self, tag, timeout=60.0):
        deadline = time.time() + timeout
        while tag not in self.answers:
            left = deadline - time.time()
            assert left > 0, "no answer to %s:\n%s" % (tag, self.stderr())
            self._read(min(left, 0.2))
        return self.answers.pop(tag)

    def wait_until(self, pred, timeout=30.0):
        deadline = time.time() + timeout
        while not pred():
            left = deadline - time.time()
            assert left > 0, "timed out; updates %r\n%s" % (
                self.updates[-6:], self.stderr())
            self._read(min(left, 0.2))

    def run(self, op, **kw):
        return self.wait(self.send(op, **kw))

    def request(self, method, params):
        r = self.run("request", method=method, params=params)
        assert r["ok"], (method, r, self.stderr())
        return r["result"]

    def new_session(self, ws):
        return self.request("session/new", {"cwd": ws, "mcpServers": []})["sessionId"]

    def prompt(self, sid, text):
        return self.send("request", method="session/prompt", params={
            "sessionId": sid, "prompt": [{"type": "text", "text": text}]})

    def of(self, sid, kind):
        return [u["update"] for u in self.updates if u["sessionId"] == sid and
                u["update"]["sessionUpdate"] == kind]

    def text(self, sid, kind="agent_message_chunk"):
        return "".join(u["content"]["text"] for u in self.of(sid, kind))

    def stderr(self):
        self.err.flush()
        return open(self.errlog, errors="replace").read()[-6000:]

    def close(self):
        if self.proc.poll() is None:
            try:
                r = self.run("close", timeout=15)
                assert r["ok"] and r["result"]["exitCode"] == 0, r
            except (EOFError, BrokenPipeError):
                pass
            self.proc.wait(15)
        self.err.close()
        text = open(self.errlog, errors="replace").read()
        for mark in SANITIZER_MARKS:
            assert mark not in text, text[-6000:]


@pytest.fixture
def fake():
    f = FakeLLM()
    yield f
    f.close()


@pytest.fixture
def ws(tmpdir_short):
    d = os.path.join(tmpdir_short, "ws")
    os.makedirs(d)
    with open(os.path.join(d, "hello.txt"), "w") as f:
        f.write("hello from the workspace\nsecond line\n")
    with open(os.path.join(d, "secret.cfg"), "w") as f:
        f.write("x = 0\n")
    profile(d, "[env]\nprotected_files = secret.cfg\nautonomy = full\n")
    return d


@pytest.fixture
def gbrd(make_daemon, fake):
    return make_daemon(config=conf(fake, "openai"), env={"OPENAI_API_KEY": KEY})


@pytest.fixture
def editor(gbrd, tmpdir_short):
    made = []

    def make(args=()):
        e = Editor(gbrd, args, tmpdir_short)
        made.append(e)
        return e
    yield make
    for e in made:
        e.close()


def read(ws, name):
    with open(os.path.join(ws, name)) as f:
        return f.read()


def test_initialize(editor):
    e = editor()
    assert e.init["protocolVersion"] == 1
    caps = e.init["agentCapabilities"]
    assert caps["loadSession"] is True
    assert caps["promptCapabilities"]["embeddedContext"] is True
    assert e.init["authMethods"] == []
    assert e.init["agentInfo"]["name"] == "gbr"


def test_workspace_option_overrides_the_cwd(gbrd, ws, editor, tmpdir_short):
    other = os.path.join(tmpdir_short, "other")
    os.makedirs(other)
    e = editor(["--workspace", other])
    sid = e.new_session(ws)
    ss = gbrd.conn().call("session.list", {})["result"]["sessions"]
    assert [(s["id"], s["workspace"]) for s in ss] == [(sid, os.path.realpath(other))]


def test_prompt_streams_text_and_runs_tools(gbrd, fake, ws, editor):
    fake.push({"tool_calls": [
        {"name": "write_file", "args": {"path": "notes.txt", "content": "one\ntwo\n"}},
        {"name": "write_file", "args": {"path": "hello.txt",
                                        "content": "hello again\nsecond line\n"}},
        {"name": "read_file", "args": {"path": "notes.txt"}}]},
        {"text": "All done, the notes are written.", "chunks": 5})
    e = editor()
    sid = e.new_session(ws)
    # The ACP session is a gbr session on the editor's cwd.
    ss = gbrd.conn().call("session.list", {})["result"]["sessions"]
    assert [(s["id"], s["workspace"]) for s in ss] == [(sid, os.path.realpath(ws))]
    r = e.wait(e.prompt(sid, "write the notes"))
    assert r["ok"] and r["result"]["stopReason"] == "end_turn", (r, e.stderr())
    # The tools really ran, in gbrd, on disk.
    assert read(ws, "notes.txt") == "one\ntwo\n"
    assert read(ws, "hello.txt") == "hello again\nsecond line\n"
    calls = e.of(sid, "tool_call")
    assert [c["kind"] for c in calls] == ["edit", "edit", "read"], json.dumps(e.updates, indent=1)
    assert calls[0]["locations"] == [{"path": os.path.join(os.path.realpath(ws),
                                                           "notes.txt")}]
    assert calls[0]["rawInput"]["path"] == "notes.txt"
    done = {u["toolCallId"]: u for u in e.of(sid, "tool_call_update")}
    assert [done[c["toolCallId"]]["status"] for c in calls] == ["completed"] * 3
    d0 = done[calls[0]["toolCallId"]]["content"][0]
    assert d0["type"] == "diff" and d0["oldText"] is None and \
        d0["newText"] == "one\ntwo\n", d0
    # Over an existing file, the old text is rebuilt from gbr's diff.
    d1 = done[calls[1]["toolCallId"]]["content"][0]
    assert d1["type"] == "diff", d1
    assert d1["oldText"] == "hello from the workspace\nsecond line\n"
    assert d1["newText"] == "hello again\nsecond line\n"
    rd = done[calls[2]["toolCallId"]]["content"][0]
    assert rd["content"]["text"] == "one\ntwo\n"
    # The answer streamed in pieces, and only once.
    assert e.text(sid) == "All done, the notes are written."
    assert len(e.of(sid, "agent_message_chunk")) > 1
    # Our own prompt is not echoed back.
    assert e.of(sid, "user_message_chunk") == []


def protected_write(fake, content):
    fake.push({"tool_calls": [{"name": "write_file", "args": {
        "path": "secret.cfg", "content": content}}]}, {"text": "Written."})


def test_permission_answered_in_the_editor(gbrd, fake, ws, editor):
    e = editor()
    sid = e.new_session(ws)
    protected_write(fake, "x = 1\n")
    tag = e.prompt(sid, "set x")
    e.wait_until(lambda: e.perms)
    p = e.perms[0]
    assert p["permission"]["sessionId"] == sid
    kinds = [o["kind"] for o in p["permission"]["options"]]
    assert kinds == ["allow_once", "allow_always", "reject_once"]
    tc = p["permission"]["toolCall"]
    assert tc["kind"] == "edit" and tc["status"] == "pending"
    diff = [c for c in tc["content"] if c["type"] == "diff"][0]
    assert diff["oldText"] == "x = 0\n" and diff["newText"] == "x = 1\n"
    assert read(ws, "secret.cfg") == "x = 0\n"    # nothing written yet
    e.run("answer", rid=p["rid"], outcome={"outcome": "selected", "optionId": "allow"})
    r = e.wait(tag)
    assert r["ok"] and r["result"]["stopReason"] == "end_turn", r
    assert read(ws, "secret.cfg") == "x = 1\n"
    done = [u for u in e.of(sid, "tool_call_update") if u.get("status") == "completed"]
    assert [u["toolCallId"] for u in done] == [tc["toolCallId"]]
    # gbrd recorded the decision as the editor's.
    ap = gbrd.conn().call("approval.list", {"all": True})["result"]["approvals"]
    assert [a["decision"] for a in ap] == ["approve"]
    assert "gbrctl-acp" in ap[0]["decided_by"]

    # Rejected: the file stays, the card fails, the turn goes on.
    protected_write(fake, "x = 2\n")
    tag = e.prompt(sid, "set x again")
    e.wait_until(lambda: len(e.perms) == 2)
    e.run("answer", rid=e.perms[1]["rid"],
          outcome={"outcome": "selected", "optionId": "reject"})
    r = e.wait(tag)
    assert r["ok"] and r["result"]["stopReason"] == "end_turn", r
    assert read(ws, "secret.cfg") == "x = 1\n"
    tid = e.perms[1]["permission"]["toolCall"]["toolCallId"]
    assert [u["status"] for u in e.of(sid, "tool_call_update")
            if u["toolCallId"] == tid] == ["failed"]

    # Allowed for the session: gbr's grant; the next identical write asks nobody.
    protected_write(fake, "x = 3\n")
    tag = e.prompt(sid, "and again")
    e.wait_until(lambda: len(e.perms) == 3)
    e.run("answer", rid=e.perms[2]["rid"],
          outcome={"outcome": "selected", "optionId": "allow_session"})
    assert e.wait(tag)["ok"]
    assert read(ws, "secret.cfg") == "x = 3\n"
    grants = gbrd.conn().call("approval.grants", {"session": sid})["result"]["grants"]
    assert len(grants) == 1 and grants[0]["path"] == "secret.cfg", grants
    protected_write(fake, "x = 4\n")
    assert e.wait(e.prompt(sid, "once more"))["ok"]
    assert read(ws, "secret.cfg") == "x = 4\n"
    assert len(e.perms) == 3


def test_permission_answered_from_a_terminal(gbrd, fake, ws, editor):
    e = editor()
    sid = e.new_session(ws)
    protected_write(fake, "x = 9\n")
    tag = e.prompt(sid, "set x")
    e.wait_until(lambda: e.perms)
    tid = e.perms[0]["permission"]["toolCall"]["toolCallId"]
    aid = gbrd.conn().call("approval.list", {"session": sid})["result"]["approvals"][0]["id"]
    r = gbrd.ctl("approve", aid)
    assert r.returncode == 0, (r.stdout, r.stderr)
    # The editor's question is withdrawn and the card goes on.
    e.wait_until(lambda: e.aborted == [e.perms[0]["rid"]])
    r = e.wait(tag)
    assert r["ok"] and r["result"]["stopReason"] == "end_turn", r
    assert read(ws, "secret.cfg") == "x = 9\n"
    ups = [u["status"] for u in e.of(sid, "tool_call_update") if u["toolCallId"] == tid]
    assert ups == ["in_progress", "completed"], ups
    ap = gbrd.conn().call("approval.list", {"all": True})["result"]["approvals"]
    assert [a["decision"] for a in ap] == ["approve"]
    assert "gbrctl-acp" not in ap[0]["decided_by"]
    # The bridge goes on.
    fake.push({"text": "still here"})
    assert e.wait(e.prompt(sid, "hello"))["result"]["stopReason"] == "end_turn"
    assert e.text(sid).endswith("still here")


def test_cancel(gbrd, fake, ws, editor):
    fake.push({"text": "this answer never ends", "chunks": 5, "hang_after": 4})
    e = editor()
    sid = e.new_session(ws)
    tag = e.prompt(sid, "go")
    e.wait_until(lambda: e.of(sid, "agent_message_chunk"))
    e.run("notify", method="session/cancel", params={"sessionId": sid})
    r = e.wait(tag)
    assert r["ok"] and r["result"]["stopReason"] == "cancelled", r
    info = gbrd.conn().call("session.list", {})["result"]["sessions"][0]
    assert info["state"] == "idle"
    fake.push({"text": "back"})
    assert e.wait(e.prompt(sid, "again"))["result"]["stopReason"] == "end_turn"
    assert e.text(sid).endswith("back")


def test_cancel_withdraws_a_pending_permission(gbrd, fake, ws, editor):
    e = editor()
    sid = e.new_session(ws)
    protected_write(fake, "x = 5\n")
    tag = e.prompt(sid, "set x")
    e.wait_until(lambda: e.perms)
    e.run("notify", method="session/cancel", params={"sessionId": sid})
    r = e.wait(tag)
    assert r["ok"] and r["result"]["stopReason"] == "cancelled", r
    e.wait_until(lambda: e.aborted)
    assert read(ws, "secret.cfg") == "x = 0\n"


def test_load_a_session_made_elsewhere(gbrd, fake, ws, editor):
    # Made the way the REPL makes one: session.create, session.send.
    fake.push({"tool_calls": [{"name": "read_file", "args": {"path": "hello.txt"}}]},
              {"text": "The file says hello."})
    c = gbrd.conn()
    sid = c.call("session.create", {"workspace": ws})["result"]["id"]
    r = gbrd.ctl("send", sid, "what does hello.txt say?")
    assert r.returncode == 0, (r.stdout, r.stderr)
    e = editor()
    res = e.request("session/load", {"sessionId": sid, "cwd": ws, "mcpServers": []})
    assert res == {} or res.get("sessionId") in (None, sid)
    assert e.text(sid, "user_message_chunk") == "what does hello.txt say?"
    assert e.text(sid) == "The file says hello."
    calls = e.of(sid, "tool_call")
    assert [(x["kind"], x["title"]) for x in calls] == [("read", "read_file hello.txt")]
    done = e.of(sid, "tool_call_update")
    assert done[0]["status"] == "completed"
    assert done[0]["content"][0]["content"]["text"].startswith("hello from")
    # Order: the question, the card, its result, the answer.
    kinds = [u["update"]["sessionUpdate"] for u in e.updates]
    assert kinds == ["user_message_chunk", "tool_call", "tool_call_update",
                     "agent_message_chunk"], kinds
    # The session goes on in the editor, and a terminal's message shows there.
    fake.push({"text": "Next answer."})
    assert e.wait(e.prompt(sid, "more"))["result"]["stopReason"] == "end_turn"
    assert e.text(sid).endswith("Next answer.")
    fake.push({"text": "From the terminal."})
    r = gbrd.ctl("send", sid, "typed in a terminal")
    assert r.returncode == 0, r.stderr
    e.wait_until(lambda: e.text(sid).endswith("From the terminal."))
    assert e.text(sid, "user_message_chunk").endswith("typed in a terminal")
    # An unknown session is "resource not found".
    r = e.run("request", method="session/load", params={
        "sessionId": "0123456789ab", "cwd": ws, "mcpServers": []})
    assert not r["ok"] and r["error"]["code"] == -32002, r


def test_no_provider_is_an_error_with_what_to_set(make_daemon, ws, tmpdir_short):
    d = make_daemon(config="[llm]\nollama_url = off\n")
    e = Editor(d, [], tmpdir_short)
    try:
        sid = e.new_session(ws)
        r = e.wait(e.prompt(sid, "hello"))
        assert not r["ok"] and r["error"]["code"] == -32000, r
        assert r["error"]["message"], r
    finally:
        e.close()


class Raw:
    """`gbrctl acp` with our own hands on its stdin and stdout."""

    def __init__(self, d, root):
        self.errlog = os.path.join(root, "raw-%d.log" % time.monotonic_ns())
        self.err = open(self.errlog, "wb")
        self.proc = subprocess.Popen([GBRCTL, "acp"], env=d.env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.err)
        self.buf = b""

    def send_raw(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def recv(self, timeout=15.0):
        deadline = time.time() + timeout
        while b"\n" not in self.buf:
            left = deadline - time.time()
            assert left > 0, "nothing from gbrctl acp"
            r, _, _ = select.select([self.proc.stdout], [], [], left)
            if r:
                chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
                assert chunk, "gbrctl acp closed stdout"
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        m = json.loads(line)
        assert m["jsonrpc"] == "2.0", m
        return m

    def call(self, rid, method, params=None):
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send_raw(json.dumps(msg).encode() + b"\n")
        return self.recv()


def test_malformed_messages_get_errors(gbrd, ws, tmpdir_short):
    r = Raw(gbrd, tmpdir_short)
    m = r.call(1, "session/new", {"cwd": ws, "mcpServers": []})
    assert m["id"] == 1 and m["error"]["code"] == -32600, m
    r.send_raw(b"{not json\n")
    m = r.recv()
    assert m["id"] is None and m["error"]["code"] == -32700, m
    r.send_raw(b"[1, 2]\n")
    assert r.recv()["error"]["code"] == -32600
    r.send_raw(b'{"jsonrpc": "1.0", "id": 7, "method": "initialize"}\n')
    m = r.recv()
    assert m["id"] == 7 and m["error"]["code"] == -32600, m
    m = r.call(2, "initialize", {"protocolVersion": "one"})
    assert m["error"]["code"] == -32602, m
    m = r.call(3, "initialize", {"protocolVersion": 1})
    assert m["result"]["protocolVersion"] == 1, m
    m = r.call(4, "no/such/method", {})
    assert m["error"]["code"] == -32601, m
    m = r.call(5, "session/prompt", {"sessionId": "nope", "prompt": []})
    assert m["error"]["code"] == -32002, m
    m = r.call(6, "session/new", {"cwd": "relative/dir", "mcpServers": []})
    assert m["error"]["code"] == -32602, m
    m = r.call(8, "session/new", {"cwd": ws, "mcpServers": []})
    sid = m["result"]["sessionId"]
    m = r.call(9, "session/prompt", {"sessionId": sid, "prompt": [
        {"type": "image", "data": "AAAA", "mimeType": "image/png"}]})
    assert m["error"]["code"] == -32602, m
    m = r.call(10, "session/prompt", {"sessionId": sid, "prompt": "text"})
    assert m["error"]["code"] == -32602, m
    # A notification is never answered, even a bad one; then all goes on.
    r.send_raw(b'{"jsonrpc": "2.0", "method": "session/cancel", "params": 3}\n')
    m = r.call(11, "session/load", {"sessionId": sid, "cwd": ws, "mcpServers": []})
    assert m["error"]["code"] == -32602, m      # already open here
    r.proc.stdin.close()
    assert r.proc.wait(15) == 0
    r.err.close()
    text = open(r.errlog, errors="replace").read()
    for mark in SANITIZER_MARKS:
        assert mark not in text, text


def test_help():
    r = subprocess.run([GBRCTL, "acp", "--help"], capture_output=True, text=True)
    assert r.returncode == 0
    assert "agent_servers" in r.stdout and "sandbox" in r.stdout
    r = subprocess.run([GBRCTL, "acp", "--bogus"], capture_output=True, text=True)
    assert r.returncode == 2


def test_load_says_how_many_older_messages_it_leaves_out(make_daemon, ws, tmpdir_short):
    """session/load replays the newest 1000 messages; the editor is told
    how many older ones there are, and where to read them."""
    d = make_daemon(config="[llm]\nollama_url = off\n")
    c = d.conn()
    sid = c.call("session.create", {"workspace": ws})["result"]["id"]
    n = 0
    while n < 1003:
        r = c.call("session.send", {"session": sid, "text": "m%d" % n})
        if "error" in r:
            assert r["error"]["data"]["kind"] == "busy", r
            time.sleep(0.002)
            continue
        n += 1
    total = c.call("session.history", {"session": sid, "limit": 1})["result"]["total"]
    assert total >= 1003
    e = Editor(d, [], tmpdir_short)
    try:
        e.request("session/load", {"sessionId": sid, "cwd": ws, "mcpServers": []})
        first = e.of(sid, "agent_message_chunk")[0]["content"]["text"]
        assert first.startswith("(%d older messages" % (total - 1000)), first
        assert "gbrctl history %s" % sid in first
        users = [u["content"]["text"] for u in e.of(sid, "user_message_chunk")]
        assert users[-1] == "m1002" and "m0" not in users, users[:3]
    finally:
        e.close()
