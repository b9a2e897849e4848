"""The agent loop against a real gbrd and tests/system/fakellm.py on
127.0.0.1, for each provider (OpenAI-compatible, Anthropic, Gemini): a
plain answer streams as message.delta events; tool calls (read_file,
write_file, run_command) run in the sandbox and their results go back in
the provider's format; a write to a protected path waits for a human,
survives kill -9 and the turn goes on once approved; the check loop stops
at max_fix_attempts; 429 then success honouring Retry-After; a cut stream
is retried without running a tool twice; cancel mid-stream; 20 sessions
streaming at once; a profile reload changes the next request's system
prompt; the context budget; the step limit; a local Ollama; and the API
key: only in its header, never under the state folder, never in a
child's environment, never sent where a profile points."""
import json
import os
import stat
import subprocess
import time

import pytest

from conftest import GBRCTL
from fakellm import FakeLLM

KEY = "sk-gbr-TEST-5f2b9c0e7a14d3"
KEYVAR = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY",
          "gemini": "GEMINI_API_KEY"}
AUTH = {"openai": ("authorization", "Bearer " + KEY),
        "anthropic": ("x-api-key", KEY),
        "gemini": ("x-goog-api-key", KEY)}
PROVIDERS = ("openai", "anthropic", "gemini")
SYSTEM = "You are the gbr test agent."


@pytest.fixture
def fake():
    f = FakeLLM()
    yield f
    f.close()


def conf(fake, provider, extra=""):
    return ("[llm]\nprovider = %s\nbase_url = %s\nretry_base_ms = 20\n"
            "retry_max_ms = 3000\nidle_timeout_ms = 5000\nollama_url = off\n%s"
            % (provider, fake.base_url(provider), extra))


def profile(ws, body):
    d = os.path.join(ws, ".gbr_envs")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "default.ini"), "w") as f:
        f.write(body)


@pytest.fixture
def ws(tmpdir_short):
    d = os.path.join(tmpdir_short, "ws")
    os.makedirs(d)
    with open(os.path.join(d, "hello.txt"), "w") as f:
        f.write("hello from the workspace\n")
    profile(d, "[env]\nprotected_files = secret.cfg\nautonomy = full\n"
            "[prompt]\nsystem = %s\n" % SYSTEM)
    return d


def start(make_daemon, fake, provider, extra="", env=None, key=True):
    e = {KEYVAR[provider]: KEY} if key else {}
    e.update(env or {})
    return make_daemon(config=conf(fake, provider, extra), env=e)


def params(conn):
    return [m["params"] for m in conn.events if m.get("method") == "event"]


def wait_for(conn, pred, timeout=30.0):
    deadline = time.time() + timeout
    while True:
        got = [p for p in params(conn) if pred(p)]
        if got:
            return got
        left = deadline - time.time()
        assert left > 0, "timed out; last events: %r" % params(conn)[-8:]
        conn.sock.settimeout(left)
        m = conn.recv()
        if m.get("method") == "event":
            conn.events.append(m)


def turn_end(turn):
    return lambda p: (p["type"] == "session.state" and p.get("turn") == turn and
                      p["state"] not in ("running", "awaiting_approval"))


def session(d, ws, name=None):
    c = d.conn()
    p = {"workspace": ws}
    if name:
        p["name"] = name
    s = c.call("session.create", p)["result"]
    c.call("session.attach", {"session": s["id"]})
    return c, s["id"]


def send(c, sid, text):
    r = c.call("session.send", {"session": sid, "text": text})
    assert "result" in r, r
    return r["result"]["turn"]


def turn_of(p):
    if "turn" in p:
        return p["turn"]
    return (p.get("message") or {}).get("turn")


def turn_events(c, turn):
    return [p for p in params(c) if turn_of(p) == turn]


def run_turn(c, sid, text, timeout=30.0):
    t = send(c, sid, text)
    end = wait_for(c, turn_end(t), timeout)[0]
    return t, end


def history(c, sid):
    return c.call("session.history", {"session": sid})["result"]["messages"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_plain_answer_streams_as_deltas(make_daemon, fake, ws, provider):
    fake.push({"text": "Hello, I am streaming in pieces.", "chunks": 6,
               "usage": {"input": 42, "output": 17}})
    d = start(make_daemon, fake, provider)
    c, sid = session(d, ws)
    t, end = run_turn(c, sid, "say hello")
    assert end["state"] == "idle" and end["outcome"] == "completed", end
    evs = turn_events(c, t)
    deltas = [p["text"] for p in evs if p["type"] == "message.delta"]
    assert len(deltas) >= 3 and "".join(deltas) == "Hello, I am streaming in pieces."
    msg = [p for p in evs if p["type"] == "message" and p["message"]["role"] == "assistant"]
    assert len(msg) == 1 and msg[0]["message"]["content"] == "Hello, I am streaming in pieces."
    assert msg[0]["message"]["usage"] == {"input_tokens": 42, "output_tokens": 17}
    # No [prices]: the turn's cost is unknown, and says so (test_cost.py).
    assert end["usage"] == {"input_tokens": 42, "output_tokens": 17, "unpriced": True}
    # Deltas are live only: the durable record is the one message.
    assert not any(m.get("type") == "message.delta" for m in history(c, sid))
    lst = c.call("session.list")["result"]["sessions"][0]
    assert lst["usage"]["input_tokens"] == 42 and lst["usage"]["output_tokens"] == 17
    req = fake.llm_requests()[0]
    assert req.provider == provider
    assert req.system() == SYSTEM and req.user_texts() == ["say hello"]
    assert req.headers.get(AUTH[provider][0]) == AUTH[provider][1]
    assert {"read_file", "write_file", "run_command"} <= set(req.tool_names())


@pytest.mark.parametrize("provider", PROVIDERS)
def test_tool_calls_run_in_the_sandbox(make_daemon, fake, ws, provider):
    fake.push({"text": "Let me work.", "tool_calls": [
        {"name": "read_file", "args": {"path": "hello.txt"}},
        {"name": "write_file", "args": {"path": "out.txt", "content": "written by the agent\n"}},
        {"name": "run_command", "args": {"argv": ["cat", "out.txt"]}},
        {"name": "read_file", "args": {"path": "../../etc/passwd"}}]},
        {"text": "All done."})
    d = start(make_daemon, fake, provider)
    c, sid = session(d, ws)
    t, end = run_turn(c, sid, "do things")
    assert end["outcome"] == "completed", end
    with open(os.path.join(ws, "out.txt")) as f:
        assert f.read() == "written by the agent\n"
    evs = turn_events(c, t)
    results = [p for p in evs if p["type"] == "tool.result"]
    assert [r["ok"] for r in results] == [True, True, True, False]
    assert any(p["type"] == "sandbox.denied" for p in params(c))
    reqs = fake.wait_requests(2)
    sent = reqs[1].tool_calls()
    got = reqs[1].tool_results()
    assert len(sent) == 4 and len(got) == 4
    if provider != "gemini":
        # The ids the model gave come back with its calls and their results.
        assert [x[0] for x in got] == [x[0] for x in sent]
    else:
        assert [x[1] for x in got] == ["read_file", "write_file", "run_command", "read_file"]
    assert "hello from the workspace" in got[0][2]
    assert "written by the agent" in got[2][2]
    assert "path_traversal" in got[3][2]
    if provider in ("anthropic", "gemini"):
        assert [x[3] for x in got] == [True, True, True, False]
    final = [p for p in evs if p["type"] == "message"][-1]["message"]
    assert final["content"] == "All done."


@pytest.mark.parametrize("provider", PROVIDERS)
def test_protected_write_waits_for_approval_across_kill9(make_daemon, fake, ws, provider):
    fake.push({"text": "", "tool_calls": [
        {"name": "write_file", "args": {"path": "secret.cfg", "content": "x = 1\n"}}],
        "signature": "c2ln"},
        {"text": "The config is written."})
    d = start(make_daemon, fake, provider)
    c, sid = session(d, ws)
    t = send(c, sid, "write the config")
    req = wait_for(c, lambda p: p["type"] == "approval.requested")[0]
    wait_for(c, lambda p: p["type"] == "session.state" and p["state"] == "awaiting_approval")
    assert not os.path.exists(os.path.join(ws, "secret.cfg"))
    aid = req["approval"]["id"]
    d.kill9()
    d.start()
    c2 = d.conn()
    info = c2.call("session.list")["result"]["sessions"][0]
    assert info["state"] == "awaiting_approval"
    pending = c2.call("approval.list", {})["result"]["approvals"]
    assert [a["id"] for a in pending] == [aid]
    c2.call("session.attach", {"session": sid})
    r = c2.call("approval.resolve", {"id": aid, "decision": "approve"})
    assert "result" in r, r
    end = wait_for(c2, turn_end(t))[0]
    assert end["state"] == "idle" and end["outcome"] == "completed", end
    with open(os.path.join(ws, "secret.cfg")) as f:
        assert f.read() == "x = 1\n"
    reqs = fake.wait_requests(2)
    got = reqs[1].tool_results()
    assert len(got) == 1 and not got[0][2].startswith("error"), got
    if provider == "gemini":
        # The model's thoughtSignature went back with its call.
        parts = [p for c_ in reqs[1].json["contents"] for p in c_["parts"]
                 if "functionCall" in p]
        assert parts[0].get("thoughtSignature") == "c2ln"
    msgs = history(c2, sid)
    assert msgs[-1]["role"] == "assistant" and msgs[-1]["content"] == "The config is written."
    # The tool ran once.
    assert len([m for m in msgs if m.get("role") == "tool"]) == 1


def test_denied_approval_goes_back_to_the_model(make_daemon, fake, ws):
    fake.push({"tool_calls": [{"name": "write_file", "args": {
        "path": "secret.cfg", "content": "evil\n"}}]}, {"text": "Understood."})
    d = start(make_daemon, fake, "openai")
    c, sid = session(d, ws)
    t = send(c, sid, "try it")
    req = wait_for(c, lambda p: p["type"] == "approval.requested")[0]
    c.call("approval.resolve", {"id": req["approval"]["id"], "decision": "deny",
                                "reason": "not this file"})
    end = wait_for(c, turn_end(t))[0]
    assert end["outcome"] == "completed"
    got = fake.wait_requests(2)[1].tool_results()
    assert "denied" in got[0][2] and "not this file" in got[0][2]
    assert not os.path.exists(os.path.join(ws, "secret.cfg"))


def write_check(ws, body):
    with open(os.path.join(ws, "check.sh"), "w") as f:
        f.write(body)


@pytest.mark.parametrize("provider", ("openai", "anthropic"))
def test_check_loop_stops_at_max_fix_attempts(make_daemon, fake, ws, provider):
    write_check(ws, "echo 'main.c:3:5: error: boom' >&2\nexit 1\n")
    profile(ws, "[env]\nautonomy = full\ncheck_command = sh check.sh\n"
            "max_fix_attempts = 2\n[prompt]\nsystem = %s\n" % SYSTEM)
    edit = {"tool_calls": [{"name": "write_file", "args": {"path": "main.c", "content": "int x;\n"}}]}
    fake.push(edit, {"text": "done"}, edit, {"text": "fixed"}, edit, {"text": "fixed again"})
    d = start(make_daemon, fake, provider)
    c, sid = session(d, ws)
    t, end = run_turn(c, sid, "build it")
    assert end["outcome"] == "check_failed" and end["check"] == {"ok": False, "runs": 3}, end
    checks = [p for p in turn_events(c, t) if p["type"] == "check.result"]
    assert [p["attempt"] for p in checks] == [1, 2, 3]
    assert all(not p["ok"] for p in checks) and checks[-1]["final"]
    assert "boom" in checks[0]["output"]
    assert checks[0]["diagnostics"][0]["file"] == "main.c"
    reqs = fake.wait_requests(6)
    assert len(fake.llm_requests()) == 6
    feedback = [u for u in reqs[-1].user_texts() if "check command" in u]
    assert len(feedback) == 2 and "boom" in feedback[0]
    msgs = history(c, sid)
    assert len([m for m in msgs if m.get("source") == "check"]) == 2


def test_check_passes_after_a_fix(make_daemon, fake, ws):
    write_check(ws, "test -f fixed.txt || { echo 'a.c:1: error: not fixed'; exit 2; }\n")
    profile(ws, "[env]\nautonomy = full\ncheck_command = sh check.sh\n"
            "max_fix_attempts = 3\n")
    fake.push({"tool_calls": [{"name": "write_file", "args": {"path": "a.c", "content": "x\n"}}]},
              {"text": "done"},
              {"tool_calls": [{"name": "write_file", "args": {"path": "fixed.txt", "content": "ok\n"}}]},
              {"text": "now fixed"})
    d = start(make_daemon, fake, "gemini")
    c, sid = session(d, ws)
    t, end = run_turn(c, sid, "go")
    assert end["outcome"] == "completed" and end["check"] == {"ok": True, "runs": 2}, end
    checks = [p for p in turn_events(c, t) if p["type"] == "check.result"]
    assert [p["ok"] for p in checks] == [False, True]
    # A turn that changed nothing runs no check.
    fake.push({"text": "just talking"})
    t2, end2 = run_turn(c, sid, "talk")
    assert end2["outcome"] == "completed" and "check" not in end2
    assert not [p for p in turn_events(c, t2) if p["type"] == "check.result"]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_429_then_success(make_daemon, fake, ws, provider):
    fake.push({"status": 429, "retry_after": 1, "body": {"error": {"message": "rate limited"}}},
              {"status": 503},
              {"text": "third time lucky"})
    d = start(make_daemon, fake, provider)
    c, sid = session(d, ws)
    t, end = run_turn(c, sid, "hi")
    assert end["outcome"] == "completed"
    retries = [p for p in turn_events(c, t) if p["type"] == "llm.retry"]
    assert [(r["status"], r["kind"]) for r in retries] == [(429, "rate_limited"), (503, "llm_unavailable")]
    assert retries[0]["delay_ms"] == 1000     # Retry-After honoured
    assert retries[1]["delay_ms"] <= 3000
    assert len(fake.llm_requests()) == 3
    assert [p for p in turn_events(c, t) if p["type"] == "message"][-1]["message"]["content"] == "third time lucky"


def test_gemini_retry_info_is_honoured(make_daemon, fake, ws):
    """Gemini says how long to wait in the 429 body (google.rpc.RetryInfo),
    not in a Retry-After header."""
    fake.push({"status": 429, "body": [{"error": {
        "code": 429, "message": "Resource has been exhausted",
        "status": "RESOURCE_EXHAUSTED", "details": [{
            "@type": "type.googleapis.com/google.rpc.RetryInfo",
            "retryDelay": "2s"}]}}]},
              {"text": "after the wait"})
    d = start(make_daemon, fake, "gemini", "retry_max_ms = 5000\n")
    c, sid = session(d, ws)
    t, end = run_turn(c, sid, "hi")
    assert end["outcome"] == "completed"
    retries = [p for p in turn_events(c, t) if p["type"] == "llm.retry"]
    assert [r["delay_ms"] for r in retries] == [2000], retries


def test_retries_give_up(make_daemon, fake, ws):
    fake.default = {"status": 500}
    d = start(make_daemon, fake, "openai", "max_retries = 2\n")
    c, sid = session(d, ws)
    t, end = run_turn(c, sid, "hi")
    assert end["outcome"] == "error"
    err = [p for p in turn_events(c, t) if p["type"] == "error"]
    assert err and err[0]["kind"] == "llm_unavailable" and "500" in err[0]["message"]
    assert len(fake.llm_requests()) == 3


@pytest.mark.parametrize("provider", PROVIDERS)
def test_cut_stream_retried_without_running_a_tool_twice(make_daemon, fake, ws, provider):
    run = {"name": "run_command", "args": {"argv": ["sh", "-c", "echo ran >> count.txt"]}}
    fake.push({"text": "running it", "tool_calls": [run], "cut_after": 2},
              {"text": "running it", "tool_calls": [run]},
              {"text": "a long answer that will be cut", "chunks": 6, "cut_after": 3},
              {"text": "final answer"})
    d = start(make_daemon, fake, provider)
    c, sid = session(d, ws)
    t, end = run_turn(c, sid, "count")
    assert end["outcome"] == "completed", end
    with open(os.path.join(ws, "count.txt")) as f:
        assert f.read() == "ran\n"
    retries = [p for p in turn_events(c, t) if p["type"] == "llm.retry"]
    assert len(retries) == 2 and all(r["kind"] == "stream_cut" for r in retries)
    reqs = fake.wait_requests(4)
    # The retry after the tool ran resent its one result; nothing ran again.
    assert len(reqs[2].tool_results()) == 1 and len(reqs[3].tool_results()) == 1
    assert reqs[2].raw == reqs[3].raw
    results = [p for p in turn_events(c, t) if p["type"] == "tool.result"]
    assert len(results) == 1


def test_cancel_mid_stream(make_daemon, fake, ws):
    # Anthropic's stream: message_start, content_block_start, ping, then
    # two deltas, then silence.
    fake.push({"text": "this answer never ends", "chunks": 5, "hang_after": 5})
    d = start(make_daemon, fake, "anthropic")
    c, sid = session(d, ws)
    t = send(c, sid, "go")
    wait_for(c, lambda p: p["type"] == "message.delta")
    r = c.call("session.cancel", {"session": sid})["result"]
    assert r["cancelled"] is True, (r, params(c))
    end = wait_for(c, turn_end(t))[0]
    assert end["outcome"] == "cancelled"
    # The transfer is aborted: the fake server sees the connection go.
    deadline = time.time() + 10
    while fake.open_streams and time.time() < deadline:
        time.sleep(0.05)
    assert fake.open_streams == 0 and fake.aborted == 1
    assert not [p for p in turn_events(c, t) if p["type"] == "message"
                and p["message"]["role"] == "assistant"]
    # The session takes a new message at once.
    fake.push({"text": "back"})
    t2, end2 = run_turn(c, sid, "again")
    assert end2["outcome"] == "completed"


def test_close_and_shutdown_abort_streams(make_daemon, fake, ws):
    fake.default = {"text": "slow", "chunks": 4, "hang_after": 2}
    d = start(make_daemon, fake, "openai")
    c, sid = session(d, ws)
    send(c, sid, "go")
    wait_for(c, lambda p: p["type"] == "message.delta")
    c.call("session.close", {"session": sid})
    deadline = time.time() + 10
    while fake.aborted < 1 and time.time() < deadline:
        time.sleep(0.05)
    assert fake.aborted == 1, "session.close left the stream open"
    c2, sid2 = session(d, ws, "other")
    send(c2, sid2, "go")
    wait_for(c2, lambda p: p["type"] == "message.delta")
    assert d.stop() == 0
    deadline = time.time() + 10
    while fake.aborted < 2 and time.time() < deadline:
        time.sleep(0.05)
    assert fake.aborted == 2 and fake.open_streams == 0


def test_twenty_sessions_stream_at_once(make_daemon, fake, ws):
    fake.default = {"text": "parallel answer", "chunks": 5, "delay": 0.05}
    d = start(make_daemon, fake, "openai")
    conns = []
    for i in range(20):
        c, sid = session(d, ws, "s%d" % i)
        conns.append((c, sid, send(c, sid, "hello %d" % i)))
    for c, sid, t in conns:
        end = wait_for(c, turn_end(t), 60)[0]
        assert end["outcome"] == "completed"
        text = "".join(p["text"] for p in turn_events(c, t) if p["type"] == "message.delta")
        assert text == "parallel answer"
    assert len(fake.llm_requests()) == 20


def test_profile_reload_changes_the_system_prompt(make_daemon, fake, ws):
    d = start(make_daemon, fake, "anthropic")
    c, sid = session(d, ws)
    run_turn(c, sid, "first")
    profile(ws, "[env]\nprotected_files = secret.cfg\n[prompt]\nsystem = A new prompt.\n")
    wait_for(c, lambda p: p["type"] == "env.reloaded")
    run_turn(c, sid, "second")
    reqs = fake.llm_requests()
    assert reqs[0].system() == SYSTEM and reqs[1].system() == "A new prompt."
    # The rest of the history is untouched.
    assert reqs[1].user_texts() == ["first", "second"]


def big_file(ws):
    """big.txt in the workspace: about 30 KiB, over a 16-24K budget."""
    with open(os.path.join(ws, "big.txt"), "w") as f:
        f.write(("0123456789abcdef" * 64 + "\n") * 30)


def test_context_budget_shortens_old_tool_outputs(make_daemon, fake, ws):
    big_file(ws)
    profile(ws, "[env]\nautonomy = full\n[llm]\nmax_request_bytes = 16K\n")
    read = {"tool_calls": [{"name": "read_file", "args": {"path": "big.txt"}}]}
    fake.push(read, {"text": "read it"})
    d = start(make_daemon, fake, "openai")
    c, sid = session(d, ws)
    t, end = run_turn(c, sid, "read the big file")
    assert end["outcome"] == "completed", end
    reqs = fake.llm_requests()
    assert len(reqs) == 2 and all(len(r.raw) <= 16 * 1024 for r in reqs)
    assert "shortened from" in reqs[1].tool_results()[0][2]
    ev = [p for p in turn_events(c, t) if p["type"] == "context.trimmed"]
    assert ev and ev[0]["shortened"] == 1 and ev[0]["bytes_after"] <= 16 * 1024
    # A message that can never fit is not sent at all.
    n = len(fake.llm_requests())
    t2, end2 = run_turn(c, sid, "x" * 20000)
    assert end2["outcome"] == "error"
    assert [p for p in turn_events(c, t2) if p["type"] == "error"][0]["kind"] == "too_large"
    assert len(fake.llm_requests()) == n


@pytest.mark.parametrize("provider", PROVIDERS)
def test_context_budget_shortens_old_messages_and_arguments(make_daemon, fake,
                                                            ws, provider):
    # A model that writes a big file and then gives a big answer would make
    # every later request too large if only tool outputs could be cut.
    profile(ws, "[env]\nautonomy = full\n[llm]\nmax_request_bytes = 16K\n")
    content = "line of generated data\n" * 1000                # 23 KB
    fake.push({"tool_calls": [{"name": "write_file",
                               "args": {"path": "gen.txt", "content": content}}]},
              {"text": "wrote it"},
              {"text": "A" * 20000},
              {"text": "still here"})
    d = start(make_daemon, fake, provider)
    c, sid = session(d, ws)
    t, end = run_turn(c, sid, "generate the data")
    assert end["outcome"] == "completed", end
    # The tool ran with the whole content; only the request was cut.
    with open(os.path.join(ws, "gen.txt")) as f:
        assert f.read() == content
    reqs = fake.llm_requests()
    assert len(reqs) == 2 and all(len(r.raw) <= 16 * 1024 for r in reqs)
    args = reqs[1].tool_calls()[0][2]
    assert args["path"] == "gen.txt"
    assert args["content"].startswith(content[:400])
    assert "argument was shortened from %d to" % len(content) in args["content"]
    ev = [p for p in turn_events(c, t) if p["type"] == "context.trimmed"]
    assert ev and ev[0]["bytes_before"] > 16 * 1024 >= ev[0]["bytes_after"]
    # A 20 KB answer, then the next turn: the old answer is cut, the new
    # question is whole.
    run_turn(c, sid, "say a lot")
    t3, end3 = run_turn(c, sid, "and now?")
    assert end3["outcome"] == "completed", end3
    last = fake.llm_requests()[-1]
    assert len(last.raw) <= 16 * 1024
    texts = last.assistant_texts()
    assert any("message was shortened from 20000 to" in x for x in texts), texts
    assert last.user_texts()[-1] == "and now?"
    # The history keeps everything.
    h = c.call("session.history", {"session": sid})["result"]["messages"]
    assert any(m.get("content") == "A" * 20000 for m in h)


def test_a_message_too_large_does_not_wedge_the_session(make_daemon, fake, ws):
    profile(ws, "[env]\nautonomy = full\n[llm]\nmax_request_bytes = 16K\n")
    fake.push({"text": "fine"})
    d = start(make_daemon, fake, "openai")
    c, sid = session(d, ws)
    t, end = run_turn(c, sid, "y" * 20000)
    assert end["outcome"] == "error"
    err = [p for p in turn_events(c, t) if p["type"] == "error"][0]
    assert err["kind"] == "too_large" and "max_request_bytes" in err["message"]
    assert fake.llm_requests() == []
    # Once it is not the newest message, it is shortened like the rest.
    t2, end2 = run_turn(c, sid, "a short one")
    assert end2["outcome"] == "completed", end2
    req = fake.llm_requests()[0]
    assert len(req.raw) <= 16 * 1024
    assert req.user_texts()[-1] == "a short one"
    assert "message was shortened from 20000 to 512" in req.user_texts()[0]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_context_overflow_cuts_the_request_and_asks_again(make_daemon, fake,
                                                          ws, provider):
    """The model's context is smaller than max_request_bytes (4 MB by
    default): its refusal teaches the session the size it takes, the
    request is cut to it and sent again, and later requests are cut at
    once."""
    big_file(ws)
    fake.context_limit = 24000
    fake.push({"tool_calls": [{"name": "read_file", "args": {"path": "big.txt"}}]},
              {"text": "read it"}, {"text": "again"})
    d = start(make_daemon, fake, provider)
    c, sid = session(d, ws)
    t, end = run_turn(c, sid, "read the big file")
    assert end["outcome"] == "completed", end
    assert fake.overflows == 1
    retry = [p for p in turn_events(c, t) if p["type"] == "llm.retry"]
    assert len(retry) == 1 and retry[0]["kind"] == "context_overflow", retry
    assert 16 * 1024 <= retry[0]["max_request_bytes"] <= 24000, retry
    reqs = fake.llm_requests()
    assert len(reqs) == 3 and len(reqs[1].raw) > 24000 >= len(reqs[2].raw)
    assert "shortened from" in str(reqs[2].tool_results()[0][2])
    text = "".join(p["text"] for p in turn_events(c, t) if p["type"] == "message.delta")
    assert text.endswith("read it")
    # The next turn is cut before it is sent: no second refusal.
    t2, end2 = run_turn(c, sid, "and again")
    assert end2["outcome"] == "completed", end2
    assert fake.overflows == 1 and len(fake.llm_requests()) == 4


def test_a_413_cuts_the_request_by_a_quarter(make_daemon, fake, ws):
    """A proxy's 413 gives no token counts: the request is cut by a quarter."""
    big_file(ws)
    fake.push({"tool_calls": [{"name": "read_file", "args": {"path": "big.txt"}}]},
              {"status": 413, "body": {"error": {"message": "Request Entity Too Large"}}},
              {"text": "fine"})
    d = start(make_daemon, fake, "openai")
    c, sid = session(d, ws)
    t, end = run_turn(c, sid, "read the big file")
    assert end["outcome"] == "completed", end
    reqs = fake.llm_requests()
    assert len(reqs) == 3 and len(reqs[2].raw) <= len(reqs[1].raw) * 3 // 4
    retry = [p for p in turn_events(c, t) if p["type"] == "llm.retry"][0]
    assert retry["kind"] == "context_overflow" and retry["status"] == 413
    assert retry["max_request_bytes"] == len(reqs[1].raw) * 3 // 4


def test_context_overflow_gives_up_when_nothing_more_can_go(make_daemon, fake, ws):
    big_file(ws)
    # After the file is read, every request is refused for length, also
    # once cut (a proxy that says so of anything, say).
    refusal = {"status": 400, "body": {"error": {
        "message": "This model's maximum context length is 1000 tokens. "
        "However, your messages resulted in 9000 tokens.",
        "code": "context_length_exceeded"}}}
    fake.push({"tool_calls": [{"name": "read_file", "args": {"path": "big.txt"}}]},
              refusal, dict(refusal))
    d = start(make_daemon, fake, "openai")
    c, sid = session(d, ws)
    t, end = run_turn(c, sid, "read the big file")
    assert end["outcome"] == "error", end
    err = [p for p in turn_events(c, t) if p["type"] == "error"][0]
    assert err["kind"] == "context_overflow" and "maximum context length" in err["message"]
    # Cut once (to the 16 KiB floor), refused there too: not cut again.
    sizes = [len(r.raw) for r in fake.llm_requests()]
    assert len(sizes) == 3 and sizes[1] > 16 * 1024 >= sizes[2], sizes
    retry = [p for p in turn_events(c, t) if p["type"] == "llm.retry"]
    assert [p["max_request_bytes"] for p in retry] == [16 * 1024], retry
    # A budget that never worked is not kept: with the limit gone, the next
    # turn sends the whole conversation again.
    fake.context_limit = None
    fake.push({"text": "fine"})
    t2, end2 = run_turn(c, sid, "try again")
    assert end2["outcome"] == "completed", end2
    assert len(fake.llm_requests()[-1].raw) > 30000


def test_context_budget_leaves_out_the_oldest_exchanges(make_daemon, fake, ws):
    """Messages too short to shorten still add up: the oldest exchanges
    go whole, with a marker, and the newest question stays."""
    profile(ws, "[env]\nautonomy = full\n[llm]\nmax_request_bytes = 16K\n")
    d = start(make_daemon, fake, "anthropic")
    c, sid = session(d, ws)
    for i in range(40):
        fake.push({"text": "answer %d " % i + "b" * 500})
        t, end = run_turn(c, sid, "question %d " % i + "q" * 500)
        assert end["outcome"] == "completed", (i, end)
    last = fake.llm_requests()[-1]
    assert len(last.raw) <= 16 * 1024
    users = last.user_texts()
    assert users[0].startswith("[gbr: the ") and "oldest messages" in users[0]
    assert users[-1] == "question 39 " + "q" * 500
    assert "question 0 " not in last.raw.decode()
    ev = [p for p in turn_events(c, t) if p["type"] == "context.trimmed"]
    assert ev and ev[0]["bytes_after"] <= 16 * 1024
    # The history keeps everything.
    h = c.call("session.history", {"session": sid})["result"]["messages"]
    assert sum(1 for m in h if m["role"] == "user") == 40


def test_step_limit(make_daemon, fake, ws):
    profile(ws, "[env]\nautonomy = full\n[llm]\nmax_steps = 2\n")
    fake.default = {"tool_calls": [{"name": "list_directory", "args": {"path": "."}}]}
    d = start(make_daemon, fake, "gemini")
    c, sid = session(d, ws)
    t, end = run_turn(c, sid, "loop forever")
    assert end["outcome"] == "max_steps"
    assert len(fake.llm_requests()) == 2


def test_bad_tool_calls_are_answered_not_run(make_daemon, fake, ws):
    fake.push({"tool_calls": [{"name": "no_such_tool", "args": {}},
                              {"name": "read_file", "args": {"nope": 1}}]},
              {"text": "sorry"})
    d = start(make_daemon, fake, "anthropic")
    c, sid = session(d, ws)
    t, end = run_turn(c, sid, "go")
    assert end["outcome"] == "completed"
    got = fake.wait_requests(2)[1].tool_results()
    assert "method_not_found" in got[0][2] and "invalid_params" in got[1][2]
    assert [x[3] for x in got] == [False, False]


def test_the_key_stays_secret(make_daemon, fake, ws):
    fake.push({"tool_calls": [{"name": "run_command", "args": {"argv": ["env"]}}]},
              {"text": "seen"},
              {"status": 401, "body": {"error": {"message": "invalid key " + KEY}}})
    d = start(make_daemon, fake, "openai")
    c, sid = session(d, ws)
    t, end = run_turn(c, sid, "show env")
    got = fake.wait_requests(2)[1].tool_results()
    assert "PATH=" in got[0][2] and KEY not in got[0][2], "the child saw the key"
    t2, end2 = run_turn(c, sid, "again")
    assert end2["outcome"] == "error"
    err = [p for p in turn_events(c, t2) if p["type"] == "error"][0]
    assert err["kind"] == "auth" and KEY not in err["message"] and "REDACTED" in err["message"]
    for r in fake.llm_requests():
        assert KEY.encode() not in r.raw and KEY not in r.path
        assert r.headers["authorization"] == "Bearer " + KEY
    assert KEY not in json.dumps(c.call("session.history", {"session": sid}))
    assert KEY not in json.dumps(d.ctl_json("status"))
    d.stop()
    for top, dirs, files in os.walk(d.state):
        for n in files:
            with open(os.path.join(top, n), "rb") as f:
                assert KEY.encode() not in f.read(), os.path.join(top, n)
    assert KEY not in d.log()


def test_a_profile_cannot_redirect_the_key(make_daemon, fake, ws, tmpdir_short):
    evil = FakeLLM()
    try:
        profile(ws, "[llm]\nprovider = openai\nbase_url = %s\n" % evil.base_url("openai"))
        d = start(make_daemon, fake, "openai")
        c, sid = session(d, ws)
        t, end = run_turn(c, sid, "hi")
        assert end["outcome"] == "completed"
        assert not fake.llm_requests()
        r = evil.llm_requests()[0]
        assert "authorization" not in r.headers and KEY.encode() not in r.raw
    finally:
        evil.close()


def test_no_provider_says_what_to_set(make_daemon, fake, ws):
    profile(ws, "[llm]\nprovider = gemini\n")
    d = make_daemon(config="[llm]\nollama_url = off\n")
    c, sid = session(d, ws)
    t, end = run_turn(c, sid, "hi")
    assert end["outcome"] == "no_provider"
    err = [p for p in turn_events(c, t) if p["type"] == "error"][0]
    assert err["kind"] == "no_provider" and "GEMINI_API_KEY" in err["message"]
    # Tools still work.
    r = c.call("tool.call", {"session": sid, "tool": "read_file", "args": {"path": "hello.txt"}})
    assert "result" in r


def test_local_ollama_is_found(make_daemon, fake, ws):
    fake.ollama_models = ["qwen2.5-coder:7b"]
    fake.push({"text": "local model here"})
    profile(ws, "[env]\nautonomy = full\n")
    d = make_daemon(config="[llm]\nollama_url = %s\n" % fake.url)
    c, sid = session(d, ws)
    t, end = run_turn(c, sid, "hi")
    assert end["outcome"] == "completed", end
    r = fake.llm_requests()[0]
    assert r.provider == "openai" and r.path == "/v1/chat/completions"
    assert r.json["model"] == "qwen2.5-coder:7b" and "authorization" not in r.headers


def test_key_file_must_be_private(make_daemon, fake, tmpdir_short):
    kf = os.path.join(tmpdir_short, "key")
    with open(kf, "w") as f:
        f.write(KEY + "\n")
    os.chmod(kf, 0o644)
    d = make_daemon(config="[llm]\nprovider = anthropic\nkey_file = %s\n" % kf,
                    start=False)
    d.start(wait=False)
    d.expect_exit(1)
    assert "chmod 600" in d.log()
    os.chmod(kf, 0o600)
    d.start()
    st = d.ctl_json("status")
    assert KEY not in json.dumps(st)


def test_gbrctl_send_prints_the_answer_once(make_daemon, fake, ws):
    fake.push({"text": "Streamed once.", "chunks": 4,
               "tool_calls": [{"name": "list_directory", "args": {"path": "."}}]},
              {"text": " Done.", "chunks": 2})
    d = start(make_daemon, fake, "openai")
    c, sid = session(d, ws, "ctl")
    r = d.ctl("send", "ctl", "go")
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert r.stdout.count("Streamed once.") == 1 and "list_directory" in r.stdout
    fake.push({"status": 401})
    r = d.ctl("--json", "send", "ctl", "again")
    assert r.returncode == 1
    out = json.loads(r.stdout)
    assert out["outcome"] == "error" and out["errors"][0]["kind"] == "auth"


@pytest.mark.parametrize("provider", ("openai", "anthropic"))
def test_deeply_nested_tool_arguments_are_refused(make_daemon, fake, ws, provider):
    """A model may send arguments nested as deep as jansson parses (2048
    levels). Kept as they are, the records and events holding them would be
    deeper than that, so gbrd and its clients could not read them back (the
    replay would refuse the log). They are answered as unusable arguments
    instead, and everything stays readable across a SIGKILL."""
    n = 2046        # with the object around, 2047 levels: jansson takes it
    fake.push({"tool_calls": [{"name": "run_command",
                               "args_json": '{"argv":' + "[" * n + "]" * n + "}"}]},
              {"text": "ok"})
    d = start(make_daemon, fake, provider)
    c, sid = session(d, ws)
    t, end = run_turn(c, sid, "go")
    assert end["outcome"] == "completed", end
    got = fake.wait_requests(2)[1].tool_results()
    assert "invalid_params" in got[0][2] and "nested" in got[0][2], got
    r = d.ctl("--json", "history", sid)
    assert r.returncode == 0, r.stderr
    d.kill9()
    d.start()
    assert len(history(d.conn(), sid)) >= 3
    d.check_clean()


@pytest.mark.parametrize("provider,why", (("anthropic", "refusal"),
                                          ("openai", "content_filter"),
                                          ("gemini", "SAFETY")))
def test_a_refusal_ends_the_turn_saying_so(make_daemon, fake, ws, provider, why):
    """A model that declines used to end a turn that looked completed,
    with nothing in it and no word to the person."""
    fake.push({"text": "", "stop_reason": why})
    d = start(make_daemon, fake, provider)
    c, sid = session(d, ws, name="r")
    t, end = run_turn(c, sid, "do something it will not")
    assert end["outcome"] == "refused", end
    err = [p for p in turn_events(c, t) if p["type"] == "error"]
    assert err and err[0]["kind"] == "refused" and why in err[0]["message"], err
    # gbrctl send says so too, and fails.
    fake.push({"text": "", "stop_reason": why})
    r = d.ctl("send", "r", "again")
    assert r.returncode == 1
    assert "refused" in r.stderr and why in r.stderr, r.stderr
    # After a restart the turn stays ended as it was.
    d.kill9()
    d.start()
    st = d.conn().call("session.list")["result"]["sessions"][0]
    assert st["state"] == "idle", st


@pytest.mark.parametrize("provider", ("openai", "anthropic"))
def test_oversized_tool_arguments_are_a_tool_error(make_daemon, fake, ws, provider):
    """Arguments past 4 MiB (streamed in fragments) used to end the whole
    turn with llm_error. The model is told instead, and the turn goes on."""
    big = '{"path":"big.txt","content":"' + "x" * (5 * 1024 * 1024) + '"}'
    fake.push({"tool_calls": [{"name": "write_file", "args_json": big,
                               "fragment": 64 * 1024}]},
              {"text": "I will send it in parts."})
    d = start(make_daemon, fake, provider)
    c, sid = session(d, ws)
    t, end = run_turn(c, sid, "write a big file")
    assert end["outcome"] == "completed", end
    got = fake.wait_requests(2)[1].tool_results()
    assert "invalid_params" in got[0][2] and "larger than 4194304" in got[0][2], got
    assert not os.path.exists(os.path.join(ws, "big.txt"))
    h = history(c, sid)
    assert h[-1]["role"] == "assistant" and "in parts" in h[-1]["content"]
    # The stored records stay small: nothing of the 5 MiB was kept.
    assert len(json.dumps(h)) < 64 * 1024


@pytest.mark.parametrize("provider", PROVIDERS)
def test_nul_bytes_from_the_model_cut_nothing_short(make_daemon, fake, ws, provider):
    """A model may write \\u0000 (quoting a command's output). It used to
    fail the turn ("a chunk of the stream is not JSON"); taken as it is, a
    NUL would cut C strings short: text, tool names, ids, a path in
    Gemini's arguments ("hello.txt\\0/../x" read as "hello.txt"). Each NUL
    from a provider becomes U+FFFD."""
    fake.push({"text": "before\0after", "tool_calls": [
        {"name": "read_file", "args": {"path": "hello.txt\0/../x"}}]},
        {"text": "done"})
    d = start(make_daemon, fake, provider)
    c, sid = session(d, ws)
    t, end = run_turn(c, sid, "go")
    assert end["outcome"] == "completed", end
    msgs = history(c, sid)
    said = [m for m in msgs if m.get("role") == "assistant"][0]
    assert said["content"] == "before\ufffdafter", said
    got = fake.wait_requests(2)[1].tool_results()
    assert len(got) == 1 and "hello from the workspace" not in json.dumps(got), got

    def strings(v):
        if isinstance(v, str):
            yield v
        elif isinstance(v, dict):
            for k, x in v.items():
                yield k
                yield from strings(x)
        elif isinstance(v, list):
            for x in v:
                yield from strings(x)
    assert not any("\0" in x for x in strings(params(c)))


def test_gbrctl_send_shows_approvals_and_tool_results(make_daemon, fake, ws):
    """gbrctl send said nothing of a pending approval (no id, no diff) or
    of a tool's result: those events name no turn, and were skipped."""
    fake.push({"tool_calls": [{"name": "write_file", "args": {
        "path": "secret.cfg", "content": "x = 1\n"}}]},
        {"tool_calls": [{"name": "read_file", "args": {"path": "hello.txt"}}]},
        {"text": "The config is written."})
    d = start(make_daemon, fake, "openai")
    c, sid = session(d, ws, name="ctl")
    p = subprocess.Popen([GBRCTL, "send", "ctl", "write the config"], env=d.env,
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 20
    pending = []
    while not pending and time.time() < deadline:
        pending = [a for a in c.call("approval.list", {})["result"]["approvals"]
                   if a["state"] == "pending"]
        time.sleep(0.05)
    assert pending, "no approval was asked"
    aid = pending[0]["id"]
    r = c.call("approval.resolve", {"id": aid, "decision": "approve"})
    assert "result" in r, r
    out, err = p.communicate(timeout=30)
    assert p.returncode == 0, (out, err)
    assert aid in out and "+x = 1" in out, out
    assert "gbrctl approve %s" % aid in out, out
    assert "hello.txt" in out and "The config is written." in out, out


def test_a_human_edit_tells_the_model_what_changed(make_daemon, fake, ws):
    """The model was told only "edited": true; it now gets the diff from
    its proposal to what the human wrote."""
    fake.push({"tool_calls": [{"name": "write_file", "args": {
        "path": "secret.cfg", "content": "mode = fast\nlevel = 1\n"}}]},
        {"text": "noted"})
    d = start(make_daemon, fake, "anthropic")
    c, sid = session(d, ws)
    t = send(c, sid, "write the config")
    req = wait_for(c, lambda p: p["type"] == "approval.requested")[0]
    r = c.call("approval.resolve", {"id": req["approval"]["id"],
                                    "decision": "edit",
                                    "content": "mode = safe\nlevel = 1\n"})
    assert "result" in r, r
    end = wait_for(c, turn_end(t))[0]
    assert end["outcome"] == "completed", end
    with open(os.path.join(ws, "secret.cfg")) as f:
        assert f.read() == "mode = safe\nlevel = 1\n"
    got = fake.wait_requests(2)[1].tool_results()
    text = got[0][2]
    assert '"edited": true' in text or '"edited":true' in text, text
    assert "-mode = fast" in text and "+mode = safe" in text, text


def test_gbrctl_send_events_streams_one_json_line_per_event(make_daemon, fake, ws):
    """For programs (as claude -p --output-format stream-json): each event
    of the turn on its own line as it comes, then the summary."""
    fake.push({"text": "Reading it.", "chunks": 3,
               "tool_calls": [{"name": "read_file", "args": {"path": "hello.txt"}}]},
              {"text": "It says hello."})
    d = start(make_daemon, fake, "gemini")
    session(d, ws, name="ev")
    r = d.ctl("send", "--events", "ev", "read hello.txt")
    assert r.returncode == 0, r.stderr
    lines = [json.loads(l) for l in r.stdout.splitlines()]
    types = [l.get("type") for l in lines[:-1]]
    assert types.count("message.delta") >= 3, types
    assert "tool.result" in types and types[-1] == "session.state", types
    assert all(l["session"] == lines[0]["session"] for l in lines[:-1])
    last = lines[-1]
    assert last["outcome"] == "completed" and "type" not in last, last
