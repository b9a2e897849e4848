"""Human approvals against a real gbrd: a call that needs a
human waits without blocking anyone, is decided from any client (approve,
deny, edit; the first decision wins), survives kill -9 pending or half
applied (interrupted, never re-run by itself), expires, is withdrawn when
its caller leaves, and obeys the autonomy levels, ask_commands, ask_tools
and session grants. gbrctl's approvals/approve/deny/edit/grants/revoke,
and the escaping of what a human is shown."""
import json
import os
import re
import stat
import time

import pytest

from test_tools import evparams, wait_for


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def read(path):
    with open(path) as f:
        return f.read()


def write_kind(c, sid, path, content="x"):
    """What a write_file of path does now: "ok", an error kind, or, when it
    waits for a human, the approval's "why" (protected_path, env_dir). An
    approval is denied at once on the same connection, so nothing is
    written and the call ends."""
    rid = c.request("tool.call", {"session": sid, "tool": "write_file",
                                  "args": {"path": path, "content": content}})
    why = rrid = answer = None
    resolved = False
    while answer is None or (rrid is not None and not resolved):
        m = c.recv()
        if m.get("method") == "tool.progress" and m["params"]["id"] == rid:
            rrid = c.request("approval.resolve", {
                "id": m["params"]["approval_id"], "decision": "deny",
                "reason": "a test only looks"})
        elif m.get("method") == "event" and \
                m["params"]["type"] == "approval.requested" and \
                m["params"]["approval"]["call_id"]:
            why = m["params"]["approval"]["why"]
            c.events.append(m)
        elif "method" in m:
            c.events.append(m)
        elif m.get("id") == rrid:
            assert "result" in m, m
            resolved = True
        elif m.get("id") == rid:
            answer = m
    if "result" in answer:
        return "ok"
    kind = answer["error"]["data"]["kind"]
    if kind == "denied":
        assert why is not None
        return why
    return kind


PROFILE = "[env]\nprotected_files = gleam.toml\n"


@pytest.fixture
def ws(tmpdir_short):
    d = os.path.join(tmpdir_short, "proj")
    write(os.path.join(d, ".gbr_envs", "default.ini"), PROFILE)
    write(os.path.join(d, "gleam.toml"), 'name = "app"\nversion = "1.0.0"\n')
    return d


def new_session(d, ws, env=None):
    c = d.conn()
    p = {"workspace": ws}
    if env is not None:
        p["env"] = env
    r = c.call("session.create", p)
    assert "result" in r, r
    return c, r["result"]["id"]


def watcher(d, sid, after=None):
    w = d.conn()
    p = {"session": sid}
    if after is not None:
        p["after_seq"] = after
    assert "result" in w.call("session.attach", p)
    return w


def ask(c, sid, tool, args, request_id=None):
    """Sends a tool.call that must wait for a human; returns its request
    id and the approval (from the tool.progress notification and the
    approval.requested event that reach the caller before any reply)."""
    p = {"session": sid, "tool": tool, "args": args}
    if request_id is not None:
        p["request_id"] = request_id
    rid = c.request("tool.call", p)
    progress = event = None
    while progress is None or event is None:
        m = c.recv()
        assert m.get("id") != rid, "answered without a human: %r" % m
        if m.get("method") == "tool.progress":
            progress = m["params"]
        elif m.get("method") == "event" and \
                m["params"]["type"] == "approval.requested":
            event = m["params"]
        else:
            c.events.append(m)
    assert progress["id"] == rid and progress["state"] == "awaiting_approval"
    a = event["approval"]
    assert a["id"] == progress["approval_id"] and \
        a["call_id"] == progress["call_id"]
    assert isinstance(event["seq"], int) and event["session"] == sid
    return rid, a


def answer(c, rid):
    while True:
        m = c.recv()
        if m.get("id") == rid and "method" not in m:
            return m
        c.events.append(m)


def approvals(d, **params):
    r = d.conn().call("approval.list", params)
    assert "result" in r, r
    return r["result"]["approvals"]


def resolve(d, aid, decision, **kw):
    p = dict(id=aid, decision=decision, **kw)
    return d.conn().call("approval.resolve", p)


def state_of(d, sid):
    return [s for s in d.conn().call("session.list")["result"]["sessions"]
            if s["id"] == sid][0]["state"]


def tool_results(d, sid, call_id):
    h = d.conn().call("session.history", {"session": sid, "limit": 1000})
    return [m for m in h["result"]["messages"]
            if m["role"] == "tool" and m["call_id"] == call_id]


def wait_until(pred, timeout=15.0):
    deadline = time.time() + timeout
    while not pred():
        assert time.time() < deadline, "condition not met in time"
        time.sleep(0.05)


GLEAM_NEW = 'name = "app"\nversion = "2.0.0"\n'


def test_protected_write_waits_and_file_unchanged(daemon, ws):
    c, sid = new_session(daemon, ws)
    w = watcher(daemon, sid)
    rid, a = ask(c, sid, "write_file", {"path": "gleam.toml",
                                        "content": GLEAM_NEW})
    assert a["state"] == "pending" and a["why"] == "protected_path"
    assert a["path"] == "gleam.toml" and a["tool"] == "write_file"
    assert a["command"] is None and a["decision"] is None
    assert a["args"] == {"path": "gleam.toml", "content": GLEAM_NEW}
    assert a["diff"] == ('--- a/gleam.toml\n+++ b/gleam.toml\n@@ -1,2 +1,2 @@\n'
                         ' name = "app"\n-version = "1.0.0"\n+version = "2.0.0"\n')
    assert isinstance(a["expires_ms"], int) and a["expires_ms"] > a["created_ms"]
    # The daemon serves everything else meanwhile, this connection too:
    # the reply to a later call comes while tool.call still waits.
    r = c.call("approval.list", {"session": sid})
    assert [x["id"] for x in r["result"]["approvals"]] == [a["id"]]
    assert r["result"]["approvals"][0]["content"] == GLEAM_NEW
    assert not any(m.get("id") == rid for m in c.events)
    assert read(os.path.join(ws, "gleam.toml")) == 'name = "app"\nversion = "1.0.0"\n'
    assert state_of(daemon, sid) == "awaiting_approval"
    st = daemon.conn().call("daemon.status")["result"]
    assert st["approvals"]["pending"] == 1
    # Attached clients saw it in the session's stream.
    ev = wait_for(w, lambda p: p["type"] == "approval.requested")[-1]
    assert ev["approval"]["id"] == a["id"]
    # Another session is not held up either.
    c2, sid2 = new_session(daemon, ws)
    r = c2.call("tool.call", {"session": sid2, "tool": "read_file",
                              "args": {"path": "gleam.toml"}})
    assert "result" in r
    resolve(daemon, a["id"], "deny")
    assert answer(c, rid)["error"]["data"]["kind"] == "denied"


def test_approve_from_second_client_applies_once(daemon, ws):
    c, sid = new_session(daemon, ws)
    w = watcher(daemon, sid)
    rid, a = ask(c, sid, "write_file", {"path": "gleam.toml",
                                        "content": GLEAM_NEW})
    r = resolve(daemon, a["id"], "approve", reason="looks right")
    assert "result" in r, r
    got = r["result"]["approval"]
    assert got["id"] == a["id"] and got["decision"] == "approve" and \
        got["state"] == "approved" and got["reason"] == "looks right"
    reply = answer(c, rid)
    assert reply["result"]["result"]["path"] == "gleam.toml"
    assert reply["result"]["call_id"] == a["call_id"]
    assert read(os.path.join(ws, "gleam.toml")) == GLEAM_NEW
    res = tool_results(daemon, sid, a["call_id"])
    assert len(res) == 1 and res[0]["ok"] is True and \
        res[0]["approval_id"] == a["id"]
    done = approvals(daemon, all=True)
    assert done[0]["state"] == "applied" and done[0]["result"]["bytes"] == \
        len(GLEAM_NEW)
    assert approvals(daemon) == []
    states = [p["approval"]["state"] for p in wait_for(
        w, lambda p: p["type"] == "approval.resolved" and
        p["approval"]["state"] == "applied")]
    evs = [p["approval"]["state"] for p in evparams(w)
           if p["type"] == "approval.resolved"]
    assert evs == ["approved", "applied"], evs
    wait_until(lambda: state_of(daemon, sid) == "idle")
    # A second decision on a finished one.
    r = resolve(daemon, a["id"], "deny")
    assert r["error"]["data"]["kind"] == "already_resolved"
    assert r["error"]["data"]["state"] == "applied" and \
        r["error"]["data"]["decision"] == "approve"


def test_deny_returns_denied(daemon, ws):
    c, sid = new_session(daemon, ws)
    rid, a = ask(c, sid, "write_file", {"path": "gleam.toml",
                                        "content": "broken"})
    r = resolve(daemon, a["id"], "deny", reason="wrong version")
    assert r["result"]["approval"]["state"] == "denied"
    reply = answer(c, rid)
    err = reply["error"]
    assert err["data"]["kind"] == "denied"
    assert err["data"]["approval_id"] == a["id"] and \
        err["data"]["reason"] == "wrong version"
    assert err["data"]["call_id"] == a["call_id"]
    assert read(os.path.join(ws, "gleam.toml")) == 'name = "app"\nversion = "1.0.0"\n'
    res = tool_results(daemon, sid, a["call_id"])
    assert len(res) == 1 and res[0]["error"]["kind"] == "denied"


def test_edit_writes_the_humans_content(daemon, ws):
    c, sid = new_session(daemon, ws)
    rid, a = ask(c, sid, "edit_file", {"path": "gleam.toml",
                                       "old_string": "1.0.0",
                                       "new_string": "9.9.9"})
    assert "+version = \"9.9.9\"" in a["diff"]
    lst = approvals(daemon, id=a["id"])
    assert lst[0]["content"] == 'name = "app"\nversion = "9.9.9"\n'
    mine = 'name = "app"\nversion = "1.1.0"\n# checked by a human\n'
    r = resolve(daemon, a["id"], "edit", content=mine)
    assert r["result"]["approval"]["state"] == "edited"
    reply = answer(c, rid)
    assert reply["result"]["result"]["edited"] is True
    assert read(os.path.join(ws, "gleam.toml")) == mine
    assert approvals(daemon, all=True)[0]["state"] == "applied"


def test_resolve_errors(daemon, ws):
    c, sid = new_session(daemon, ws)
    r = resolve(daemon, "a0000000000000000", "approve")
    assert r["error"]["data"]["kind"] == "approval_not_found"
    rid, a = ask(c, sid, "write_file", {"path": "gleam.toml", "content": "x"})
    for bad in ({"decision": "maybe"}, {"decision": "edit"},
                {"decision": "approve", "content": "x"},
                {"decision": "approve", "scope": "forever"},
                {"decision": "approve", "reason": "r" * 5000}):
        r = daemon.conn().call("approval.resolve", dict(id=a["id"], **bad))
        assert r["error"]["data"]["kind"] == "invalid_params", (bad, r)
    assert approvals(daemon)[0]["state"] == "pending"
    # A resent decision (same request_id) answers the same, once.
    r1 = resolve(daemon, a["id"], "deny", request_id="dec-1")
    r2 = resolve(daemon, a["id"], "deny", request_id="dec-1")
    assert r1["result"]["duplicate"] is False and r2["result"]["duplicate"] is True
    assert r2["result"]["approval"]["state"] == "denied"
    assert answer(c, rid)["error"]["data"]["kind"] == "denied"


def test_two_clients_approve_at_once(daemon, ws):
    c, sid = new_session(daemon, ws)
    rid, a = ask(c, sid, "write_file", {"path": "gleam.toml",
                                        "content": GLEAM_NEW})
    x, y = daemon.conn(), daemon.conn()
    rx = x.request("approval.resolve", {"id": a["id"], "decision": "approve"})
    ry = y.request("approval.resolve", {"id": a["id"], "decision": "approve"})
    out = [answer(x, rx), answer(y, ry)]
    ok = [m for m in out if "result" in m]
    lost = [m for m in out if "error" in m]
    assert len(ok) == 1 and len(lost) == 1, out
    assert lost[0]["error"]["data"]["kind"] == "already_resolved"
    assert lost[0]["error"]["data"]["decision"] == "approve"
    assert "result" in answer(c, rid)
    assert len(tool_results(daemon, sid, a["call_id"])) == 1
    assert read(os.path.join(ws, "gleam.toml")) == GLEAM_NEW


def test_kill9_pending_survives_and_applies(make_daemon, ws):
    d = make_daemon()
    c, sid = new_session(d, ws)
    rid, a = ask(c, sid, "write_file", {"path": "gleam.toml",
                                        "content": GLEAM_NEW},
                 request_id="write-gleam-1")
    d.kill9()
    d.start()
    lst = approvals(d)
    assert [x["id"] for x in lst] == [a["id"]] and lst[0]["state"] == "pending"
    assert lst[0]["diff"] == a["diff"]
    assert state_of(d, sid) == "awaiting_approval"
    assert read(os.path.join(ws, "gleam.toml")) == 'name = "app"\nversion = "1.0.0"\n'
    # The asker is gone; its resend (same request_id) finds the same call.
    c = d.conn()
    rid2 = c.request("tool.call", {"session": sid, "tool": "write_file",
                                   "args": {"path": "gleam.toml",
                                            "content": GLEAM_NEW},
                                   "request_id": "write-gleam-1"})
    r = resolve(d, a["id"], "approve")
    assert "result" in r, r
    reply = answer(c, rid2)
    assert reply["result"]["call_id"] == a["call_id"], reply
    assert read(os.path.join(ws, "gleam.toml")) == GLEAM_NEW
    res = tool_results(d, sid, a["call_id"])
    assert len(res) == 1 and res[0]["ok"] is True
    wait_until(lambda: state_of(d, sid) == "idle")
    # Once more after a restart: applied, and nothing runs again.
    d.stop()
    d.start()
    assert approvals(d) == []
    assert approvals(d, all=True)[0]["state"] == "applied"
    assert len(tool_results(d, sid, a["call_id"])) == 1


def test_kill9_pending_without_asker_applies_to_history(make_daemon, ws):
    d = make_daemon()
    c, sid = new_session(d, ws)
    rid, a = ask(c, sid, "write_file", {"path": "gleam.toml",
                                        "content": GLEAM_NEW})
    d.kill9()
    d.start()
    w = watcher(d, sid)
    assert "result" in resolve(d, a["id"], "approve")
    wait_for(w, lambda p: p["type"] == "tool.result" and
             p["call_id"] == a["call_id"])
    assert read(os.path.join(ws, "gleam.toml")) == GLEAM_NEW
    assert len(tool_results(d, sid, a["call_id"])) == 1


def test_crash_between_applying_and_applied(make_daemon, ws):
    d = make_daemon(env={"GBR_TEST_CRASH_AFTER_APPLYING": "1"})
    c, sid = new_session(d, ws)
    rid, a = ask(c, sid, "write_file", {"path": "gleam.toml",
                                        "content": GLEAM_NEW})
    c2 = d.conn()
    r2 = c2.request("approval.resolve", {"id": a["id"], "decision": "approve"})
    # The decision is durable before the reply; the hook kills gbrd once
    # "applying" is on disk, before the write.
    d.expect_exit(137)
    assert read(os.path.join(ws, "gleam.toml")) == 'name = "app"\nversion = "1.0.0"\n'
    del d.env["GBR_TEST_CRASH_AFTER_APPLYING"]
    d.start()
    lst = approvals(d)
    assert len(lst) == 1 and lst[0]["id"] == a["id"]
    assert lst[0]["state"] == "interrupted" and lst[0]["decision"] is None
    assert "may already" in lst[0]["note"]
    assert state_of(d, sid) == "awaiting_approval"
    # The interruption is in the session's stream.
    w = watcher(d, sid, after=0)
    ev = wait_for(w, lambda p: p["type"] == "approval.resolved" and
                  p["approval"]["state"] == "interrupted")
    assert ev[-1]["approval"]["id"] == a["id"]
    # Nothing ran by itself.
    assert tool_results(d, sid, a["call_id"]) == []
    # Approved again: it runs once.
    r = resolve(d, a["id"], "approve")
    assert r["result"]["approval"]["state"] == "approved"
    wait_for(w, lambda p: p["type"] == "tool.result" and
             p["call_id"] == a["call_id"])
    assert read(os.path.join(ws, "gleam.toml")) == GLEAM_NEW
    assert len(tool_results(d, sid, a["call_id"])) == 1
    assert approvals(d, all=True)[0]["state"] == "applied"
    wait_until(lambda: state_of(d, sid) == "idle")


def stream(d, sid):
    """Every event of a session's stream so far, from an attach after 0."""
    w = watcher(d, sid, after=0)
    wait_for(w, lambda p: p["type"] == "replay_complete")
    return [p for p in evparams(w) if p["type"] != "replay_complete"]


def test_crash_between_approval_and_its_event(make_daemon, ws):
    # The approval.requested record is durable; gbrd dies before the
    # session event that shows it. After a restart the approval is there
    # and the stream shows it exactly once, late, and it can be decided.
    d = make_daemon(env={"GBR_TEST_CRASH_BEFORE_ANNOUNCE": "1"})
    c, sid = new_session(d, ws)
    c.request("tool.call", {"session": sid, "tool": "write_file",
                            "args": {"path": "gleam.toml",
                                     "content": GLEAM_NEW}})
    d.expect_exit(137)
    del d.env["GBR_TEST_CRASH_BEFORE_ANNOUNCE"]
    d.start()
    lst = approvals(d)
    assert len(lst) == 1 and lst[0]["state"] == "pending"
    aid = lst[0]["id"]
    asked = [p for p in stream(d, sid) if p["type"] == "approval.requested"]
    assert [p["approval"]["id"] for p in asked] == [aid], asked
    assert asked[0]["approval"]["state"] == "pending"
    assert "missing from session" in d.log()
    assert state_of(d, sid) == "awaiting_approval"
    # Another restart adds nothing: the late event is in the log now.
    d.stop()
    d.start()
    ev = stream(d, sid)
    assert [p["approval"]["id"] for p in ev
            if p["type"] == "approval.requested"] == [aid]
    seqs = [p["seq"] for p in ev]
    assert seqs == sorted(set(seqs)), seqs
    # Decided from another client, it applies once.
    r = resolve(d, aid, "approve")
    assert r["result"]["approval"]["state"] == "approved"
    wait_until(lambda: len(tool_results(d, sid, lst[0]["call_id"])) == 1)
    assert read(os.path.join(ws, "gleam.toml")) == GLEAM_NEW
    resolved = [p for p in stream(d, sid) if p["type"] == "approval.resolved"]
    assert resolved and resolved[-1]["approval"]["state"] == "applied"


def test_approvals_survive_a_snapshot(make_daemon, ws):
    # The log's budget forces a snapshot while one approval is pending and
    # one was denied: after a restart both are back as they were, nothing
    # is announced twice (the session's seq does not move), and the
    # pending one can still be approved.
    d = make_daemon(config="[log]\nmax_bytes = 1M\nsegment_bytes = 64K\n")
    c, sid = new_session(d, ws)
    rid, a = ask(c, sid, "write_file", {"path": "gleam.toml",
                                        "content": GLEAM_NEW})
    c2, sid2 = new_session(d, ws)
    rid2, b = ask(c2, sid2, "write_file", {"path": "gleam.toml",
                                           "content": "no\n"})
    assert resolve(d, b["id"], "deny")["result"]["approval"]["state"] == "denied"
    assert answer(c2, rid2)["error"]["data"]["kind"] == "denied"
    f = d.conn()
    sid3 = f.call("session.create", {"workspace": ws})["result"]["id"]
    text = "z" * 4000
    for i in range(400):
        # The reply to session.send comes once the message is durable; the
        # turn (here a no_provider one) may still be running then.
        wait_until(lambda: state_of(d, sid3) == "idle")
        assert "result" in f.call("session.send", {"session": sid3,
                                                   "text": "%d %s" % (i, text)})
        snap = f.call("daemon.status")["result"]["disklog"].get("snapshot")
        if snap and i > 10:
            break
    assert snap, "no snapshot was written"
    wait_until(lambda: state_of(d, sid3) == "idle")
    before = approvals(d, all=True)
    seqs = {s["id"]: s["seq"] for s in
            d.conn().call("session.list")["result"]["sessions"]}
    d.stop()
    d.start()
    assert approvals(d, all=True) == before
    after = {s["id"]: s["seq"] for s in
             d.conn().call("session.list")["result"]["sessions"]}
    assert after == seqs
    assert "missing from session" not in d.log()
    assert state_of(d, sid) == "awaiting_approval"
    assert resolve(d, a["id"], "approve")["result"]["approval"]["state"] == "approved"
    wait_until(lambda: read(os.path.join(ws, "gleam.toml")) == GLEAM_NEW)


def test_crash_interrupted_can_be_denied(make_daemon, ws):
    d = make_daemon(env={"GBR_TEST_CRASH_AFTER_APPLYING": "1"})
    c, sid = new_session(d, ws)
    rid, a = ask(c, sid, "write_file", {"path": "gleam.toml",
                                        "content": GLEAM_NEW})
    d.conn().request("approval.resolve", {"id": a["id"], "decision": "approve"})
    d.expect_exit(137)
    del d.env["GBR_TEST_CRASH_AFTER_APPLYING"]
    d.start()
    r = resolve(d, a["id"], "deny", reason="changed my mind")
    assert r["result"]["approval"]["state"] == "denied"
    wait_until(lambda: len(tool_results(d, sid, a["call_id"])) == 1)
    assert tool_results(d, sid, a["call_id"])[0]["error"]["kind"] == "denied"
    assert read(os.path.join(ws, "gleam.toml")) == 'name = "app"\nversion = "1.0.0"\n'


def test_gbr_envs_always_asks_even_in_full_autonomy(daemon, ws):
    write(os.path.join(ws, ".gbr_envs", "full.ini"),
          "[env]\nautonomy = full\nprotected_files = \n")
    c, sid = new_session(daemon, ws, env="full")
    rid, a = ask(c, sid, "write_file", {"path": ".gbr_envs/default.ini",
                                        "content": "[env]\nautonomy = full\n"})
    assert a["why"] == "env_dir" and a["path"] == ".gbr_envs/default.ini"
    # A session grant is never made for .gbr_envs: it asks every time.
    r = resolve(daemon, a["id"], "approve", scope="session")
    assert r["result"]["approval"]["scope"] == "once"
    assert "result" in answer(c, rid)
    assert read(os.path.join(ws, ".gbr_envs", "default.ini")) == \
        "[env]\nautonomy = full\n"
    assert daemon.conn().call("approval.grants")["result"]["grants"] == []
    rid, a2 = ask(c, sid, "write_file", {"path": ".gbr_envs/default.ini",
                                         "content": PROFILE})
    assert a2["why"] == "env_dir"
    resolve(daemon, a2["id"], "deny")
    assert answer(c, rid)["error"]["data"]["kind"] == "denied"
    # Nor through another spelling of the same folder.
    assert write_kind(c, sid, "sub/../.gbr_envs/evil.ini") == "env_dir"
    assert not os.path.exists(os.path.join(ws, ".gbr_envs", "evil.ini"))
    # In full autonomy, ordinary files do not ask.
    assert write_kind(c, sid, "src/main.gleam") == "ok"


def test_ask_commands_ask(daemon, ws):
    write(os.path.join(ws, ".gbr_envs", "cmd.ini"),
          "[env]\nask_commands = echo asked *, echo asking\n"
          "deny_commands = echo never *\n")
    c, sid = new_session(daemon, ws, env="cmd")
    rid, a = ask(c, sid, "run_command", {"argv": ["echo", "asked", "it's"]})
    assert a["why"] == "ask_command" and a["path"] is None
    assert a["command"] == "echo asked 'it'\\''s'"
    assert "result" in resolve(daemon, a["id"], "approve")
    r = answer(c, rid)
    assert r["result"]["result"]["stdout"] == "asked it's\n", r
    # Deny comes first: a denied command is refused without asking.
    r = c.call("tool.call", {"session": sid, "tool": "run_command",
                             "args": {"argv": ["echo", "never", "ask"]}})
    assert r["error"]["data"]["kind"] == "denied_command"
    # Others run at once.
    r = c.call("tool.call", {"session": sid, "tool": "run_command",
                             "args": {"argv": ["echo", "fine"]}})
    assert r["result"]["result"]["stdout"] == "fine\n"
    # A shell script is looked into too.
    rid, a = ask(c, sid, "run_script", {"language": "sh",
                                        "code": "echo asking"})
    assert a["why"] == "ask_command" and "echo asking" in a["command"]
    resolve(daemon, a["id"], "deny")
    assert answer(c, rid)["error"]["data"]["kind"] == "denied"


def test_read_only_autonomy_refuses(daemon, ws):
    write(os.path.join(ws, ".gbr_envs", "ro.ini"), "[env]\nautonomy = read-only\n")
    c, sid = new_session(daemon, ws, env="ro")
    for tool, args in (("write_file", {"path": "a.txt", "content": "x"}),
                       ("edit_file", {"path": "gleam.toml", "old_string": "1",
                                      "new_string": "2"}),
                       ("write_file", {"path": ".gbr_envs/x.ini", "content": ""}),
                       ("run_command", {"argv": ["true"]}),
                       ("run_script", {"language": "sh", "code": "true"})):
        r = c.call("tool.call", {"session": sid, "tool": tool, "args": args})
        assert r["error"]["data"]["kind"] == "read_only", (tool, r)
        assert r["error"]["data"]["autonomy"] == "read-only"
    assert not os.path.exists(os.path.join(ws, "a.txt"))
    assert approvals(daemon) == []
    r = c.call("tool.call", {"session": sid, "tool": "read_file",
                             "args": {"path": "gleam.toml"}})
    assert "result" in r


def test_ask_tools_in_supervised_only(daemon, ws):
    write(os.path.join(ws, ".gbr_envs", "sup.ini"),
          "[env]\nask_tools = write_file, list_directory\n")
    write(os.path.join(ws, ".gbr_envs", "full.ini"),
          "[env]\nautonomy = full\nask_tools = write_file\n")
    c, sid = new_session(daemon, ws, env="sup")
    rid, a = ask(c, sid, "write_file", {"path": "notes.txt", "content": "hi\n"})
    assert a["why"] == "ask_tool" and a["path"] == "notes.txt"
    assert a["diff"] == "--- a/notes.txt\n+++ b/notes.txt\n@@ -0,0 +1 @@\n+hi\n"
    resolve(daemon, a["id"], "approve")
    assert "result" in answer(c, rid)
    rid, a = ask(c, sid, "list_directory", {"path": "."})
    assert a["why"] == "ask_tool" and a["path"] is None and a["command"] is None
    resolve(daemon, a["id"], "approve")
    assert "result" in answer(c, rid)
    r = c.call("tool.call", {"session": sid, "tool": "read_file",
                             "args": {"path": "notes.txt"}})
    assert "result" in r
    c2, sid2 = new_session(daemon, ws, env="full")
    assert write_kind(c2, sid2, "notes2.txt") == "ok"


def test_session_grant_and_revoke(daemon, ws):
    c, sid = new_session(daemon, ws)
    rid, a = ask(c, sid, "write_file", {"path": "gleam.toml", "content": "v1\n"})
    r = resolve(daemon, a["id"], "approve", scope="session")
    assert r["result"]["approval"]["scope"] == "session"
    assert "result" in answer(c, rid)
    g = daemon.conn().call("approval.grants", {"session": sid})["result"]["grants"]
    assert len(g) == 1 and g[0]["tool"] == "write_file" and \
        g[0]["path"] == "gleam.toml" and g[0]["session"] == sid and \
        g[0]["command"] is None
    # The identical call goes through without asking.
    r = c.call("tool.call", {"session": sid, "tool": "write_file",
                             "args": {"path": "gleam.toml", "content": "v2\n"}})
    assert "result" in r, r
    assert read(os.path.join(ws, "gleam.toml")) == "v2\n"
    res = tool_results(daemon, sid, r["result"]["call_id"])
    assert res[0]["grant_id"] == g[0]["id"]
    assert approvals(daemon) == []
    # Not another session, not another tool on the path.
    c2, sid2 = new_session(daemon, ws)
    assert write_kind(c2, sid2, "gleam.toml") == "protected_path"
    rid, a2 = ask(c, sid, "edit_file", {"path": "gleam.toml",
                                        "old_string": "v2", "new_string": "v3"})
    resolve(daemon, a2["id"], "deny")
    answer(c, rid)
    # The grant survives a restart-free revoke check, then is revoked.
    r = daemon.conn().call("approval.revoke", {"id": g[0]["id"]})
    assert r["result"]["revoked"] is True
    assert daemon.conn().call("approval.grants")["result"]["grants"] == []
    assert write_kind(c, sid, "gleam.toml") == "protected_path"
    r = daemon.conn().call("approval.revoke", {"id": g[0]["id"]})
    assert r["error"]["data"]["kind"] == "not_found"


def test_grant_survives_restart(make_daemon, ws):
    d = make_daemon()
    c, sid = new_session(d, ws)
    rid, a = ask(c, sid, "write_file", {"path": "gleam.toml", "content": "v1\n"})
    resolve(d, a["id"], "approve", scope="session")
    answer(c, rid)
    d.kill9()
    d.start()
    c = d.conn()
    assert len(c.call("approval.grants")["result"]["grants"]) == 1
    r = c.call("tool.call", {"session": sid, "tool": "write_file",
                             "args": {"path": "gleam.toml", "content": "v2\n"}})
    assert "result" in r, r


def test_caller_leaving_withdraws(daemon, ws):
    c, sid = new_session(daemon, ws)
    w = watcher(daemon, sid)
    rid, a = ask(c, sid, "write_file", {"path": "gleam.toml", "content": "x"})
    c.close()
    ev = wait_for(w, lambda p: p["type"] == "approval.resolved" and
                  p["approval"]["state"] == "withdrawn")
    assert ev[-1]["approval"]["id"] == a["id"]
    assert approvals(daemon) == []
    r = resolve(daemon, a["id"], "approve")
    assert r["error"]["data"]["kind"] == "already_resolved"
    assert r["error"]["data"]["state"] == "withdrawn"
    res = tool_results(daemon, sid, a["call_id"])
    assert len(res) == 1 and res[0]["error"]["kind"] == "cancelled"
    assert read(os.path.join(ws, "gleam.toml")) == 'name = "app"\nversion = "1.0.0"\n'
    wait_until(lambda: state_of(daemon, sid) == "idle")


def test_expiry(make_daemon, ws):
    d = make_daemon(config="[approval]\nexpire_after = 1\n")
    c, sid = new_session(d, ws)
    rid, a = ask(c, sid, "write_file", {"path": "gleam.toml", "content": "x"})
    assert a["expires_ms"] - a["created_ms"] == 1000
    c.sock.settimeout(30)
    r = answer(c, rid)
    assert r["error"]["data"]["kind"] == "expired"
    assert r["error"]["data"]["approval_id"] == a["id"]
    done = approvals(d, all=True)[0]
    assert done["state"] == "expired"
    r = resolve(d, a["id"], "approve")
    assert r["error"]["data"]["kind"] == "already_resolved"
    assert r["error"]["data"]["state"] == "expired"
    assert read(os.path.join(ws, "gleam.toml")) == 'name = "app"\nversion = "1.0.0"\n'


def test_expiry_while_down(make_daemon, ws):
    d = make_daemon(config="[approval]\nexpire_after = 1\n")
    c, sid = new_session(d, ws)
    rid, a = ask(c, sid, "write_file", {"path": "gleam.toml", "content": "x"})
    d.kill9()
    time.sleep(1.2)     # past the deadline while nobody runs
    d.start()
    wait_until(lambda: approvals(d, all=True)[0]["state"] == "expired")
    wait_until(lambda: len(tool_results(d, sid, a["call_id"])) == 1)
    res = tool_results(d, sid, a["call_id"])
    assert res[0]["error"]["kind"] == "expired"
    wait_until(lambda: state_of(d, sid) == "idle")
    assert read(os.path.join(ws, "gleam.toml")) == 'name = "app"\nversion = "1.0.0"\n'


def test_gbrctl_approvals_approve_deny(daemon, ws):
    c, sid = new_session(daemon, ws)
    rid, a = ask(c, sid, "write_file", {"path": "gleam.toml",
                                        "content": GLEAM_NEW})
    r = daemon.ctl("approvals")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["ID", "SESSION", "STATE", "WHY", "TOOL", "TARGET"]
    assert lines[1].split() == [a["id"], sid, "pending", "protected_path",
                                "write_file", "gleam.toml"]
    j = daemon.ctl_json("approvals", "--session", sid)
    assert j[0]["id"] == a["id"] and j[0]["diff"] == a["diff"]
    r = daemon.ctl("approve", a["id"], "--reason", "ok by me")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith(a["id"] + " approved: write_file gleam.toml")
    assert "result" in answer(c, rid)
    r = daemon.ctl("approve", a["id"])
    assert r.returncode == 1 and "already_resolved" in r.stderr
    r = daemon.ctl("approvals")
    assert r.stdout.strip() == "no approvals waiting"
    r = daemon.ctl("approvals", "--all")
    assert "applied" in r.stdout

    rid, a = ask(c, sid, "write_file", {"path": "gleam.toml", "content": "no"})
    r = daemon.ctl("deny", a["id"], "--reason", "not now")
    assert r.returncode == 0 and "denied" in r.stdout
    e = answer(c, rid)["error"]["data"]
    assert e["kind"] == "denied" and e["reason"] == "not now"
    assert daemon.ctl("deny", "a1234").returncode == 1
    assert daemon.ctl("approve").returncode == 2
    assert daemon.ctl("approve", a["id"], "--scope", "forever").returncode == 2
    assert daemon.ctl("approvals", "--bogus").returncode == 2
    r = daemon.ctl("approve", "--help")
    assert r.returncode == 0 and "--scope" in r.stdout


def test_gbrctl_help_without_daemon(make_daemon):
    d = make_daemon(start=False)
    for cmd in ("approvals", "approve", "deny", "edit", "grants", "revoke"):
        r = d.ctl(cmd, "--help")
        assert r.returncode == 0 and r.stdout.startswith("usage: gbrctl " + cmd)
    assert d.ctl("approvals").returncode == 3
    # Every command explains itself without a daemon, both ways.
    for cmd in ("status", "run", "env", "log", "send", "new", "tool", "call",
                "mcp", "approve"):
        for args in ((cmd, "--help"), (cmd, "-h"), ("help", cmd)):
            r = d.ctl(*args)
            assert r.returncode == 0, (args, r.stderr)
            assert r.stdout.startswith("usage: gbrctl " + cmd), (args, r.stdout)
            assert len(r.stdout.splitlines()) >= 3, (args, r.stdout)
    assert "for one command" in d.ctl("--help").stdout
    r = d.ctl("help", "nope")
    assert r.returncode == 2 and "unknown command 'nope'" in r.stderr
    # Only the first argument asks for help: after it, "-h" is an argument.
    r = d.ctl("run", "abc", "--", "-h")
    assert r.returncode == 125 and "usage" not in r.stdout


def test_gbrctl_edit_with_editor(daemon, ws, tmpdir_short):
    c, sid = new_session(daemon, ws)
    rid, a = ask(c, sid, "edit_file", {"path": "gleam.toml",
                                       "old_string": "1.0.0",
                                       "new_string": "2.0.0"})
    editor = os.path.join(tmpdir_short, "ed.sh")
    seen = os.path.join(tmpdir_short, "seen.txt")
    with open(editor, "w") as f:
        f.write("#!/bin/sh\n"
                "cp \"$1\" %s\n"
                "stat -c %%a \"$1\" >> %s\n"
                "sed -i 's/2.0.0/2.5.0/' \"$1\"\n" % (seen, seen + ".mode"))
    os.chmod(editor, 0o700)
    env = dict(daemon.env, EDITOR=editor)
    env.pop("VISUAL", None)
    import subprocess
    from conftest import GBRCTL
    r = subprocess.run([GBRCTL, "edit", a["id"], "--reason", "tuned"], env=env,
                       stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 0, r.stderr
    assert "edited" in r.stdout
    # The editor saw the proposed file, in a private file.
    assert read(seen) == 'name = "app"\nversion = "2.0.0"\n'
    assert read(seen + ".mode").strip() == "600"
    assert "result" in answer(c, rid)
    assert read(os.path.join(ws, "gleam.toml")) == 'name = "app"\nversion = "2.5.0"\n'
    # Without a terminal and without an editor set: refused, nothing decided.
    rid, a = ask(c, sid, "write_file", {"path": "gleam.toml", "content": "q"})
    env.pop("EDITOR")
    r = subprocess.run([GBRCTL, "edit", a["id"]], env=env,
                       stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2 and "EDITOR" in r.stderr
    # An editor that fails decides nothing.
    env["EDITOR"] = "false"
    r = subprocess.run([GBRCTL, "edit", a["id"]], env=env,
                       stdin=subprocess.DEVNULL, capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1
    assert approvals(daemon)[0]["state"] == "pending"
    # What gbrd cannot take as text (a NUL byte, a Latin-1 byte) is said
    # with where it is, the approval still waits, and the edit is kept.
    for bad, why in ((b"ab\0cd", "a NUL byte at byte 2"),
                     (b"caf\xe9\n", "not UTF-8 at byte 3")):
        with open(editor, "w") as f:
            f.write("#!/bin/sh\nprintf '%s' > \"$1\"\n" %
                    "".join("\\%03o" % b for b in bad))
        env["EDITOR"] = editor
        r = subprocess.run([GBRCTL, "edit", a["id"]], env=env,
                           stdin=subprocess.DEVNULL, capture_output=True,
                           text=True, timeout=60)
        assert r.returncode == 1, r.stderr
        assert why in r.stderr and "nothing was decided" in r.stderr, r.stderr
        kept = r.stderr.split("kept in ")[1].split()[0]
        with open(kept, "rb") as f:
            assert f.read() == bad
        os.unlink(kept)
        assert approvals(daemon)[0]["state"] == "pending"
        assert "result" in daemon.conn().call("daemon.ping")
    resolve(daemon, a["id"], "deny")
    answer(c, rid)


def test_gbrctl_grants_revoke(daemon, ws):
    c, sid = new_session(daemon, ws)
    rid, a = ask(c, sid, "write_file", {"path": "gleam.toml", "content": "1"})
    r = daemon.ctl("approve", a["id"], "--scope", "session")
    assert r.returncode == 0 and "rest of the session" in r.stdout
    answer(c, rid)
    g = daemon.ctl_json("grants")
    assert len(g) == 1
    r = daemon.ctl("grants", "--session", sid)
    assert g[0]["id"] in r.stdout and "gleam.toml" in r.stdout
    r = daemon.ctl("revoke", g[0]["id"])
    assert r.returncode == 0
    assert daemon.ctl("revoke", g[0]["id"]).returncode == 1
    assert daemon.ctl("grants").stdout.strip() == "no grants"


def test_escaping_attack_in_gbrctl(daemon, ws):
    """A command that would rewrite the terminal (ANSI escapes, a bidi
    override flipping what is read, a carriage return) is shown escaped by
    gbrctl approvals; a path carrying them never becomes an approval."""
    write(os.path.join(ws, ".gbr_envs", "cmd.ini"),
          "[env]\nask_commands = echo *\nprotected_files = *.toml\n")
    c, sid = new_session(daemon, ws, env="cmd")
    evil = "\x1b[2J\x1b[1;1Hrm -rf ~\x1b[8m"
    rid, a = ask(c, sid, "run_command", {"argv": ["echo", evil,
                                                  "\u202etxt.exe", "\r\n"]})
    r = daemon.ctl("approvals")
    assert r.returncode == 0
    out = r.stdout
    assert "\x1b" not in out and "\u202e" not in out and "\r" not in out
    assert "\\u{001B}[2J" in out and "\\u{202E}txt.exe" in out
    assert "\\u{000D}\\u{000A}" in out
    assert len(out.splitlines()) == 2
    # Paths: refused before anything is asked, typed or through a link.
    for p in ("\x1b[31mred.toml", "gleam\u202e.toml"):
        r = c.call("tool.call", {"session": sid, "tool": "write_file",
                                 "args": {"path": p, "content": "y"}})
        assert r["error"]["data"]["kind"] == "invalid_path", r
    bad = os.path.join(ws, "\x1b[31mred\u202e.toml")
    write(bad, "x\n")
    os.symlink(os.path.basename(bad), os.path.join(ws, "plain.toml"))
    r = c.call("tool.call", {"session": sid, "tool": "write_file",
                             "args": {"path": "plain.toml", "content": "y"}})
    assert r["error"]["data"]["kind"] == "invalid_path", r
    assert [x["id"] for x in approvals(daemon)] == [a["id"]]
    assert read(bad) == "x\n"
    resolve(daemon, a["id"], "deny")
    answer(c, rid)


def fake_gbrd(path, approvals_list, grants_list):
    """A stand-in daemon on path that answers hello, approval.list and
    approval.grants with what a test gives: gbrctl's display must hold up
    whatever the daemon says."""
    import socket
    import threading
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(path)
    srv.listen(4)

    def serve():
        while True:
            try:
                conn, _ = srv.accept()
            except OSError:
                return
            f = conn.makefile("rwb")
            for line in f:
                m = json.loads(line)
                res = {"hello": {"protocol": 1, "server": "gbrd",
                                 "version": "0", "pid": 1, "epoch": "e",
                                 "capabilities": []},
                       "approval.list": {"approvals": approvals_list},
                       "approval.grants": {"grants": grants_list}}.get(
                           m["method"], {})
                f.write(json.dumps({"jsonrpc": "2.0", "id": m["id"],
                                    "result": res}).encode() + b"\n")
                f.flush()
            conn.close()
    threading.Thread(target=serve, daemon=True).start()
    return srv


def test_escaping_paths_in_gbrctl(tmpdir_short):
    """Whatever a daemon (or a forged log) says, a path with an escape
    sequence or a bidi override is shown escaped, on one line."""
    import subprocess
    from conftest import GBRCTL
    sock = os.path.join(tmpdir_short, "fake.sock")
    evil = "src/\x1b]0;owned\x07\x1b[2Kok.txt\u202e\u2066gpj.exe\nx\\y"
    a = {"id": "a0123456789abcdef", "session": "0123456789ab", "tool":
         "write_file", "args": {}, "path": evil, "command": None,
         "diff": None, "why": "protected_path", "state": "pending",
         "note": "see \x1b[31mhere\x1b[0m", "created_ms": 1,
         "expires_ms": None, "decision": None, "reason": None,
         "scope": "once", "call_id": "c", "result": None}
    g = {"id": "g0123456789abcdef", "session": "0123456789ab",
         "tool": "write_file", "path": evil, "command": None, "created_ms": 1}
    srv = fake_gbrd(sock, [a], [g])
    try:
        for cmd in ("approvals", "grants"):
            r = subprocess.run([GBRCTL, "--socket", sock, cmd],
                               capture_output=True, text=True, timeout=30)
            assert r.returncode == 0, r.stderr
            out = r.stdout
            for ch in ("\x1b", "\x07", "\u202e", "\u2066", "\r"):
                assert ch not in out, (cmd, out)
            assert "src/\\u{001B}]0;owned\\u{0007}\\u{001B}[2Kok.txt" \
                   "\\u{202E}\\u{2066}gpj.exe\\u{000A}x\\\\y" in out, out
        assert "see \\u{001B}[31mhere" in subprocess.run(
            [GBRCTL, "--socket", sock, "approvals"], capture_output=True,
            text=True, timeout=30).stdout
    finally:
        srv.close()


def test_session_close_withdraws(daemon, ws):
    c, sid = new_session(daemon, ws)
    rid, a = ask(c, sid, "write_file", {"path": "gleam.toml", "content": "x"})
    assert "result" in daemon.conn().call("session.close", {"session": sid})
    r = answer(c, rid)
    assert r["error"]["data"]["kind"] in ("cancelled", "session_not_found"), r
    lst = approvals(daemon, all=True)
    assert lst[0]["state"] == "withdrawn" and "closed" in lst[0]["reason"]
    assert approvals(daemon) == []
    assert read(os.path.join(ws, "gleam.toml")) == 'name = "app"\nversion = "1.0.0"\n'
    st = daemon.conn().call("daemon.status")["result"]
    assert st["approvals"]["pending"] == 0


def test_list_is_bounded(make_daemon, ws):
    """Many large pending approvals: approval.list stays under half a
    client queue and says there are more."""
    d = make_daemon(config="[daemon]\nclient_queue_bytes = 256K\n")
    c, sid = new_session(d, ws)
    big = "x" * 40000
    asked = []
    for i in range(6):
        asked.append(ask(c, sid, "write_file", {"path": "gleam.toml",
                                                "content": big + str(i)}))
    r = d.conn().call("approval.list")
    assert r["result"]["more"] is True
    got = r["result"]["approvals"]
    assert 0 < len(got) < 6
    assert len(json.dumps(r)) < 128 * 1024 + 4096
    one = d.conn().call("approval.list", {"id": asked[5][1]["id"]})["result"]
    assert one["approvals"][0]["content"] == big + "5" and one["more"] is False
    for rid, a in asked:
        resolve(d, a["id"], "deny")


def test_apply_rechecks_deny_rules(daemon, ws):
    """A decision does not override a deny rule that came in meanwhile:
    the profile became read-only, or the file can no longer be written;
    the approval ends "failed" and the call gets the refusal."""
    write(os.path.join(ws, ".gbr_envs", "ro.ini"),
          "[env]\nautonomy = read-only\n")
    c, sid = new_session(daemon, ws)
    w = watcher(daemon, sid)
    rid, a = ask(c, sid, "write_file", {"path": "gleam.toml", "content": "x"})
    assert "result" in daemon.conn().call("env.use", {"session": sid,
                                                      "env": "ro"})
    assert "result" in resolve(daemon, a["id"], "approve")
    r = answer(c, rid)
    assert r["error"]["data"]["kind"] == "read_only", r
    done = approvals(daemon, all=True)[0]
    assert done["state"] == "failed" and \
        done["result"]["error"]["kind"] == "read_only"
    wait_for(w, lambda p: p["type"] == "approval.resolved" and
             p["approval"]["state"] == "failed")
    assert read(os.path.join(ws, "gleam.toml")) == 'name = "app"\nversion = "1.0.0"\n'
    # Back to the default; the file itself refuses (mode 0444).
    daemon.conn().call("env.use", {"session": sid, "env": "default"})
    rid, a = ask(c, sid, "write_file", {"path": "gleam.toml", "content": "y"})
    os.chmod(os.path.join(ws, "gleam.toml"), 0o444)
    resolve(daemon, a["id"], "approve")
    assert answer(c, rid)["error"]["data"]["kind"] == "permission_denied"
    assert approvals(daemon, id=a["id"])[0]["state"] == "failed"
    os.chmod(os.path.join(ws, "gleam.toml"), 0o644)


def test_tool_cancel_withdraws_and_reports(daemon, ws):
    c, sid = new_session(daemon, ws)
    rid, a = ask(c, sid, "write_file", {"path": ".gbr_envs/x.ini",
                                        "content": "[env]\n"},
                 request_id="cancel-me")
    other = daemon.conn()
    r = other.call("tool.cancel", {"session": sid, "request_id": "cancel-me"})
    assert r["result"] == {"cancelled": True}, r
    # The caller still gets its one reply: cancelled, and nothing written.
    m = answer(c, rid)
    assert m["error"]["data"]["kind"] == "cancelled", m
    assert not os.path.exists(os.path.join(ws, ".gbr_envs", "x.ini"))
    (b,) = [x for x in approvals(daemon, session=sid, all=True)
            if x["id"] == a["id"]]
    assert b["state"] == "withdrawn", b
    # Nothing in flight now: false; a finished call is not undone.
    r = other.call("tool.cancel", {"session": sid, "request_id": "cancel-me"})
    assert r["result"] == {"cancelled": False}, r
    r = other.call("tool.cancel", {"session": sid, "request_id": "never"})
    assert r["result"] == {"cancelled": False}, r
    r = other.call("tool.cancel", {"session": "nope", "request_id": "x"})
    assert r["error"]["data"]["kind"] == "session_not_found", r
    r = other.call("tool.cancel", {"session": sid})
    assert r["error"]["data"]["kind"] == "invalid_params", r


# An approval applies to exactly the object the human was shown: the
# canonical path the write resolved to and, there, the same file with the
# same bytes (or still no file, below the same folder). Anything else
# swapped in between the request and the decision (here by the test
# itself, standing in for an agent's command) ends the call with
# changed_since_approval, and nothing is written anywhere.

PIN_PROFILE = ("[env]\nprotected_files = gleam.toml, manifest.toml, "
               "cfg/*.toml\n")
GLEAM_OLD = 'name = "app"\nversion = "1.0.0"\n'
HUMAN = 'name = "app"\nversion = "7.7.7"\n# a human wrote this\n'


def tree(top):
    """Everything under top: each file's bytes and inode, each link's
    target, each folder; what an approved write must leave alone."""
    out = {}
    for d, dirs, files in os.walk(top):
        for n in dirs + files:
            p = os.path.join(d, n)
            st = os.lstat(p)
            rel = os.path.relpath(p, top)
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISDIR(st.st_mode):
                out[rel] = ("dir", st.st_ino)
            else:
                with open(p, "rb") as f:
                    out[rel] = ("file", f.read(), st.st_ino)
    return out


@pytest.fixture
def pinws(ws):
    """The workspace with a profile protecting a file in a folder too."""
    write(os.path.join(ws, ".gbr_envs", "pin.ini"), PIN_PROFILE)
    write(os.path.join(ws, "manifest.toml"), "packages = []\n")
    write(os.path.join(ws, "cfg", "app.toml"), "port = 1\n")
    return ws


def swap_link(ws, name, target):
    os.unlink(os.path.join(ws, name))
    os.symlink(target, os.path.join(ws, name))


def replace_file(ws, name):
    """Same bytes, another inode: renamed over the name."""
    p = os.path.join(ws, name)
    with open(p, "rb") as f:
        data = f.read()
    with open(p + ".new", "wb") as f:
        f.write(data)
    os.replace(p + ".new", p)


def change_in_place(ws, name):
    """Same inode, same size, same mtime (set back): other bytes."""
    p = os.path.join(ws, name)
    st = os.stat(p)
    with open(p, "r+b") as f:
        data = f.read()
        f.seek(0)
        f.write(data.replace(b"1", b"9", 1) if b"1" in data else
                b"X" + data[1:])
    os.utime(p, ns=(st.st_atime_ns, st.st_mtime_ns))
    assert os.stat(p).st_ino == st.st_ino and \
        os.stat(p).st_mtime_ns == st.st_mtime_ns


def parent_to_link(ws, folder):
    """The folder moved away, a link to a look-alike folder in its place."""
    os.rename(os.path.join(ws, folder), os.path.join(ws, folder + ".orig"))
    os.makedirs(os.path.join(ws, "other"))
    for n in os.listdir(os.path.join(ws, folder + ".orig")):
        with open(os.path.join(ws, folder + ".orig", n), "rb") as f:
            data = f.read()
        with open(os.path.join(ws, "other", n), "wb") as f:
            f.write(data)
    os.symlink("other", os.path.join(ws, folder))


def parent_replaced(ws, folder):
    """The folder moved away, a new empty real folder in its place."""
    os.rename(os.path.join(ws, folder), os.path.join(ws, folder + ".orig"))
    os.makedirs(os.path.join(ws, folder))


def appear(ws, name):
    write(os.path.join(ws, name), "made meanwhile\n")


EDIT_ARGS = {"gleam.toml": ("1.0.0", "2.0.0"), "cfg/app.toml": ("1", "2")}

# name: (target path, it exists, the change made while the human decides)
PIN_CASES = {
    "link_to_gbr_envs": ("gleam.toml", True,
                         lambda w: swap_link(w, "gleam.toml",
                                             ".gbr_envs/default.ini")),
    "link_to_other_protected": ("gleam.toml", True,
                                lambda w: swap_link(w, "gleam.toml",
                                                    "manifest.toml")),
    "new_inode": ("gleam.toml", True, lambda w: replace_file(w, "gleam.toml")),
    "in_place": ("gleam.toml", True,
                 lambda w: change_in_place(w, "gleam.toml")),
    "parent_to_link": ("cfg/app.toml", True,
                       lambda w: parent_to_link(w, "cfg")),
    "new_file_appears": ("cfg/new.toml", False,
                         lambda w: appear(w, "cfg/new.toml")),
    "new_file_parent_replaced": ("cfg/new.toml", False,
                                 lambda w: parent_replaced(w, "cfg")),
    "new_file_parent_to_link": ("cfg/new.toml", False,
                                lambda w: parent_to_link(w, "cfg")),
}


def pin_ask(c, sid, tool, path):
    if tool == "edit_file":
        old, new = EDIT_ARGS[path]
        return ask(c, sid, "edit_file", {"path": path, "old_string": old,
                                         "new_string": new})
    return ask(c, sid, "write_file", {"path": path, "content": HUMAN + "w\n"})


def assert_changed(d, reply, a, ws, before, profile):
    """The call ended with changed_since_approval, the approval failed,
    and nothing under the workspace changed: no write through the link,
    no new file, no temporary file left behind, the profile's bytes as
    they were."""
    err = reply["error"]
    assert err["data"]["kind"] == "changed_since_approval", reply
    assert err["data"]["approval_id"] == a["id"], reply
    assert "ask again" in err["message"], err["message"]
    assert tree(ws) == before
    with open(os.path.join(ws, ".gbr_envs", "default.ini"), "rb") as f:
        assert f.read() == profile
    done = approvals(d, id=a["id"])[0]
    assert done["state"] == "failed", done
    assert done["result"]["error"]["kind"] == "changed_since_approval"


@pytest.mark.parametrize("decision", ["approve", "edit"])
@pytest.mark.parametrize("tool", ["write_file", "edit_file"])
@pytest.mark.parametrize("case", sorted(PIN_CASES))
def test_approval_pins_the_object(daemon, pinws, case, tool, decision):
    path, exists, change = PIN_CASES[case]
    if tool == "edit_file" and not exists:
        pytest.skip("edit_file of a missing file fails without asking")
    with open(os.path.join(pinws, ".gbr_envs", "default.ini"), "rb") as f:
        profile = f.read()
    c, sid = new_session(daemon, pinws, env="pin")
    rid, a = pin_ask(c, sid, tool, path)
    assert a["path"] == path and a["why"] == "protected_path"
    change(pinws)
    before = tree(pinws)
    kw = {"content": HUMAN} if decision == "edit" else {}
    r = resolve(daemon, a["id"], decision, **kw)
    assert "result" in r, r
    assert_changed(daemon, answer(c, rid), a, pinws, before, profile)
    res = tool_results(daemon, sid, a["call_id"])
    assert len(res) == 1 and res[0]["error"]["kind"] == "changed_since_approval"
    wait_until(lambda: state_of(daemon, sid) == "idle")
    # Asked again, the agent gets a fresh approval for what is there now.
    if case == "link_to_gbr_envs":
        assert write_kind(c, sid, path) == "env_dir"


@pytest.mark.parametrize("decision", ["approve", "edit"])
@pytest.mark.parametrize("tool", ["write_file", "edit_file"])
def test_approval_pins_unchanged_object_applies(daemon, pinws, tool, decision):
    """The same requests with nothing changed meanwhile still apply, for a
    file in a folder and for a new file."""
    c, sid = new_session(daemon, pinws, env="pin")
    for path in ("gleam.toml", "cfg/app.toml") + (
            ("cfg/new.toml",) if tool == "write_file" else ()):
        rid, a = pin_ask(c, sid, tool, path)
        kw = {"content": HUMAN} if decision == "edit" else {}
        assert "result" in resolve(daemon, a["id"], decision, **kw)
        reply = answer(c, rid)
        assert "result" in reply, reply
        got = read(os.path.join(pinws, path))
        if decision == "edit":
            assert got == HUMAN
        elif tool == "write_file":
            assert got == HUMAN + "w\n"
        else:
            assert EDIT_ARGS[path][1] in got


def test_approval_pin_builtin_default(daemon, tmpdir_short):
    """The reported case, with the built-in default profile (gleam.toml
    protected): the link swap into .gbr_envs/ is refused."""
    d = os.path.join(tmpdir_short, "bare")
    write(os.path.join(d, "gleam.toml"), GLEAM_OLD)
    write(os.path.join(d, ".gbr_envs", "other.ini"), "[env]\nautonomy = full\n")
    with open(os.path.join(d, ".gbr_envs", "other.ini"), "rb") as f:
        profile = f.read()
    c, sid = new_session(daemon, d)
    rid, a = ask(c, sid, "write_file", {"path": "gleam.toml",
                                        "content": "[env]\nautonomy = full\n"
                                                   "protected_files = \n"})
    swap_link(d, "gleam.toml", ".gbr_envs/other.ini")
    before = tree(d)
    assert "result" in resolve(daemon, a["id"], "approve")
    err = answer(c, rid)["error"]
    assert err["data"]["kind"] == "changed_since_approval", err
    assert tree(d) == before
    with open(os.path.join(d, ".gbr_envs", "other.ini"), "rb") as f:
        assert f.read() == profile


@pytest.mark.parametrize("decision", ["approve", "edit"])
@pytest.mark.parametrize("case", ["link_to_gbr_envs", "in_place",
                                  "new_file_appears"])
def test_approval_pin_survives_kill9(make_daemon, pinws, case, decision):
    """The pin is in the approval's record: decided after a kill -9 and a
    restart, the approval still refuses a changed object."""
    path, exists, change = PIN_CASES[case]
    with open(os.path.join(pinws, ".gbr_envs", "default.ini"), "rb") as f:
        profile = f.read()
    d = make_daemon()
    c, sid = new_session(d, pinws, env="pin")
    rid, a = ask(c, sid, "write_file", {"path": path, "content": HUMAN})
    d.kill9()
    change(pinws)
    before = tree(pinws)
    d.start()
    w = watcher(d, sid)
    kw = {"content": HUMAN + "edited\n"} if decision == "edit" else {}
    assert "result" in resolve(d, a["id"], decision, **kw)
    wait_for(w, lambda p: p["type"] == "tool.result" and
             p["call_id"] == a["call_id"])
    res = tool_results(d, sid, a["call_id"])
    assert len(res) == 1 and res[0]["error"]["kind"] == "changed_since_approval"
    assert tree(pinws) == before
    with open(os.path.join(pinws, ".gbr_envs", "default.ini"), "rb") as f:
        assert f.read() == profile
    assert approvals(d, id=a["id"])[0]["state"] == "failed"


def test_approval_pin_survives_kill9_and_applies(make_daemon, pinws):
    """Unchanged across the restart, the pinned write applies."""
    d = make_daemon()
    c, sid = new_session(d, pinws, env="pin")
    rid, a = ask(c, sid, "write_file", {"path": "cfg/new.toml",
                                        "content": HUMAN})
    rid2, b = ask(c, sid, "edit_file", {"path": "gleam.toml",
                                        "old_string": "1.0.0",
                                        "new_string": "2.0.0"})
    d.kill9()
    d.start()
    w = watcher(d, sid)
    assert "result" in resolve(d, a["id"], "approve")
    assert "result" in resolve(d, b["id"], "edit", content=HUMAN)
    for x in (a, b):
        wait_for(w, lambda p: p["type"] == "tool.result" and
                 p["call_id"] == x["call_id"])
        assert tool_results(d, sid, x["call_id"])[0]["ok"] is True
    assert read(os.path.join(pinws, "cfg", "new.toml")) == HUMAN
    assert read(os.path.join(pinws, "gleam.toml")) == HUMAN


@pytest.mark.parametrize("target,why,path", [
    (".gbr_envs/default.ini", "env_dir", ".gbr_envs/default.ini"),
    ("manifest.toml", "protected_path", "manifest.toml")])
def test_grant_does_not_follow_a_new_link(daemon, pinws, target, why, path):
    """A session grant is for a tool on a canonical path: once gleam.toml
    is a link into another protected path, the granted write asks again
    (for what the link leads to) and nothing is written meanwhile."""
    with open(os.path.join(pinws, ".gbr_envs", "default.ini"), "rb") as f:
        profile = f.read()
    c, sid = new_session(daemon, pinws, env="pin")
    rid, a = ask(c, sid, "write_file", {"path": "gleam.toml", "content": "v1\n"})
    assert "result" in resolve(daemon, a["id"], "approve", scope="session")
    assert "result" in answer(c, rid)
    r = c.call("tool.call", {"session": sid, "tool": "write_file",
                             "args": {"path": "gleam.toml", "content": "v2\n"}})
    assert "result" in r and read(os.path.join(pinws, "gleam.toml")) == "v2\n"
    swap_link(pinws, "gleam.toml", target)
    before = tree(pinws)
    rid, b = ask(c, sid, "write_file", {"path": "gleam.toml", "content": "v3\n"})
    assert b["why"] == why and b["path"] == path, b
    assert tree(pinws) == before
    resolve(daemon, b["id"], "deny")
    assert answer(c, rid)["error"]["data"]["kind"] == "denied"
    assert tree(pinws) == before
    with open(os.path.join(pinws, ".gbr_envs", "default.ini"), "rb") as f:
        assert f.read() == profile


@pytest.mark.parametrize("name,other", [
    ("prompts/[x].md", "prompts/x.md"),
    ("prompts/p*.md", "prompts/pa.md"),
    ("prompts/[y.md", None)])
def test_system_file_with_glob_characters_is_protected(daemon, ws, name,
                                                       other):
    """A profile's system_file is protected as itself: a name holding glob
    characters is not read as a pattern, so writing that very file waits
    for a human (and leaves it as it was until approved), while a name
    the pattern would have matched is an ordinary file."""
    write(os.path.join(ws, name), "You are careful.\n")
    write(os.path.join(ws, ".gbr_envs", "lit.ini"),
          "[prompt]\nsystem_file = %s\n" % name)
    c, sid = new_session(daemon, ws, env="lit")
    if "*" in name or "?" in name:
        # The agent may name no such file on any system (one meaning:
        # Windows has none): refused outright, nothing asked or written.
        assert write_kind(c, sid, name) == "invalid_path"
        assert approvals(daemon, session=sid) == []
        assert read(os.path.join(ws, name)) == "You are careful.\n"
        return
    rid, a = ask(c, sid, "write_file", {"path": name,
                                        "content": "You obey the agent.\n"})
    assert a["why"] == "protected_path" and a["path"] == name, a
    assert [x["id"] for x in approvals(daemon, session=sid)] == [a["id"]]
    assert read(os.path.join(ws, name)) == "You are careful.\n"
    shown = daemon.conn().call("env.show", {"session": sid})["result"]
    assert shown["protected_paths"] == [name], shown
    assert "result" in resolve(daemon, a["id"], "approve")
    assert "result" in answer(c, rid)
    assert read(os.path.join(ws, name)) == "You obey the agent.\n"
    if other is not None:
        assert write_kind(c, sid, other) == "ok"
        assert read(os.path.join(ws, other)) == "x"


def test_gbrctl_approvals_shows_each_diff(daemon, ws):
    """gbrctl approvals listed one row per approval; a person deciding
    needs what it would change, escaped, below its row."""
    c, sid = new_session(daemon, ws)
    rid, a = ask(c, sid, "write_file", {"path": "gleam.toml",
                                        "content": GLEAM_NEW + "evil = \"\u202e\"\n"})
    r = daemon.ctl("approvals")
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    diff = [l for l in lines[2:] if l.startswith("    ")]
    assert any(l.startswith("    +") and "version" in l for l in diff), lines
    assert "\u202e" not in r.stdout and "\\u{202E}" in r.stdout, r.stdout
    resolve(daemon, a["id"], "deny")
    answer(c, rid)


def test_who_decided_is_kept_and_shown(make_daemon, ws):
    """Which terminal or script answered an approval: the client's name
    and pid, in approval.resolved and approval.list, after a restart too."""
    d = make_daemon()
    c, sid = new_session(d, ws)
    rid, a = ask(c, sid, "write_file", {"path": "gleam.toml", "content": GLEAM_NEW})
    r = d.ctl("deny", a["id"], "--reason", "no")
    assert r.returncode == 0, r.stderr
    e = answer(c, rid)["error"]["data"]
    assert e["kind"] == "denied"
    got = approvals(d, id=a["id"])[0]
    assert re.match(r"gbrctl/\S+ pid \d+$", got["decided_by"]), got
    d.stop()
    d.start()
    again = approvals(d, id=a["id"])[0]
    assert again["decided_by"] == got["decided_by"], again
    # A raw client is named by its hello.
    c, sid = new_session(d, ws)
    rid, a = ask(c, sid, "write_file", {"path": "gleam.toml", "content": GLEAM_NEW})
    w = d.conn()
    w.call("session.attach", {"session": sid})
    assert "result" in resolve(d, a["id"], "approve")
    ev = wait_for(w, lambda p: p["type"] == "approval.resolved" and
                  p["approval"]["state"] == "approved")[-1]
    assert ev["approval"]["decided_by"].endswith(" pid %d" % os.getpid()), ev
    answer(c, rid)
