"""gbr as an MCP client of Streamable HTTP servers ([mcp.NAME] url =):
the same tools, policy, approvals, log, timeouts and restarts as a server
over stdio, with the transport's own parts (JSON and SSE answers, the
session id and its expiry, the GET stream, DELETE) and its untrusted
bytes contained. tests/system/mcp_http_server.py is the server, on
127.0.0.1; @modelcontextprotocol/server-everything in its streamableHttp
mode is tried too when tests/mcp has it."""
import os
import shutil
import socket
import subprocess
import time

import pytest

from fakellm import FakeLLM
from mcp_http_server import FakeMCPHTTP
from test_agent import KEY, KEYVAR, conf, run_turn, session, turn_events
from test_mcp import MCP_DIR, ensure_sdk

EVERYTHING = os.path.join(MCP_DIR, "node_modules", "@modelcontextprotocol",
                          "server-everything", "dist", "index.js")


@pytest.fixture
def ws(tmpdir_short):
    d = os.path.join(tmpdir_short, "ws")
    os.makedirs(os.path.join(d, ".gbr_envs"))
    return d


@pytest.fixture
def fake():
    f = FakeMCPHTTP()
    yield f
    f.close()


def profile(ws, body, name="default"):
    with open(os.path.join(ws, ".gbr_envs", name + ".ini"), "w") as f:
        f.write(body)


def section(url, name="web", extra=""):
    return "[mcp.%s]\nurl = %s\n%s" % (name, url, extra)


def servers(d, sid):
    return {s["name"]: s for s in d.ctl_json("mcp-servers", sid)["servers"]}


def wait_state(d, sid, name, states=("running",), timeout=20.0):
    deadline = time.time() + timeout
    while True:
        got = servers(d, sid).get(name, {})
        if got.get("state") in states:
            return got
        assert time.time() < deadline, "%s never %r: %r\n%s" % (
            name, states, got, d.log()[-4000:])
        time.sleep(0.05)


def new_session(d, ws, env=None):
    p = {"workspace": ws}
    if env:
        p["env"] = env
    r = d.conn().call("session.create", p)
    assert "result" in r, r
    return r["result"]["id"]


def call(d, sid, tool, args=None, timeout=60):
    return d.conn(timeout=timeout).call("tool.call", {
        "session": sid, "tool": tool, "args": args or {}})


def kind(reply):
    return reply["error"]["data"]["kind"]


def text(reply):
    assert "result" in reply, reply
    return reply["result"]["result"]["text"]


def test_json_and_sse_answers_with_a_session(make_daemon, ws, fake):
    profile(ws, "[env]\nautonomy = supervised\n" + section(fake.url))
    d = make_daemon()
    sid = new_session(d, ws)
    got = wait_state(d, sid, "web")
    assert got["transport"] == "http" and got["url"] == fake.url
    assert got["protocol"] == "2025-11-25" and got["pid"] is None
    assert got["server_info"]["name"] == "fake-http"
    assert got["http"]["session"] is True
    tools = {t["tool"]: t for t in got["tools"]}
    assert tools["echo"]["read_only"] and not tools["echo"]["ask"]
    assert tools["write"]["ask"]
    r = call(d, sid, "web__echo", {"text": "json"})
    assert text(r) == "echo: json"
    assert r["result"]["result"]["structuredContent"] == {"echoed": "json"}
    # SSE answers: a notification and a ping of the server's come first.
    fake.mode = "sse"
    assert text(call(d, sid, "web__echo", {"text": "sse"})) == "echo: sse"
    fake.wait(lambda r: r[0] == "POST" and (r[2] or {}).get("id") ==
              "srv-ping-1" and "result" in r[2], what="answer to the ping")
    # What gbrd sent: initialize without a session, the rest with it.
    posts = fake.sent(http="POST")
    assert posts[0][2]["method"] == "initialize"
    assert "mcp-session-id" not in posts[0][1]
    for _, h, m in posts:
        assert h["content-type"] == "application/json"
        assert "application/json" in h["accept"] and \
            "text/event-stream" in h["accept"]
    for _, h, m in posts[1:]:
        assert h.get("mcp-session-id") and \
            h.get("mcp-protocol-version") == "2025-11-25", (h, m)
    assert fake.sent("notifications/initialized")
    # The GET stream is open, with the session.
    gets = fake.wait(lambda r: r[0] == "GET", what="GET")
    assert gets[0][1]["accept"] == "text/event-stream"
    assert gets[0][1].get("mcp-session-id")
    # Recorded like any tool.
    msgs = d.conn().call("session.history", {"session": sid})["result"]["messages"]
    assert any(m.get("role") == "tool" and m.get("tool") == "web__echo"
               for m in msgs)
    assert "web__echo" in d.ctl("log").stdout
    # Errors: isError is tool_error; a tool that is not there.
    r = call(d, sid, "web__fail")
    assert kind(r) == "tool_error" and "it went wrong" in r["error"]["message"]
    assert kind(call(d, sid, "web__nope")) == "method_not_found"
    # The session ends with a DELETE when the session closes.
    d.conn().call("session.close", {"session": sid})
    fake.wait(lambda r: r[0] == "DELETE" and r[1].get("mcp-session-id"),
              what="DELETE")


def test_expired_session_initializes_again(make_daemon, ws, fake):
    profile(ws, "[env]\nautonomy = supervised\n" + section(fake.url))
    d = make_daemon()
    sid = new_session(d, ws)
    wait_state(d, sid, "web")
    assert text(call(d, sid, "web__echo", {"text": "a"})) == "echo: a"
    fake.expire()
    # The call that meets the 404 is sent again in the new session.
    assert text(call(d, sid, "web__echo", {"text": "b"})) == "echo: b"
    assert len(fake.sent("initialize")) == 2
    got = servers(d, sid)["web"]
    assert "session expired" in got["last_error"] and got["state"] == "running"
    assert got["starts"] == 1
    # Without sessions at all: nothing is sent, nothing is needed.
    fake2 = FakeMCPHTTP(sessions=False, get_stream=False, mode="sse")
    try:
        profile(ws, "[env]\nautonomy = supervised\n" + section(fake2.url))
        d.conn().call("env.reload", {"session": sid})
        # tool.call does not wait for a server that starts: this does.
        assert wait_state(d, sid, "web")["url"] == fake2.url
        assert text(call(d, sid, "web__echo", {"text": "c"})) == "echo: c"
        assert all("mcp-session-id" not in h for _, h, _ in fake2.sent())
        # The answer to the server's ping may still be on its way.
        deadline = time.time() + 10
        while servers(d, sid)["web"]["http"]["in_flight"] != 0:
            assert time.time() < deadline
            time.sleep(0.05)
        got = servers(d, sid)["web"]
        assert got["http"] == {"session": False, "stream": "not offered",
                               "in_flight": 0}
    finally:
        fake2.close()


def test_agent_turn_calls_http_tool(make_daemon, ws, fake):
    llm = FakeLLM()
    try:
        llm.push({"text": "", "tool_calls": [
            {"name": "web__echo", "args": {"text": "from the model"}}]},
            {"text": "Done."})
        profile(ws, "[env]\nautonomy = supervised\n" + section(fake.url))
        d = make_daemon(config=conf(llm, "openai"),
                        env={KEYVAR["openai"]: KEY})
        c, sid = session(d, ws)
        t, end = run_turn(c, sid, "echo something")
        assert end["outcome"] == "completed", end
        reqs = llm.wait_requests(2)
        names = [x["function"]["name"] for x in reqs[0].json["tools"]]
        assert "web__echo" in names and "read_file" in names
        assert "echo: from the model" in reqs[1].tool_results()[0][2]
        evs = turn_events(c, t)
        assert [p["tool"] for p in evs if p["type"] == "tool.result"] == \
            ["web__echo"]
    finally:
        llm.close()


def test_write_tool_waits_for_approval(make_daemon, ws, fake):
    profile(ws, "[env]\nautonomy = full\n" + section(fake.url))
    d = make_daemon()
    sid = new_session(d, ws)
    wait_state(d, sid, "web")
    c = d.conn()
    rid = c.request("tool.call", {"session": sid, "tool": "web__write",
                                  "args": {}})
    approval = None
    while approval is None:
        m = c.recv()
        if m.get("method") == "tool.progress" and m["params"]["id"] == rid:
            approval = m["params"]["approval_id"]
        assert m.get("id") != rid, m
    pend = d.ctl_json("approvals", "--session", sid)
    assert pend and pend[0]["why"] == "mcp_tool" and \
        pend[0]["tool"] == "web__write"
    assert not [r for r in fake.sent("tools/call")]
    c.request("approval.resolve", {"id": approval, "decision": "approve"})
    while True:
        m = c.recv()
        if m.get("id") == rid:
            break
    assert text(m) == "written"


def test_hang_times_out_and_cancel_notifies(make_daemon, ws, fake):
    profile(ws, "[env]\nautonomy = supervised\n" +
            section(fake.url, extra="timeout_ms = 1500\n"))
    d = make_daemon()
    sid = new_session(d, ws)
    wait_state(d, sid, "web")
    t0 = time.time()
    r = call(d, sid, "web__hang")
    assert kind(r) == "timeout" and "did not answer" in r["error"]["message"]
    assert time.time() - t0 < 10
    hung = [m for _, _, m in fake.sent("tools/call")
            if m["params"]["name"] == "hang"][0]
    fake.wait(lambda r: (r[2] or {}).get("method") == "notifications/cancelled"
              and r[2]["params"]["requestId"] == hung["id"],
              what="notifications/cancelled")
    # A caller that gives up: tool.cancel, and the server hears it.
    c = d.conn()
    rid = c.request("tool.call", {"session": sid, "tool": "web__hang",
                                  "args": {}, "request_id": "hang-2"})
    time.sleep(0.3)
    d.conn().call("tool.cancel", {"session": sid, "request_id": "hang-2"})
    while True:
        m = c.recv()
        if m.get("id") == rid:
            break
    assert kind(m) == "cancelled", m
    deadline = time.time() + 10
    while len(fake.cancelled) < 2:
        assert time.time() < deadline, fake.cancelled
        time.sleep(0.05)
    assert text(call(d, sid, "web__echo", {"text": "alive"})) == "echo: alive"
    assert servers(d, sid)["web"]["http"]["in_flight"] == 0


def test_server_down_then_back(make_daemon, ws, fake):
    profile(ws, "[env]\nautonomy = supervised\n" + section(fake.url))
    d = make_daemon()
    sid = new_session(d, ws)
    wait_state(d, sid, "web")
    fake.stop()
    r = call(d, sid, "web__echo", {"text": "x"})
    assert kind(r) == "unavailable", r
    got = wait_state(d, sid, "web", ("restarting", "failed"))
    assert "cannot connect to %s" % fake.url in got["last_error"], got
    # It comes back on the same port: the restart (or the next call) finds it.
    fake.start()
    deadline = time.time() + 30
    while True:
        r = call(d, sid, "web__echo", {"text": "back"})
        if "result" in r:
            break
        assert time.time() < deadline, r
        time.sleep(0.5)
    assert text(r) == "echo: back"
    assert servers(d, sid)["web"]["state"] == "running"


def test_garbage_and_oversized_answers_are_contained(make_daemon, ws, fake):
    profile(ws, "[env]\nautonomy = supervised\n" + section(fake.url))
    d = make_daemon()
    sid = new_session(d, ws)
    wait_state(d, sid, "web")
    r = call(d, sid, "web__garbage")
    assert kind(r) == "unavailable" and "without the JSON-RPC answer" in \
        r["error"]["message"], r
    r = call(d, sid, "web__wrongtype")
    assert kind(r) == "unavailable" and "neither application/json" in \
        r["error"]["message"], r
    assert text(call(d, sid, "web__echo", {"text": "ok"})) == "echo: ok"
    fake.mode = "sse"
    r = call(d, sid, "web__big")
    assert kind(r) == "unavailable", r
    got = servers(d, sid)["web"]
    assert got["state"] == "failed" and "longer than" in got["last_error"]
    # A failed server is tried again by the next call.
    assert text(call(d, sid, "web__echo", {"text": "again"})) == "echo: again"
    fake.mode = "json"
    r = call(d, sid, "web__big")
    assert kind(r) == "unavailable" and "longer than" in \
        servers(d, sid)["web"]["last_error"]
    assert text(call(d, sid, "web__echo", {"text": "again"})) == "echo: again"


@pytest.mark.parametrize("get_stream", [True, False])
def test_list_changed(make_daemon, ws, get_stream):
    fake = FakeMCPHTTP(get_stream=get_stream, mode="sse")
    try:
        profile(ws, "[env]\nautonomy = supervised\n" + section(fake.url))
        d = make_daemon()
        sid = new_session(d, ws)
        wait_state(d, sid, "web")
        if get_stream:
            deadline = time.time() + 10
            while servers(d, sid)["web"]["http"]["stream"] != "open" or \
                    not fake.streams:
                assert time.time() < deadline
                time.sleep(0.05)
        assert text(call(d, sid, "web__grow")) == "grown"
        deadline = time.time() + 10
        while not any(t["tool"] == "grown"
                      for t in servers(d, sid)["web"]["tools"]):
            assert time.time() < deadline, "list_changed was not followed"
            time.sleep(0.05)
        assert text(call(d, sid, "web__grown")) == "I am new"
        if not get_stream:
            assert servers(d, sid)["web"]["http"]["stream"] == "not offered"
    finally:
        fake.close()


def test_profile_checks_and_headers(make_daemon, ws, fake):
    d = make_daemon(env={"GBR_T_TOKEN": "Bearer s3cret-tok"})
    for body, why in (
            (section(fake.url, extra="env = HOME\n"), "not url"),
            (section(fake.url, extra="headers = Authorization\n"),
             "Name=VARIABLE"),
            (section(fake.url, extra="headers = Mcp-Session-Id=X\n"),
             "itself"),
            (section(fake.url, extra="headers = X-A=1BAD\n"), "variable"),
            ("[mcp.web]\ncommand = x\nheaders = A=B\n", "not command")):
        profile(ws, body, "bad")
        r = d.conn().call("session.create", {"workspace": ws, "env": "bad"})
        assert r["error"]["data"]["kind"] == "invalid_env", r
        assert why in r["error"]["message"], (why, r)
    # Plain http to a host that is not loopback: refused, not sent.
    profile(ws, section("http://192.0.2.1:9/mcp") +
            section(fake.url, "nokey", "headers = Authorization=NOPE_VAR\n") +
            section(fake.url, "auth", "headers = Authorization=GBR_T_TOKEN\n"))
    sid = new_session(d, ws)
    got = wait_state(d, sid, "web", ("failed",))
    assert "only for a loopback host" in got["last_error"]
    got = wait_state(d, sid, "nokey", ("failed",))
    assert "NOPE_VAR is not set" in got["last_error"]
    wait_state(d, sid, "auth")
    posts = fake.sent(http="POST")
    assert posts and all(h.get("authorization") == "Bearer s3cret-tok"
                         for _, h, _ in posts)
    assert "s3cret" not in d.log()
    # Hot reload: another url restarts it (the old session is DELETEd).
    fake2 = FakeMCPHTTP()
    try:
        profile(ws, section(fake2.url, "auth"))
        d.conn().call("env.reload", {"session": sid})
        assert wait_state(d, sid, "auth")["url"] == fake2.url
        assert text(call(d, sid, "auth__echo", {"text": "new"})) == "echo: new"
        assert fake2.sent("initialize") and fake.sent(http="DELETE")
        assert all("authorization" not in h for _, h, _ in fake2.sent())
    finally:
        fake2.close()


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def test_server_everything_streamable_http(make_daemon, ws):
    node = shutil.which("node") or shutil.which("nodejs")
    if node is None:
        pytest.skip("node is not installed")
    if not os.path.exists(EVERYTHING):
        try:
            ensure_sdk()
        except pytest.fail.Exception as e:
            pytest.skip("server-everything is not installed: %s" % e)
    port = free_port()
    p = subprocess.Popen([node, EVERYTHING, "streamableHttp"],
                         env=dict(os.environ, PORT=str(port)),
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        deadline = time.time() + 20
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                assert p.poll() is None and time.time() < deadline, \
                    p.stderr.read().decode(errors="replace")
                time.sleep(0.1)
        url = "http://127.0.0.1:%d/mcp" % port
        profile(ws, "[env]\nautonomy = supervised\n" +
                section(url, "everything", "ask = none\n"))
        d = make_daemon()
        sid = new_session(d, ws)
        got = wait_state(d, sid, "everything", timeout=30)
        assert got["protocol"] in ("2025-11-25", "2025-06-18", "2025-03-26")
        assert got["http"]["session"] is True
        r = call(d, sid, "everything__echo", {"message": "hello http"})
        assert "hello http" in text(r), r
        r = call(d, sid, "everything__get-sum", {"a": 2, "b": 40})
        assert "42" in text(r), r
        d.conn().call("session.close", {"session": sid})
    finally:
        p.terminate()
        try:
            p.wait(10)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait()
