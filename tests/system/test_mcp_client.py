"""gbr as an MCP client (issue 28): the external MCP servers a profile
names ([mcp.NAME]) run inside gbr's sandbox, and their tools reach the
model and tool.call as NAME__tool through the same policy, approvals and
disk log as the built-in tools.

The reference servers come from npm (tests/mcp's package.json, installed
by test_mcp.ensure_sdk, never committed): server-everything,
server-memory and server-filesystem. tests/system/mcp_fake_server.py is
a misbehaving one: it crashes mid-call, hangs, floods, changes its tool
list, insists on a protocol revision. Everything runs on this machine;
the fake model is tests/system/fakellm.py on 127.0.0.1."""
import json
import os
import shutil
import time
import uuid

import pytest

from fakellm import FakeLLM
from test_agent import (KEY, KEYVAR, conf, run_turn, send, session, turn_end,
                        turn_events, wait_for as wait_event)
from test_mcp import MCP_DIR, ensure_sdk

HERE = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.join(HERE, "mcp_fake_server.py")
NM = os.path.join(MCP_DIR, "node_modules", "@modelcontextprotocol")
EVERYTHING = os.path.join(NM, "server-everything", "dist", "index.js")
MEMORY = os.path.join(NM, "server-memory", "dist", "index.js")
FILESYSTEM = os.path.join(NM, "server-filesystem", "dist", "index.js")
# The servers' code is read from tests/mcp: commands may read it.
GBRD_CONF = "[exec]\nread_paths = %s\n" % MCP_DIR


@pytest.fixture
def ws(tmpdir_short):
    d = os.path.join(tmpdir_short, "ws")
    os.makedirs(os.path.join(d, ".gbr_envs"))
    # The fake server runs from the workspace (readable by its process).
    shutil.copy(FAKE, d)
    return d


def profile(ws, body, name="default"):
    with open(os.path.join(ws, ".gbr_envs", name + ".ini"), "w") as f:
        f.write(body)


def fake_section(name="fake", extra=""):
    return ("[mcp.%s]\ncommand = python3\nargs = mcp_fake_server.py\n%s"
            % (name, extra))


def servers(d, sid):
    return d.ctl_json("mcp-servers", sid)["servers"]


def wait_running(d, sid, names, timeout=30.0):
    """Waits until every named server is running; returns them by name."""
    deadline = time.time() + timeout
    while True:
        got = {s["name"]: s for s in servers(d, sid)}
        if all(got.get(n, {}).get("state") == "running" for n in names):
            return got
        assert time.time() < deadline, "servers did not start: %r\n%s" % (
            got, d.log()[-4000:])
        time.sleep(0.1)


def new_session(d, ws, env=None):
    p = {"workspace": ws}
    if env:
        p["env"] = env
    r = d.conn().call("session.create", p)
    assert "result" in r, r
    return r["result"]["id"]


def call(d, sid, tool, args=None, timeout=60):
    """tool.call over a connection: the whole reply (result or error)."""
    c = d.conn(timeout=timeout)
    return c.call("tool.call", {"session": sid, "tool": tool,
                                "args": args or {}})


def kind(reply):
    return reply["error"]["data"]["kind"]


@pytest.fixture
def npm_servers():
    ensure_sdk()
    for p in (EVERYTHING, MEMORY, FILESYSTEM):
        assert os.path.exists(p), p


def test_reference_servers_listed_and_called(make_daemon, ws, npm_servers):
    profile(ws, "[env]\nautonomy = supervised\n"
            "[mcp.everything]\ncommand = node\nargs = %s, stdio\n"
            "[mcp.memory]\ncommand = node\nargs = %s\nenv = MEMORY_FILE_PATH\n"
            "tools = read_graph, search_nodes, create_entities\n"
            % (EVERYTHING, MEMORY))
    mem = os.path.join(ws, "memory.jsonl")
    d = make_daemon(config=GBRD_CONF, env={"MEMORY_FILE_PATH": mem})
    sid = new_session(d, ws)
    got = wait_running(d, sid, ["everything", "memory"])
    assert got["everything"]["protocol"] in ("2025-11-25", "2025-06-18",
                                             "2025-03-26")
    assert got["everything"]["starts"] == 1
    # The allow-list: only the three named memory tools.
    assert sorted(t["tool"] for t in got["memory"]["tools"]) == \
        ["create_entities", "read_graph", "search_nodes"]
    # tool.list with the session: built-ins, then NAME__tool with schemas.
    tools = {t["name"]: t for t in d.ctl_json("tools", sid)["tools"]}
    assert "read_file" in tools and "everything__echo" in tools
    assert tools["everything__echo"]["inputSchema"]["type"] == "object"
    assert tools["memory__read_graph"]["annotations"]["readOnlyHint"] is True
    assert "memory__delete_entities" not in tools
    # Without a session only the built-ins.
    assert not any("__" in t["name"] for t in d.ctl_json("tools")["tools"])
    r = call(d, sid, "everything__echo", {"message": "hello mcp"})
    assert "hello mcp" in r["result"]["result"]["text"], r
    r = call(d, sid, "everything__get-sum", {"a": 2, "b": 40})
    assert "42" in r["result"]["result"]["text"], r
    # Binary content is described, not passed.
    r = call(d, sid, "everything__get-tiny-image")
    img = [c for c in r["result"]["result"]["content"] if c["type"] == "image"]
    assert img and img[0]["bytes"] > 0 and "data" not in img[0], r
    # A read-only tool of memory runs at once (readOnlyHint).
    r = call(d, sid, "memory__read_graph")
    assert "result" in r, r
    # Recorded like any tool: tool.call and tool.result in the history and log.
    c = d.conn()
    msgs = c.call("session.history", {"session": sid})["result"]["messages"]
    res = [m for m in msgs if m.get("role") == "tool" and
           m.get("tool") == "everything__get-sum"]
    assert res and res[0]["ok"] is True
    log = d.ctl("log")
    assert "everything__get-sum" in log.stdout
    # A tool that is not there, and arguments outside the schema.
    assert kind(call(d, sid, "everything__nope")) == "method_not_found"
    assert kind(call(d, sid, "nosuch__echo")) == "method_not_found"
    assert kind(call(d, sid, "everything__get-sum", {"a": "x", "b": 1})) == \
        "invalid_params"
    # The human-readable list.
    out = d.ctl("mcp-servers", sid).stdout
    assert "everything running" in out and "memory__create_entities (asks)" in out


def test_write_tool_waits_for_approval(make_daemon, ws, npm_servers):
    mem = os.path.join(ws, "memory.jsonl")
    profile(ws, "[env]\nautonomy = full\n"
            "[mcp.memory]\ncommand = node\nargs = %s\nenv = MEMORY_FILE_PATH\n"
            % MEMORY)
    d = make_daemon(config=GBRD_CONF, env={"MEMORY_FILE_PATH": mem})
    sid = new_session(d, ws)
    wait_running(d, sid, ["memory"])
    c = d.conn()
    rid = c.request("tool.call", {"session": sid, "tool": "memory__create_entities",
                                  "args": {"entities": [{"name": "gbr", "entityType": "runtime",
                                                         "observations": ["written in C"]}]}})
    approval = None
    while approval is None:
        m = c.recv()
        if m.get("method") == "tool.progress" and m["params"]["id"] == rid:
            approval = m["params"]["approval_id"]
        assert m.get("id") != rid, m
    pend = d.ctl_json("approvals", "--session", sid)
    assert pend and pend[0]["why"] == "mcp_tool" and \
        pend[0]["tool"] == "memory__create_entities"
    assert not os.path.exists(mem)
    rrid = c.request("approval.resolve", {"id": approval, "decision": "approve"})
    answer = None
    while answer is None:
        m = c.recv()
        if m.get("id") == rid:
            answer = m
    if not namespaces(d):
        # Without namespaces a server writes nothing in the workspace
        # (see test_server_cannot_change_what_decides_the_sandbox).
        assert kind(answer) == "tool_error" and not os.path.exists(mem), answer
        return
    assert "result" in answer, answer
    # The server wrote where its one named variable told it: the workspace.
    with open(mem) as f:
        assert "written in C" in f.read()
    r = call(d, sid, "memory__search_nodes", {"query": "gbr"})
    assert "written in C" in r["result"]["result"]["text"]
    # ask = all: even a read-only tool asks; a denial is "denied".
    profile(ws, "[env]\nautonomy = full\n"
            "[mcp.memory]\ncommand = node\nargs = %s\nenv = MEMORY_FILE_PATH\n"
            "ask = all\n" % MEMORY)
    c.call("env.reload", {"session": sid})
    rid = c.request("tool.call", {"session": sid, "tool": "memory__read_graph",
                                  "args": {}})
    answer = None
    while answer is None:
        m = c.recv()
        if m.get("method") == "tool.progress" and m["params"]["id"] == rid:
            c.request("approval.resolve", {"id": m["params"]["approval_id"],
                                           "decision": "deny"})
        elif m.get("id") == rid:
            answer = m
    assert kind(answer) == "denied", answer
    del rrid


def test_filesystem_root_cannot_write_outside(make_daemon, ws, tmpdir_short,
                                              npm_servers):
    outside = os.path.join(tmpdir_short, "outside")
    os.makedirs(outside)
    target = os.path.join(outside, "escaped.txt")
    profile(ws, "[env]\nautonomy = full\n"
            "[mcp.fs]\ncommand = node\nargs = %s, /\nask = none\n"
            "[mcp.wsfs]\ncommand = node\nargs = %s, %s\nask = none\n"
            % (FILESYSTEM, FILESYSTEM, ws))
    d = make_daemon(config=GBRD_CONF)
    sid = new_session(d, ws)
    wait_running(d, sid, ["fs", "wsfs"])
    # The server believes it may write anywhere under /; gbr's sandbox
    # around it says otherwise.
    r = call(d, sid, "fs__write_file", {"path": target, "content": "out\n"})
    assert "error" in r or r["result"]["result"]["text"], r
    assert not os.path.exists(target), "the server wrote outside the workspace"
    # Inside the workspace it works where namespaces keep the protected
    # files read-only; without them the server writes nothing there.
    inside = os.path.join(ws, "inside.txt")
    r = call(d, sid, "wsfs__write_file", {"path": inside, "content": "in\n"})
    if namespaces(d):
        assert "result" in r, r
        with open(inside) as f:
            assert f.read() == "in\n"
    else:
        assert not os.path.exists(inside), r
    # The same for the fake server writing directly.
    profile(ws, "[env]\nautonomy = full\n" + fake_section(extra="ask = none\n"))
    d.conn().call("env.reload", {"session": sid})
    wait_running(d, sid, ["fake"])
    target2 = os.path.join(outside, "fake.txt")
    r = call(d, sid, "fake__write", {"path": target2})
    assert kind(r) == "tool_error", r
    assert not os.path.exists(target2)
    # gbrd's socket is out of its reach too.
    r = call(d, sid, "fake__write", {"path": d.socket})
    assert kind(r) == "tool_error", r


def namespaces(d):
    return d.ctl_json("status")["security"]["runner"]["namespaces"]["active"]


@pytest.mark.parametrize("ns", ["on", "off"])
def test_server_cannot_change_what_decides_the_sandbox(make_daemon, ws, ns):
    """A server writing .gbr_envs (the profiles) or a protected file inside
    the workspace fails, with or without namespaces, and the profile in
    force is unchanged."""
    with open(os.path.join(ws, "keep.toml"), "w") as f:
        f.write("v1\n")
    profile(ws, "[env]\nautonomy = full\nprotected_files = keep.toml\n" +
            fake_section(extra="ask = none\n"))
    conf = GBRD_CONF + ("namespaces = off\n" if ns == "off" else "")
    d = make_daemon(config=conf)
    if ns == "on" and not namespaces(d):
        pytest.skip("no namespaces here")
    assert namespaces(d) == (ns == "on")
    sid = new_session(d, ws)
    wait_running(d, sid, ["fake"])
    before = d.conn().call("env.show", {"session": sid})["result"]
    evil = os.path.join(ws, ".gbr_envs", "zz-evil.ini")
    for target in (evil, os.path.join(ws, ".gbr_envs", "default.ini"),
                   os.path.join(ws, "keep.toml")):
        r = call(d, sid, "fake__write", {"path": target})
        assert kind(r) == "tool_error", (target, r)
    assert not os.path.exists(evil)
    with open(os.path.join(ws, "keep.toml")) as f:
        assert f.read() == "v1\n"
    time.sleep(2.5)		# the profile poll would have seen a change
    assert d.conn().call("env.show", {"session": sid})["result"] == before


def test_agent_turn_calls_mcp_tool(make_daemon, ws):
    fake = FakeLLM()
    try:
        fake.push({"text": "", "tool_calls": [
            {"name": "fake__echo", "args": {"text": "from the model"}}]},
            {"text": "Done."})
        profile(ws, "[env]\nautonomy = supervised\n" + fake_section())
        d = make_daemon(config=conf(fake, "openai"), env={KEYVAR["openai"]: KEY})
        c, sid = session(d, ws)
        t, end = run_turn(c, sid, "echo something")
        assert end["outcome"] == "completed", end
        reqs = fake.wait_requests(2)
        names = [x["function"]["name"] for x in reqs[0].json["tools"]]
        assert "fake__echo" in names and "read_file" in names
        echo = [x for x in reqs[0].json["tools"]
                if x["function"]["name"] == "fake__echo"][0]
        assert echo["function"]["parameters"]["required"] == ["text"]
        got = reqs[1].tool_results()
        assert "echo: from the model" in got[0][2]
        evs = turn_events(c, t)
        assert [p["tool"] for p in evs if p["type"] == "tool.result"] == ["fake__echo"]
    finally:
        fake.close()


def test_cancelled_turn_cancels_the_server_call(make_daemon, ws):
    """The model calls a tool that never answers; the turn is cancelled:
    it ends at once, and the server hears notifications/cancelled."""
    fake = FakeLLM()
    try:
        fake.push({"text": "", "tool_calls": [{"name": "fake__hang", "args": {}}]},
                  {"text": "never asked"})
        profile(ws, "[env]\nautonomy = supervised\n" +
                fake_section(extra="timeout_ms = 60000\n"))
        d = make_daemon(config=conf(fake, "openai"), env={KEYVAR["openai"]: KEY})
        c, sid = session(d, ws)
        t = send(c, sid, "hang please")
        # The model's message with the call is recorded before it runs.
        wait_event(c, lambda p: p["type"] == "message" and p.get("turn") == t and
                   any(x.get("name") == "fake__hang"
                       for x in p["message"].get("tool_calls") or []), timeout=30)
        time.sleep(0.3)
        t0 = time.time()
        assert "result" in d.conn().call("session.cancel", {"session": sid})
        end = wait_event(c, turn_end(t), timeout=10)[0]
        assert end["outcome"] == "cancelled", end
        assert time.time() - t0 < 5
        deadline = time.time() + 10
        while "fake server: cancelled" not in d.log():
            assert time.time() < deadline, "the server never heard the cancel"
            time.sleep(0.1)
        # The server is still there for the next call.
        assert call(d, sid, "fake__echo", {"text": "x"})["result"]["result"]["text"] == "echo: x"
    finally:
        fake.close()


def test_crash_mid_call_then_restart(make_daemon, ws):
    profile(ws, "[env]\nautonomy = supervised\n" + fake_section())
    d = make_daemon(config=GBRD_CONF)
    sid = new_session(d, ws)
    first = wait_running(d, sid, ["fake"])["fake"]
    r = call(d, sid, "fake__crash")
    assert kind(r) == "unavailable", r
    assert "exited with code 3" in r["error"]["message"]
    # Restarted after a backoff: a new process, the last error kept.
    got = wait_running(d, sid, ["fake"])["fake"]
    assert first["starts"] == 1 and got["starts"] == 2 and got["crashes"] == 1
    assert "crashing on purpose" in got["last_error"]
    assert call(d, sid, "fake__echo", {"text": "again"})["result"]["result"]["text"] \
        == "echo: again"
    # Its stderr is in gbrd's log.
    assert "fake server: crashing on purpose" in d.log()


def test_hang_times_out_and_cancel_notifies(make_daemon, ws):
    profile(ws, "[env]\nautonomy = supervised\n" +
            fake_section(extra="timeout_ms = 1500\n"))
    d = make_daemon(config=GBRD_CONF)
    sid = new_session(d, ws)
    wait_running(d, sid, ["fake"])
    t0 = time.time()
    r = call(d, sid, "fake__hang")
    assert kind(r) == "timeout", r
    assert "did not answer" in r["error"]["message"]
    assert time.time() - t0 < 10
    # A caller that gives up: tool.cancel, and the server hears it.
    c = d.conn()
    rid = c.request("tool.call", {"session": sid, "tool": "fake__hang",
                                  "args": {}, "request_id": "hang-2"})
    time.sleep(0.3)
    d.conn().call("tool.cancel", {"session": sid, "request_id": "hang-2"})
    while True:
        m = c.recv()
        if m.get("id") == rid:
            break
    assert kind(m) == "cancelled", m
    deadline = time.time() + 10
    while d.log().count("fake server: cancelled") < 2:
        assert time.time() < deadline, "no notifications/cancelled reached the server"
        time.sleep(0.1)
    # The loop never waited: the daemon answers, the server still works.
    assert call(d, sid, "fake__echo", {"text": "alive"})["result"]["result"]["text"] \
        == "echo: alive"


def test_flood_and_noise_are_contained(make_daemon, ws):
    profile(ws, "[env]\nautonomy = supervised\n" + fake_section())
    d = make_daemon(config=GBRD_CONF)
    sid = new_session(d, ws)
    wait_running(d, sid, ["fake"])
    r = call(d, sid, "fake__flood")
    assert kind(r) == "unavailable", r
    got = {s["name"]: s for s in servers(d, sid)}["fake"]
    assert "longer than" in got["last_error"]
    # 5000 stderr lines: the log keeps a bounded number of them.
    r = call(d, sid, "fake__noise")
    assert r["result"]["result"]["text"] == "noisy", r
    assert d.log().count("noise line") <= 200
    assert call(d, sid, "fake__echo", {"text": "ok"})["result"]["result"]["text"] == "echo: ok"


def test_tool_list_changes_and_errors(make_daemon, ws):
    profile(ws, "[env]\nautonomy = supervised\n" + fake_section())
    d = make_daemon(config=GBRD_CONF)
    sid = new_session(d, ws)
    got = wait_running(d, sid, ["fake"])["fake"]
    assert {"name": "bad.name", "why": "its name is not [A-Za-z0-9_-]"} in got["skipped"]
    r = call(d, sid, "fake__fail")
    assert kind(r) == "tool_error" and "it went wrong" in r["error"]["message"], r
    r = call(d, sid, "fake__echo", {"text": "s"})
    assert r["result"]["result"]["structuredContent"] == {"echoed": "s"}
    assert "result" in call(d, sid, "fake__grow")
    deadline = time.time() + 10
    while not any(t["tool"] == "grown" for t in
                  {s["name"]: s for s in servers(d, sid)}["fake"]["tools"]):
        assert time.time() < deadline, "tools/list_changed was not followed"
        time.sleep(0.1)
    assert call(d, sid, "fake__grown")["result"]["result"]["text"] == "I am new"


def test_protocol_revisions(make_daemon, ws):
    profile(ws, "[env]\nautonomy = supervised\n" +
            fake_section("old", "args = 2025-03-26\n") +
            fake_section("future", "args = 2099-01-01\n"))
    d = make_daemon(config=GBRD_CONF)
    sid = new_session(d, ws)
    got = wait_running(d, sid, ["old"])
    assert got["old"]["protocol"] == "2025-03-26"
    deadline = time.time() + 15
    while got["future"]["state"] != "failed":
        assert time.time() < deadline, got["future"]
        time.sleep(0.1)
        got = {s["name"]: s for s in servers(d, sid)}
    assert "protocol revision" in got["future"]["last_error"]
    assert kind(call(d, sid, "future__echo", {"text": "x"})) == "method_not_found"


def test_profile_sections_checked_and_reloaded(make_daemon, ws):
    d = make_daemon(config=GBRD_CONF)
    for body, why in (("[mcp.a__b]\ncommand = x\n", "'__'"),
                      ("[mcp.a]\ncommand = x\nurl = http://127.0.0.1:1/\n", "not both"),
                      ("[mcp.a]\nask = sometimes\ncommand = x\n", "ask is"),
                      ("[mcp.a]\ncommand = x\ntimeout_ms = 5\n", "timeout_ms"),
                      ("[mcp.a]\nargs = x\n", "give command")):
        profile(ws, body, "bad")
        r = d.conn().call("session.create", {"workspace": ws, "env": "bad"})
        assert r["error"]["data"]["kind"] == "invalid_env", r
        assert why in r["error"]["message"], (why, r)
    # JSON, the same keys.
    with open(os.path.join(ws, ".gbr_envs", "j.json"), "w") as f:
        json.dump({"env": {"autonomy": "supervised"},
                   "mcp": {"fake": {"command": "python3",
                                    "args": ["mcp_fake_server.py"],
                                    "ask": "all", "timeout_ms": 5000}}}, f)
    sid = new_session(d, ws, env="j")
    got = wait_running(d, sid, ["fake"])["fake"]
    assert all(t["ask"] for t in got["tools"])
    show = json.dumps(d.conn().call("env.show", {"session": sid})["result"])
    assert '"args": ["mcp_fake_server.py"]' in show, show
    # Hot reload: a server the profile drops is stopped and gone.
    with open(os.path.join(ws, ".gbr_envs", "j.json"), "w") as f:
        json.dump({"env": {"autonomy": "supervised"}, "mcp": {}}, f)
    d.conn().call("env.reload", {"session": sid})
    deadline = time.time() + 10
    while servers(d, sid):
        assert time.time() < deadline
        time.sleep(0.1)
    assert kind(call(d, sid, "fake__echo", {"text": "x"})) == "method_not_found"
    # A url server is named, and said to be unsupported, not run.
    with open(os.path.join(ws, ".gbr_envs", "j.json"), "w") as f:
        json.dump({"mcp": {"web": {"url": "http://127.0.0.1:9/mcp"}}}, f)
    d.conn().call("env.reload", {"session": sid})
    deadline = time.time() + 10
    while True:
        got = {s["name"]: s for s in servers(d, sid)}
        if got.get("web", {}).get("last_error"):
            break
        assert time.time() < deadline, got
        time.sleep(0.1)
    # Nobody listens on port 9: a url server is tried, and says why not.
    assert got["web"]["state"] in ("restarting", "failed") and \
        "cannot connect to http://127.0.0.1:9/mcp" in got["web"]["last_error"], got["web"]


def test_session_close_stops_servers(make_daemon, ws):
    marker = "close-%s" % uuid.uuid4().hex
    profile(ws, "[env]\nautonomy = supervised\n" + marked_section(marker))
    d = make_daemon(config=GBRD_CONF)
    sid = new_session(d, ws)
    wait_running(d, sid, ["fake"])
    assert server_procs(marker), "the server's process is not found"
    assert d.conn().call("session.close", {"session": sid}).get("result") is not None
    deadline = time.time() + 10
    while d.ctl_json("mcp-servers")["servers"]:
        assert time.time() < deadline
        time.sleep(0.1)
    assert wait_for(lambda: not server_procs(marker), timeout=10), \
        "the server outlived its session"


def server_procs(marker):
    """The live processes whose command line holds marker (the runner's
    fork server gives no pid of ours, so they are found by name)."""
    found = []
    for p in os.listdir("/proc"):
        if not p.isdigit():
            continue
        try:
            with open("/proc/%s/cmdline" % p, "rb") as f:
                argv = f.read().split(b"\0")
            with open("/proc/%s/stat" % p) as f:
                zombie = f.read().rsplit(") ", 1)[1][0] == "Z"
        except OSError:
            continue
        if marker.encode() in argv and not zombie:
            found.append(int(p))
    return found


def marked_section(marker, extra=""):
    return ("[mcp.fake]\ncommand = python3\nargs = mcp_fake_server.py, -, -, %s\n%s"
            % (marker, extra))


def wait_for(cond, timeout):
    deadline = time.time() + timeout
    while not cond():
        if time.time() > deadline:
            return False
        time.sleep(0.1)
    return True


def test_idle_server_stops_and_starts_again_when_called(make_daemon, ws):
    marker = "idle-%s" % uuid.uuid4().hex
    profile(ws, "[env]\nautonomy = supervised\n" +
            marked_section(marker, "idle_ms = 1000\n"))
    d = make_daemon(config=GBRD_CONF)
    sid = new_session(d, ws)
    first = wait_running(d, sid, ["fake"])["fake"]
    assert call(d, sid, "fake__echo", {"text": "a"})["result"]["result"]["text"] == "echo: a"
    before = server_procs(marker)
    assert before
    # Unused for idle_ms: stopped, its process gone, its tools still known.
    assert wait_for(lambda: servers(d, sid)[0]["state"] == "stopped", timeout=15), \
        servers(d, sid)
    assert wait_for(lambda: not server_procs(marker), timeout=10)
    assert "fake__echo" in {t["name"] for t in d.ctl_json("tools", sid)["tools"]}
    # The next call starts it again and is answered.
    r = call(d, sid, "fake__echo", {"text": "b"})
    assert r["result"]["result"]["text"] == "echo: b", r
    again = servers(d, sid)[0]
    assert again["starts"] == first["starts"] + 1 and again["crashes"] == 0, again
    assert server_procs(marker) and not set(server_procs(marker)) & set(before)


def test_deny_tools_are_never_offered(make_daemon, ws):
    profile(ws, "[env]\nautonomy = full\n" +
            fake_section(extra="ask = none\ndeny_tools = write, crash\n"))
    d = make_daemon(config=GBRD_CONF)
    sid = new_session(d, ws)
    wait_running(d, sid, ["fake"])
    tools = {t["name"] for t in d.ctl_json("tools", sid)["tools"]}
    assert "fake__echo" in tools
    assert "fake__write" not in tools and "fake__crash" not in tools
    target = os.path.join(ws, "denied.txt")
    assert kind(call(d, sid, "fake__write", {"path": target})) == "method_not_found"
    assert not os.path.exists(target)
    assert kind(call(d, sid, "fake__crash")) == "method_not_found"
    assert servers(d, sid)[0]["crashes"] == 0


def test_read_only_autonomy(make_daemon, ws):
    """In read-only autonomy a tool that does not say it only reads is
    refused by the policy; one that lies about it (readOnlyHint on a
    write) is still kept out of the workspace by the sandbox."""
    profile(ws, "[env]\nautonomy = read-only\n" +
            fake_section(extra="ask = none\n"))
    d = make_daemon(config=GBRD_CONF)
    sid = new_session(d, ws)
    wait_running(d, sid, ["fake"])
    target = os.path.join(ws, "ro.txt")
    r = call(d, sid, "fake__write", {"path": target})
    assert "error" in r and kind(r) != "tool_error", r
    assert not os.path.exists(target)
    assert call(d, sid, "fake__echo", {"text": "r"})["result"]["result"]["text"] == "echo: r"
    # The liar: the policy lets the call through, the sandbox does not.
    profile(ws, "[env]\nautonomy = read-only\n[mcp.fake]\ncommand = python3\n"
            "args = mcp_fake_server.py, -, liar\nask = none\n")
    d.conn().call("env.reload", {"session": sid})
    # The changed args restart the server at its next use: this call.
    r = call(d, sid, "fake__write", {"path": target})
    assert kind(r) == "tool_error", r
    # It was the liar that answered: its write tool claims to only read.
    assert {t["tool"]: t["read_only"] for t in servers(d, sid)[0]["tools"]}[
        "write"] is True, json.dumps(servers(d, sid))
    assert not os.path.exists(target)
