"""Sessions against a real gbrd: create/list/history/close, many clients
attached to one session, catch-up with after_seq, kill -9 in the middle of
a turn, idempotent request_ids, bad params for every method, the limits,
storage failures, and the gbrctl session commands."""
import json
import os
import signal
import subprocess
import time

import pytest

from conftest import GBR, GBRD, Conn

NO_CONFIG = None


def wait_events(conn, pred, timeout=10.0):
    """Reads events (keeping conn.events) until pred(events) is true."""
    deadline = time.time() + timeout
    conn.sock.settimeout(timeout)
    while not pred(conn.events):
        if time.time() > deadline:
            raise AssertionError("events did not arrive: %r" % conn.events[-5:])
        m = conn.recv()
        if m.get("method") == "event":
            conn.events.append(m)
    return conn.events


def wait_idle(conn, sid, timeout=10.0):
    deadline = time.time() + timeout
    while [x for x in conn.call("session.list")["result"]["sessions"]
           if x["id"] == sid][0]["state"] != "idle":
        assert time.time() < deadline, "the session did not go idle"
        time.sleep(0.01)


def params(events):
    return [e["params"] for e in events if e.get("method") == "event"]


def session_events(events):
    """The events of the session stream (not the client-local ones)."""
    return [p for p in params(events)
            if p["type"] not in ("replay_complete", "resync_required")]


def turn_ended(turn):
    def pred(evs):
        return any(p["type"] == "session.state" and p.get("turn") == turn and
                   p["state"] != "running" for p in params(evs))
    return pred


def create(c, ws, **kw):
    p = dict(workspace=ws, **kw)
    r = c.call("session.create", p)
    assert "result" in r, r
    return r["result"]


@pytest.fixture
def ws(tmpdir_short):
    d = os.path.join(tmpdir_short, "ws")
    os.makedirs(d, exist_ok=True)
    return d


def test_create_list_history_close(daemon, ws):
    c = daemon.conn()
    s = create(c, ws, name="demo")
    assert len(s["id"]) == 12 and s["name"] == "demo" and s["created"] is True
    assert s["workspace"] == os.path.realpath(ws) and s["env"] == "default"
    assert s["state"] == "idle" and s["messages"] == 0
    lst = c.call("session.list")["result"]["sessions"]
    assert len(lst) == 1
    for k in ("id", "name", "workspace", "env", "state", "attached",
              "created_ms", "active_ms", "messages", "seq"):
        assert k in lst[0], k
    h = c.call("session.history", {"session": "demo"})["result"]
    assert h["messages"] == [] and h["session"] == s["id"]
    # A relative or missing workspace, a file, a taken name.
    assert c.call("session.create", {"workspace": "rel"})["error"]["data"]["kind"] == "invalid_params"
    assert c.call("session.create", {"workspace": ws + "/nope"})["error"]["data"]["kind"] == "not_found"
    f = os.path.join(ws, "file")
    open(f, "w").close()
    assert c.call("session.create", {"workspace": f})["error"]["data"]["kind"] == "invalid_params"
    assert c.call("session.create", {"workspace": ws, "name": "demo"})["error"]["data"]["kind"] == "already_exists"
    # Close: attached clients hear it, then the session is gone, the name free.
    a = daemon.conn()
    a.call("session.attach", {"session": s["id"]})
    assert c.call("session.close", {"session": "demo"})["result"]["closed"] is True
    wait_events(a, lambda evs: any(p["type"] == "session.state" and p["state"] == "closed"
                                    for p in params(evs)))
    assert c.call("session.history", {"session": "demo"})["error"]["data"]["kind"] == "session_not_found"
    assert c.call("session.list")["result"]["sessions"] == []
    assert create(c, ws, name="demo")["id"] != s["id"]


def test_send_appends_message_and_turn_ends_with_no_provider(daemon, ws):
    c = daemon.conn()
    s = create(c, ws)
    c.call("session.attach", {"session": s["id"]})
    r = c.call("session.send", {"session": s["id"], "text": "hello"})["result"]
    assert r["session"] == s["id"] and r["turn"] == 1 and r["seq"] == 2
    wait_events(c, turn_ended(1))
    evs = session_events(c.events)
    assert [p["type"] for p in evs] == ["message", "session.state", "error", "session.state"]
    assert evs[0]["message"] == {"role": "user", "content": "hello", "turn": 1}
    assert evs[2]["kind"] == "no_provider" and "tool.call" in evs[2]["message"]
    assert evs[3]["state"] == "idle" and evs[3]["outcome"] == "no_provider"
    assert [p["seq"] for p in evs] == [2, 3, 4, 5]
    h = c.call("session.history", {"session": s["id"]})["result"]
    assert [(m["role"], m["content"], m["seq"]) for m in h["messages"]] == [("user", "hello", 2)]


def test_three_clients_see_identical_streams(daemon, ws):
    owner = daemon.conn()
    s = create(owner, ws)
    clients = [daemon.conn() for _ in range(3)]
    for c in clients:
        r = c.call("session.attach", {"session": s["id"]})["result"]
        assert r["seq"] == 1
    raw = []
    for c in clients:
        raw.append([])
    # Input from any client is accepted: each sends in turn.
    for i in range(6):
        sender = clients[i % 3]
        r = sender.call("session.send", {"session": s["id"], "text": "m%d" % i})
        assert "result" in r, r
        for c in clients:
            wait_events(c, turn_ended(i + 1))
    streams = [session_events(c.events) for c in clients]
    assert streams[0] == streams[1] == streams[2]
    seqs = [p["seq"] for p in streams[0]]
    assert seqs == list(range(2, 2 + 24)), seqs
    assert [p["message"]["content"] for p in streams[0] if p["type"] == "message"] == \
        ["m%d" % i for i in range(6)]


def test_bench_probe_stamps_records_when_logged(make_daemon, ws, tmpdir_short):
    """GBR_BENCH_LOGGED_FILE (bench-fanout's clock for "logged"): each
    record's slot gets a CLOCK_MONOTONIC time after it was sent and before
    any client read its event, in seq order; slots past the file stay
    untouched, and a bad file is ignored with a warning."""
    import struct
    path = os.path.join(tmpdir_short, "logged")
    with open(path, "wb") as f:
        f.write(b"\0" * 8 * 5)          # slots 0..4: seq 5 has none
    d = make_daemon(env={"GBR_BENCH_LOGGED_FILE": path})
    c, watcher = d.conn(), d.conn()
    t0 = time.monotonic_ns()
    s = create(c, ws)
    watcher.call("session.attach", {"session": s["id"]})
    c.call("session.send", {"session": s["id"], "text": "hello"})
    got = {}
    watcher.sock.settimeout(10)
    while 5 not in got:
        m = watcher.recv()
        if m.get("method") == "event" and "seq" in m["params"]:
            got.setdefault(m["params"]["seq"], time.monotonic_ns())
    with open(path, "rb") as f:
        slots = struct.unpack("<5Q", f.read())
    assert slots[0] == 0
    assert t0 < slots[1] <= slots[2] <= slots[3] <= slots[4], slots
    for seq in (2, 3, 4):
        assert slots[seq] <= got[seq], (seq, slots[seq], got[seq])
    assert os.path.getsize(path) == 40
    assert "bench probe" in d.log()
    # A missing file: the daemon starts and says why the hook is off.
    d2 = make_daemon(env={"GBR_BENCH_LOGGED_FILE": path + ".missing"})
    assert create(d2.conn(), ws)["id"]
    assert "GBR_BENCH_LOGGED_FILE" in d2.log() and "ignored" in d2.log()


@pytest.mark.parametrize("mode", ["io_uring", "writev"])
def test_many_clients_identical_streams(make_daemon, ws, mode):
    """Twenty clients, large events that fill their sockets while they
    read one after the other: each gets the whole stream, in order, the
    same bytes, whether the fan-out is one io_uring batch per pass (with
    partial sends and full sockets finished later) or one writev each."""
    env = {"GBR_TEST_NO_IO_URING": "1"} if mode == "writev" else None
    d = make_daemon(env=env, config="[daemon]\nclient_queue_bytes = 8M\n")
    got = d.conn().call("daemon.status")["result"]["clients"]["write_batching"]
    if mode == "io_uring" and got != "io_uring":
        pytest.skip("this kernel offers no io_uring; gbrd writes to one "
                    "client at a time (the writev case covers that)")
    assert got == mode
    owner = d.conn()
    s = create(owner, ws)
    clients = [d.conn() for _ in range(20)]
    for c in clients:
        assert c.call("session.attach", {"session": s["id"]})["result"]["seq"] == 1
    # Two more attach and go away without a word: one before the events
    # (its copy fails to send: the peer is gone), one while they flow.
    gone = [d.conn() for _ in range(2)]
    for c in gone:
        assert "result" in c.call("session.attach", {"session": s["id"]})
    gone[0].close()
    big = "z" * 60000
    for i in range(8):
        # The reply to session.send comes once the message is durable; the
        # previous (no_provider) turn may still be running then.
        wait_idle(owner, s["id"])
        r = owner.call("session.send", {"session": s["id"], "text": big + str(i)})
        assert "result" in r, r
        if i == 3:
            gone[1].close()
    for c in clients:
        wait_events(c, turn_ended(8), timeout=30)
    info = owner.call("session.list")["result"]["sessions"][0]
    assert info["attached"] == 20 and info["state"] == "idle", info
    streams = [session_events(c.events) for c in clients]
    for st in streams[1:]:
        assert st == streams[0]
    assert [p["seq"] for p in streams[0]] == list(range(2, 2 + 32))
    assert [p["message"]["content"] for p in streams[0]
            if p["type"] == "message"] == [big + str(i) for i in range(8)]


def test_detach_then_reattach_gets_exactly_the_missed_events(daemon, ws):
    a, b = daemon.conn(), daemon.conn()
    s = create(a, ws)
    a.call("session.attach", {"session": s["id"]})
    b.call("session.send", {"session": s["id"], "text": "one"})
    wait_events(a, turn_ended(1))
    last = session_events(a.events)[-1]["seq"]
    assert a.call("session.detach", {"session": s["id"]})["result"]["detached"] == 1
    a.events.clear()
    for t in ("two", "three"):
        b.call("session.send", {"session": s["id"], "text": t})
    b.call("session.attach", {"session": s["id"], "after_seq": last})
    wait_events(b, turn_ended(3))
    missed = [p for p in session_events(b.events)]
    # Nothing reached the detached client.
    time.sleep(0.2)
    a.call("daemon.ping")
    assert session_events(a.events) == []
    # Re-attach: exactly the missed ones, then replay_complete, then live.
    r = a.call("session.attach", {"session": s["id"], "after_seq": last})["result"]
    assert r["seq"] == missed[-1]["seq"]
    wait_events(a, lambda evs: any(p["type"] == "replay_complete" for p in params(evs)))
    got = params(a.events)
    assert got[-1]["type"] == "replay_complete" and got[-1]["replayed"] == len(missed)
    assert got[:-1] == missed
    assert [p["seq"] for p in missed] == list(range(last + 1, last + 1 + len(missed)))
    b.call("session.send", {"session": s["id"], "text": "four"})
    wait_events(a, turn_ended(4))
    live = session_events(a.events)[len(missed):]
    assert live[0]["seq"] == missed[-1]["seq"] + 1
    assert [p["seq"] for p in live] == list(range(live[0]["seq"], live[0]["seq"] + 4))
    # A dropped connection detaches too, and never affects the session.
    a.close()
    time.sleep(0.1)
    info = b.call("session.list")["result"]["sessions"][0]
    assert info["attached"] == 1 and info["state"] == "idle"


def test_replay_after_restart_is_byte_identical(daemon, ws):
    c = daemon.conn()
    s = create(c, ws, name="replayed")
    c.call("session.attach", {"session": s["id"], "after_seq": 0})
    for t in ("a", "b \u00e9\u4e2d \"quoted\"\nnewline"):
        c.call("session.send", {"session": s["id"], "text": t, "request_id": "r-" + t[0]})
    wait_events(c, turn_ended(2))
    live = [json.dumps(p, sort_keys=True) for p in session_events(c.events)]
    before = c.call("session.list")["result"]["sessions"]
    daemon.stop()
    daemon.start()
    c2 = daemon.conn()
    after = c2.call("session.list")["result"]["sessions"]
    for x, y in zip(before, after):
        # Who is attached is of this run, not the log's.
        for z in (x, y):
            z.pop("attached"); z.pop("clients")
    assert before == after
    c2.call("session.attach", {"session": "replayed", "after_seq": 0})
    wait_events(c2, lambda evs: any(p["type"] == "replay_complete" for p in params(evs)))
    again = [json.dumps(p, sort_keys=True) for p in session_events(c2.events)]
    assert again == live
    # The request_id memory came back too.
    r = c2.call("session.send", {"session": "replayed", "text": "a", "request_id": "r-a"})["result"]
    assert r["duplicate"] is True and r["seq"] == 2


def test_kill9_during_turn_then_restart_interrupts(make_daemon, ws):
    d = make_daemon(env={"GBR_TEST_TURN_MS": "60000"})
    c = d.conn()
    epoch1 = c.hello["epoch"]
    s = create(c, ws, name="crashy")
    c.call("session.attach", {"session": s["id"]})
    r = c.call("session.send", {"session": s["id"], "text": "think hard"})["result"]
    wait_events(c, lambda evs: any(p["type"] == "session.state" and p["state"] == "running"
                                    for p in params(evs)))
    seen = session_events(c.events)[-1]["seq"]
    d.kill9()
    d.start()
    c2 = d.conn()
    assert c2.hello["epoch"] != epoch1
    info = c2.call("session.list")["result"]["sessions"]
    assert len(info) == 1
    # The interrupted event is written right after the replay; the list's
    # seq counts what is announced, so it may lag by that one event.
    for _ in range(200):
        info = c2.call("session.list")["result"]["sessions"][0]
        if info["seq"] == seen + 1:
            break
        time.sleep(0.01)
    assert info["id"] == s["id"] and info["name"] == "crashy"
    assert info["state"] == "interrupted" and info["messages"] == 1
    assert info["seq"] == seen + 1
    h = c2.call("session.history", {"session": "crashy"})["result"]["messages"]
    assert [m["content"] for m in h] == ["think hard"]
    c2.call("session.attach", {"session": "crashy", "after_seq": seen})
    wait_events(c2, lambda evs: any(p["type"] == "replay_complete" for p in params(evs)))
    evs = session_events(c2.events)
    assert len(evs) == 1 and evs[0]["type"] == "session.state"
    assert evs[0]["state"] == "interrupted" and evs[0]["turn"] == r["turn"]
    # Nothing is re-run: no turn starts and no error arrives by itself.
    time.sleep(0.5)
    c2.call("daemon.ping")
    assert len(session_events(c2.events)) == 1
    # The session goes on: a new message starts a new turn.
    r2 = c2.call("session.send", {"session": "crashy", "text": "again"})["result"]
    assert r2["turn"] == r["turn"] + 1 and r2["seq"] == seen + 2
    c2.call("session.cancel", {"session": "crashy"})


def test_resent_request_id_does_not_duplicate(daemon, ws):
    c = daemon.conn()
    s = create(c, ws)
    r1 = c.call("session.send", {"session": s["id"], "text": "once", "request_id": "req-1"})["result"]
    wait = daemon.conn()
    wait.call("session.attach", {"session": s["id"], "after_seq": 0})
    wait_events(wait, turn_ended(1))
    r2 = c.call("session.send", {"session": s["id"], "text": "once", "request_id": "req-1"})["result"]
    assert r2["duplicate"] is True and r2["seq"] == r1["seq"] and r2["turn"] == r1["turn"]
    # Pipelined: two sends with one id before any reply.
    i1 = c.request("session.send", {"session": s["id"], "text": "twice", "request_id": "req-2"})
    i2 = c.request("session.send", {"session": s["id"], "text": "twice", "request_id": "req-2"})
    replies = {}
    while len(replies) < 2:
        m = c.recv()
        if m.get("id") in (i1, i2):
            replies[m["id"]] = m
    assert replies[i1]["result"]["seq"] == replies[i2]["result"]["seq"]
    assert replies[i2]["result"].get("duplicate") is True
    wait_events(wait, turn_ended(2))
    time.sleep(0.2)
    h = c.call("session.history", {"session": s["id"]})["result"]["messages"]
    assert [m["content"] for m in h] == ["once", "twice"]
    assert len([p for p in session_events(wait.events) if p["type"] == "session.state"
                and p["state"] == "running"]) == 2
    # session.create with a request_id: same session back.
    a = create(c, ws, name="idem", request_id="mk-1")
    b = create(c, ws, name="idem", request_id="mk-1")
    assert a["id"] == b["id"] and b["duplicate"] is True


def test_reuse_returns_the_folder_session(daemon, ws, tmpdir_short):
    c = daemon.conn()
    a = create(c, ws, reuse=True)
    b = create(c, ws, reuse=True)
    assert a["created"] is True and b["created"] is False and a["id"] == b["id"]
    other = os.path.join(tmpdir_short, "other")
    os.makedirs(other)
    assert create(c, other, reuse=True)["id"] != a["id"]
    n = create(c, ws, name="named", reuse=True)
    assert n["created"] is True
    assert create(c, ws, name="named", reuse=True)["id"] == n["id"]
    assert c.call("session.create", {"workspace": other, "name": "named", "reuse": True}
                  )["error"]["data"]["kind"] == "already_exists"


def test_busy_cancel_and_names(make_daemon, ws):
    d = make_daemon(env={"GBR_TEST_TURN_MS": "60000"})
    c = d.conn()
    s = create(c, ws, name="slow")
    c.call("session.attach", {"session": "slow"})
    c.call("session.send", {"session": "slow", "text": "x"})
    wait_events(c, lambda evs: any(p["type"] == "session.state" and p["state"] == "running"
                                    for p in params(evs)))
    r = c.call("session.send", {"session": "slow", "text": "y"})
    assert r["error"]["data"]["kind"] == "busy" and r["error"]["data"]["state"] == "running"
    r = c.call("session.cancel", {"session": s["id"]})["result"]
    assert r["cancelled"] is True and r["turn"] == 1
    wait_events(c, turn_ended(1))
    end = session_events(c.events)[-1]
    assert end["state"] == "idle" and end["outcome"] == "cancelled"
    assert c.call("session.cancel", {"session": "slow"})["result"]["cancelled"] is False
    assert c.call("session.history", {"session": "slow"})["result"]["total"] == 1


BAD = [
    ("session.create", {}, "workspace"),
    ("session.create", {"workspace": 5}, "workspace"),
    ("session.create", {"workspace": "/", "name": ""}, "name"),
    ("session.create", {"workspace": "/", "name": "a b"}, "name"),
    ("session.create", {"workspace": "/", "name": "x" * 65}, "name"),
    ("session.create", {"workspace": "/", "name": "0123456789ab"}, "name"),
    ("session.create", {"workspace": "/", "name": "-lead"}, "name"),
    ("session.create", {"workspace": "/", "env": "../x"}, "env"),
    ("session.create", {"workspace": "/", "reuse": "yes"}, "reuse"),
    ("session.create", {"workspace": "/", "request_id": "has space"}, "request_id"),
    ("session.create", {"workspace": "/", "request_id": "r" * 129}, "request_id"),
    ("session.create", {"workspace": "/", "bogus": 1}, "bogus"),
    ("session.list", {"workspace": 1}, "workspace"),
    ("session.list", {"x": 1}, "x"),
    ("session.attach", {}, "session"),
    ("session.attach", {"session": 1}, "session"),
    ("session.attach", {"session": "S", "after_seq": -1}, "after_seq"),
    ("session.attach", {"session": "S", "after_seq": "3"}, "after_seq"),
    ("session.detach", {"session": 3}, "session"),
    ("session.detach", {"other": 3}, "other"),
    ("session.send", {"session": "S"}, "text"),
    ("session.send", {"text": "x"}, "session"),
    ("session.send", {"session": "S", "text": ""}, "text"),
    ("session.send", {"session": "S", "text": ["x"]}, "text"),
    ("session.send", {"session": "S", "text": "x", "request_id": ""}, "request_id"),
    ("session.send", {"session": "S", "text": "x", "request_id": 7}, "request_id"),
    ("session.cancel", {}, "session"),
    ("session.cancel", {"session": "S", "x": 1}, "x"),
    ("session.close", {}, "session"),
    ("session.history", {"session": "S", "limit": 0}, "limit"),
    ("session.history", {"session": "S", "limit": 10 ** 9}, "limit"),
    ("session.history", {}, "session"),
    ("session.history", {"session": "S", "before_seq": 0}, "before_seq"),
]


@pytest.mark.parametrize("method,p,field", BAD)
def test_bad_params_name_the_field(daemon, ws, method, p, field):
    c = daemon.conn()
    s = create(c, ws, name="S")
    r = c.call(method, p)
    assert r["error"]["data"]["kind"] == "invalid_params", r
    assert r["error"]["data"]["field"] == field, r
    # Nothing changed.
    assert c.call("session.list")["result"]["sessions"][0]["seq"] == 1


@pytest.mark.parametrize("method", ["session.attach", "session.send", "session.cancel",
                                    "session.close", "session.history", "session.detach"])
def test_unknown_session_is_session_not_found(daemon, method):
    c = daemon.conn()
    p = {"session": "nosuch", "text": "x"} if method == "session.send" else {"session": "nosuch"}
    r = c.call(method, p)
    assert r["error"]["data"]["kind"] == "session_not_found"
    assert r["error"]["code"] < -32000


def test_params_not_an_object(daemon):
    c = daemon.conn()
    for m in ("session.create", "session.list", "session.send", "session.attach"):
        r = c.call(m, [1, 2])
        assert r["error"]["data"]["kind"] == "invalid_params"


def test_unknown_env_is_invalid_env(daemon, ws):
    c = daemon.conn()
    r = c.call("session.create", {"workspace": ws, "env": "nope"})
    assert r["error"]["data"]["kind"] == "invalid_env"
    os.makedirs(os.path.join(ws, ".gbr_envs"))
    open(os.path.join(ws, ".gbr_envs", "nope.ini"), "w").close()
    assert create(c, ws, env="nope")["env"] == "nope"


LIMITS = """[session]
max_sessions = 2
history_messages = 2
max_text_bytes = 64
ring_events = 3
max_attached = 2
request_ids = 2
"""


def test_limits(make_daemon, ws):
    d = make_daemon(config=LIMITS)
    c = d.conn()
    s = create(c, ws)
    create(c, ws)
    r = c.call("session.create", {"workspace": ws})
    assert r["error"]["data"]["kind"] == "limit_reached"
    assert r["error"]["data"]["limit"] == "max_sessions"
    # Text over max_text_bytes.
    r = c.call("session.send", {"session": s["id"], "text": "x" * 65})
    assert r["error"]["data"]["kind"] == "too_large"
    # Attached clients.
    a1, a2, a3 = d.conn(), d.conn(), d.conn()
    a1.call("session.attach", {"session": s["id"]})
    a2.call("session.attach", {"session": s["id"]})
    r = a3.call("session.attach", {"session": s["id"]})
    assert r["error"]["data"]["kind"] == "limit_reached"
    a2.close()
    time.sleep(0.1)
    assert "result" in a3.call("session.attach", {"session": s["id"]})
    # History messages: two fit, the third does not.
    for i in range(2):
        c.call("session.send", {"session": s["id"], "text": "t%d" % i, "request_id": "q%d" % i})
        wait_events(a1, turn_ended(i + 1))
    r = c.call("session.send", {"session": s["id"], "text": "t2"})
    assert r["error"]["data"]["kind"] == "limit_reached"
    assert r["error"]["data"]["limit"] == "history_messages"
    # Only 3 recent events are kept in memory: older ones come from the
    # disk log (tests/system/test_attach_log.py has the details).
    a1.close()
    a3.close()
    time.sleep(0.1)
    a4 = d.conn()
    r = a4.call("session.attach", {"session": s["id"], "after_seq": 0})["result"]
    assert r["first_seq"] == 7 and r["seq"] == 9
    wait_events(a4, lambda evs: any(p["type"] == "replay_complete" for p in params(evs)))
    ps = params(a4.events)
    assert [p["seq"] for p in ps[:-1]] == list(range(1, 10))
    assert ps[-1]["type"] == "replay_complete" and ps[-1]["replayed"] == 9
    a5 = d.conn()
    a5.call("session.attach", {"session": s["id"], "after_seq": 6})
    wait_events(a5, lambda evs: any(p["type"] == "replay_complete" for p in params(evs)))
    assert [p["seq"] for p in session_events(a5.events)] == [7, 8, 9]
    # after_seq ahead of the session also resyncs.
    a4.close()
    a5.close()
    time.sleep(0.1)
    a6 = d.conn()
    a6.call("session.attach", {"session": s["id"], "after_seq": 99})
    wait_events(a6, lambda evs: any(p["type"] == "replay_complete" for p in params(evs)))
    assert params(a6.events)[0]["type"] == "resync_required"
    st = c.call("daemon.status")["result"]
    assert st["sessions"]["open"] == 2


def test_storage_failure_is_never_acknowledged(make_daemon, ws, tmpdir_short):
    fault = os.path.join(tmpdir_short, "faults")
    d = make_daemon(env={"GBR_FAULT_FILE": fault})
    c = d.conn()
    s = create(c, ws, name="disk")
    c.call("session.send", {"session": "disk", "text": "kept"})
    watcher = d.conn()
    watcher.call("session.attach", {"session": "disk", "after_seq": 0})
    wait_events(watcher, turn_ended(1))
    with open(fault, "w") as f:
        f.write("disklog.fsync EIO\n")
    time.sleep(0.1)
    r = c.call("session.send", {"session": "disk", "text": "lost"})
    assert r["error"]["data"]["kind"] == "storage_error", r
    wait_events(watcher, lambda evs: any(p["type"] == "resync_required" for p in params(evs)))
    os.unlink(fault)
    time.sleep(0.1)
    # The session refuses changes until the daemon restarts.
    r = c.call("session.send", {"session": "disk", "text": "later"})
    assert r["error"]["data"]["kind"] in ("storage_error", "busy")
    d.stop()
    d.start()
    c = d.conn()
    h = c.call("session.history", {"session": "disk"})["result"]["messages"]
    assert [m["content"] for m in h] == ["kept"]
    r = c.call("session.send", {"session": "disk", "text": "after restart"})
    assert "result" in r, r


def test_evicted_client_loses_nothing(make_daemon, ws):
    """A client that does not read is evicted (never blocks the daemon);
    the events stay in the session: re-attaching with its last seq sends
    the backlog, and history + attach with its seq continue exactly too."""
    d = make_daemon(config="[daemon]\nclient_queue_bytes = 64K\n")
    c = d.conn()
    s = create(c, ws)
    slow = d.conn()
    slow.call("session.attach", {"session": s["id"]})
    watcher = d.conn()
    watcher.call("session.attach", {"session": s["id"]})
    big = "y" * 3000
    sent = 0
    for i in range(400):
        r = c.call("session.send", {"session": s["id"], "text": big + str(i)})
        assert "result" in r, r
        sent += 1
        wait_events(watcher, turn_ended(i + 1))
        watcher.events.clear()
        if c.call("session.list")["result"]["sessions"][0]["attached"] == 1:
            break
    assert c.call("session.list")["result"]["sessions"][0]["attached"] == 1
    assert slow.closed(timeout=5)
    evs = [json.loads(l) for l in slow.buf.split(b"\n") if l]
    assert evs[-1]["params"]["type"] == "evicted"
    got = [e["params"]["seq"] for e in evs if "seq" in e.get("params", {})]
    # What it did get has no gap.
    assert got == list(range(got[0], got[0] + len(got)))
    again = d.conn()
    r = again.call("session.attach", {"session": s["id"], "after_seq": got[-1]})["result"]
    wait_events(again, lambda evs: any(p["type"] == "replay_complete" for p in params(evs)))
    backlog = params(again.events)
    assert [p["seq"] for p in backlog[:-1]] == list(range(got[-1] + 1, r["seq"] + 1))
    assert backlog[-1]["type"] == "replay_complete"
    again.events.clear()
    # The history comes in pages that fit the client's queue.
    h = again.call("session.history", {"session": s["id"], "limit": 1000})["result"]
    assert h["total"] == sent and h["more"] is True
    contents = [m["content"] for m in h["messages"]]
    before = h["messages"][0]["seq"]
    while True:
        page = again.call("session.history", {"session": s["id"], "before_seq": before})["result"]
        contents = [m["content"] for m in page["messages"]] + contents
        if not page["more"]:
            break
        before = page["messages"][0]["seq"]
    assert contents == [big + str(i) for i in range(sent)]
    again.events.clear()
    again.call("session.attach", {"session": s["id"], "after_seq": h["seq"]})
    c.call("session.send", {"session": s["id"], "text": "after"})
    wait_events(again, turn_ended(sent + 1))
    assert [p["seq"] for p in session_events(again.events)] == \
        list(range(h["seq"] + 1, h["seq"] + 5))


def test_gbrctl_session_commands(daemon, ws):
    r = daemon.ctl("new", "--name", "cli", ws)
    assert r.returncode == 0, r.stderr
    sid = r.stdout.strip()
    assert len(sid) == 12
    r = daemon.ctl("sessions")
    assert r.returncode == 0 and "cli" in r.stdout and sid in r.stdout
    r = daemon.ctl("send", "cli", "hello from gbrctl")
    assert r.returncode == 1 and "no_provider" in r.stderr
    r = daemon.ctl("--json", "send", "--request-id", "z1", "cli", "json please")
    res = json.loads(r.stdout)
    assert res["outcome"] == "no_provider" and res["errors"][0]["kind"] == "no_provider"
    r = daemon.ctl("--json", "send", "--no-wait", "--request-id", "z1", "cli", "json please")
    assert r.returncode == 0 and json.loads(r.stdout)["duplicate"] is True
    r = daemon.ctl("send", "cli", "-", input="from stdin\n")
    assert r.returncode == 1
    r = daemon.ctl("history", "cli")
    assert r.returncode == 0
    assert r.stdout.splitlines() == ["> hello from gbrctl", "> json please", "> from stdin"]
    h = daemon.ctl_json("history", "--limit", "1", sid)
    assert [m["content"] for m in h["messages"]] == ["from stdin\n"]
    r = daemon.ctl("cancel", "cli")
    assert r.returncode == 0 and "nothing to cancel" in r.stdout
    p = subprocess.Popen([daemon_ctl_path(), "--json", "attach", "cli", "--after", "0"],
                         env=daemon.env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(0.5)
    p.send_signal(signal.SIGTERM)
    out, _ = p.communicate(timeout=10)
    lines = [json.loads(l) for l in out.splitlines()]
    assert lines[0]["type"] == "session.created" and lines[-1]["type"] == "replay_complete"
    assert [l["seq"] for l in lines[:-1]] == list(range(1, len(lines)))
    r = daemon.ctl("close", "cli")
    assert r.returncode == 0
    r = daemon.ctl("send", "cli", "x")
    assert r.returncode == 1 and "session_not_found" in r.stderr
    assert daemon.ctl("send", "only-one-arg").returncode == 2
    assert daemon.ctl("attach", "cli", "--after", "-3").returncode == 2
    assert daemon.ctl("new", "--bogus", ws).returncode == 2


def daemon_ctl_path():
    from conftest import GBRCTL
    return GBRCTL


def test_two_gbr_started_at_once_make_one_daemon(make_daemon, ws):
    d = make_daemon(start=False)
    env = dict(d.env, GBRD=GBRD)
    procs = [subprocess.Popen([GBR, ws], env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(2)]
    outs = [p.communicate(b"hello\n", timeout=30) for p in procs]
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        assert b"no_provider" in out, out
    c = Conn(d.socket)
    pid = c.hello["pid"]
    r = subprocess.run(["pgrep", "-f", "^%s -s %s" % (GBRD, d.socket)],
                       capture_output=True, text=True)
    assert r.stdout.split() == [str(pid)]
    # Both terminals used the folder's one session.
    ss = c.call("session.list")["result"]["sessions"]
    assert len(ss) == 1 and ss[0]["messages"] == 2
    c.call("daemon.shutdown")
    for _ in range(100):
        if subprocess.run(["kill", "-0", str(pid)], capture_output=True).returncode != 0:
            break
        time.sleep(0.05)
    log = open(os.path.join(d.state, "gbrd.log"), errors="replace").read()
    for mark in ("ERROR: AddressSanitizer", "runtime error:", "LeakSanitizer"):
        assert mark not in log, log[-4000:]


def test_request_id_memory_is_bounded_and_survives_restart(make_daemon, ws):
    d = make_daemon(config="[session]\nrequest_ids = 2\n")
    c = d.conn()
    s = create(c, ws)
    w = d.conn()
    w.call("session.attach", {"session": s["id"]})
    for i, rid in enumerate(("a", "b", "c")):
        assert "duplicate" not in c.call("session.send", {"session": s["id"], "text": rid,
                                                          "request_id": rid})["result"]
        wait_events(w, turn_ended(i + 1))
    d.stop()
    d.start()
    c = d.conn()
    # The last two are remembered (also after the replay), the oldest is not.
    for rid in ("b", "c"):
        assert c.call("session.send", {"session": s["id"], "text": rid,
                                       "request_id": rid})["result"]["duplicate"] is True
    r = c.call("session.send", {"session": s["id"], "text": "a", "request_id": "a"})["result"]
    assert "duplicate" not in r and r["turn"] == 4


def test_snapshot_then_restart_rebuilds_sessions(make_daemon, ws):
    """The disk log's budget forces snapshots: sessions, histories, seq
    counters and request_ids come back from snapshot + later records."""
    d = make_daemon(config="[log]\nmax_bytes = 1M\nsegment_bytes = 64K\n")
    c = d.conn()
    a = create(c, ws, name="big")
    gone = create(c, ws, name="gone")
    w = d.conn()
    w.call("session.attach", {"session": a["id"]})
    text = "z" * 4000
    snap = None
    for i in range(400):
        r = c.call("session.send", {"session": "big", "text": "%d %s" % (i, text),
                                    "request_id": "k%d" % i})
        assert "result" in r, r
        wait_events(w, turn_ended(i + 1))
        w.events.clear()
        if i == 5:
            c.call("session.close", {"session": "gone"})
        snap = c.call("daemon.status")["result"]["disklog"].get("snapshot")
        if snap and i > 10:
            break
    assert snap, "no snapshot was written"
    # A few more after the snapshot, so the replay has records on top of it.
    for j in range(i + 1, i + 4):
        c.call("session.send", {"session": "big", "text": "after %d" % j, "request_id": "k%d" % j})
        wait_events(w, turn_ended(j + 1))
    before = c.call("session.list")["result"]["sessions"]
    hist = c.call("session.history", {"session": "big", "limit": 100000})["result"]
    d.stop()
    d.start()
    c = d.conn()
    after = c.call("session.list")["result"]["sessions"]
    for x in before + after:
        x.pop("attached"); x.pop("clients")
    assert after == before and [s["name"] for s in after] == ["big"]
    hist2 = c.call("session.history", {"session": "big", "limit": 100000})["result"]
    assert hist2 == hist
    r = c.call("session.send", {"session": "big", "text": "dup", "request_id": "k%d" % (i + 3)})
    assert r["result"]["duplicate"] is True
    assert c.call("session.history", {"session": gone["id"]})["error"]["data"]["kind"] == \
        "session_not_found"
    # Events from before the snapshot are gone: a resync says so.
    c.call("session.attach", {"session": "big", "after_seq": 1})
    wait_events(c, lambda evs: any(p["type"] == "replay_complete" for p in params(evs)))
    assert params(c.events)[0]["type"] == "resync_required"
    r = c.call("session.send", {"session": "big", "text": "on we go"})["result"]
    assert r["seq"] == before[0]["seq"] + 1


def test_bad_request_id_is_refused_by_every_method(daemon, ws):
    """One request_id rule, checked before any method runs: a refused
    request_id leaves no session, message, file or decision behind."""
    c = daemon.conn()
    s = create(c, ws)
    before = len(c.call("session.history", {"session": s["id"]})["result"]["messages"])
    target = os.path.join(ws, "rid.txt")
    for bad in ["", "a b", "x" * 129, "caf\u00e9", "tab\there", "nl\n"]:
        calls = [
            ("session.create", {"workspace": ws, "name": "rid-test", "request_id": bad}),
            ("session.send", {"session": s["id"], "text": "hi", "request_id": bad}),
            ("tool.call", {"session": s["id"], "tool": "write_file",
                           "args": {"path": "rid.txt", "content": "x"}, "request_id": bad}),
            ("tool.cancel", {"session": s["id"], "request_id": bad}),
            ("approval.resolve", {"id": "a0000000000000000", "decision": "approve",
                                  "request_id": bad}),
        ]
        for method, params in calls:
            err = c.call(method, params).get("error")
            assert err is not None, (method, bad)
            assert err["data"]["kind"] == "invalid_params", (method, bad, err)
            assert err["data"]["field"] == "request_id", (method, bad, err)
    names = [x.get("name") for x in c.call("session.list")["result"]["sessions"]]
    assert "rid-test" not in names
    assert not os.path.exists(target)
    after = len(c.call("session.history", {"session": s["id"]})["result"]["messages"])
    assert after == before
    # The longest good one still works.
    good = "k" * 128
    r = c.call("session.send", {"session": s["id"], "text": "ok", "request_id": good})
    assert "result" in r, r
