"""session.attach catch-up from the disk log: with a ring of recent events
far smaller than what a client missed, attach {after_seq} still sends every
missed event exactly once, in order and byte for byte as live clients got
it, then replay_complete, then live events; the same after a restart (the
sparse log index is rebuilt by the replay and kept in snapshots); only when
a snapshot replaced the old segments, resync_required. Also: clients that
go away in the middle, a session closed in the middle, slow readers with a
small output queue, and many clients catching up while events flow."""
import json
import os
import threading
import time

import pytest

from conftest import Conn

# A ring of 8 events (and at most 4K of them): almost everything comes from the log.
SMALL_RING = "[session]\nring_events = 8\nring_bytes = 4K\n"
# A 64K output queue; the backlogs below are many times that and bigger than
# what the kernel's socket buffer takes, so a client that does not read
# really holds its catch-up up.
SMALL_QUEUE = "[daemon]\nclient_queue_bytes = 64K\n[log]\nfsync = no\n"
LOCAL = ("replay_complete", "resync_required")


class Raw(Conn):
    """A client that keeps every line as the daemon sent it: all of them in
    `lines`, the events in `raw`."""

    def __init__(self, path, **kw):
        self.raw = []
        self.lines = []
        super().__init__(path, **kw)

    def recv(self):
        line = self.recv_line()
        m = json.loads(line)
        self.lines.append(line)
        if m.get("method") == "event":
            self.raw.append(line)
        return m


def raw_conn(d):
    return Raw(d.socket)


def ev(line):
    return json.loads(line)["params"]


def read_until(conn, pred, start=0, timeout=60.0):
    """Reads until an event from index start on satisfies pred(params);
    returns its index in conn.raw."""
    deadline = time.time() + timeout
    conn.sock.settimeout(timeout)
    i = start
    while True:
        while i < len(conn.raw):
            if pred(ev(conn.raw[i])):
                return i
            i += 1
        if time.time() > deadline:
            raise AssertionError("events did not arrive: %r" % conn.raw[-3:])
        conn.recv()


def is_type(t):
    return lambda p: p["type"] == t


def seq_at_least(seq):
    return lambda p: p["type"] not in LOCAL and p["seq"] >= seq


def send_turn(c, sid, text, live):
    """Sends a message and waits for the live client to see its turn end."""
    n0 = len(live.raw)
    while True:
        r = c.call("session.send", {"session": sid, "text": text})
        if "result" in r:
            break
        assert r["error"]["data"]["kind"] == "busy", r
        time.sleep(0.002)
    turn = r["result"]["turn"]
    read_until(live, lambda p: p["type"] == "session.state" and p.get("turn") == turn and
               p["state"] != "running", start=n0)
    return r["result"]


def by_seq(raw):
    """The session events of a stream, by seq."""
    out = {}
    for l in raw:
        p = ev(l)
        if p["type"] not in LOCAL:
            out[p["seq"]] = l
    return out


def make_history(d, ws, turns, text="m"):
    """A session with a live client attached from its first event on."""
    c = d.conn()
    s = c.call("session.create", {"workspace": ws, "name": "long"})["result"]
    live = raw_conn(d)
    live.call("session.attach", {"session": s["id"], "after_seq": 0})
    for i in range(turns):
        send_turn(c, s["id"], "%s %d" % (text, i), live)
    return c, s, live


def catch_up(d, sid, after):
    """Attaches with after_seq and reads up to replay_complete."""
    a = raw_conn(d)
    r = a.call("session.attach", {"session": sid, "after_seq": after})["result"]
    read_until(a, is_type("replay_complete"))
    return a, r


def check_exact(a, last, after, live_lines):
    """The catch-up is every event after `after` up to `last`, byte for
    byte as the live client got it, then replay_complete."""
    k = read_until(a, is_type("replay_complete"))
    body = a.raw[:k]
    assert [ev(l)["seq"] for l in body] == list(range(after + 1, last + 1))
    for l in body:
        assert l == live_lines[ev(l)["seq"]], (l, live_lines[ev(l)["seq"]])
    done = ev(a.raw[k])
    assert done["replayed"] == len(body) and done["seq"] == last


@pytest.fixture
def ws(tmpdir_short):
    d = os.path.join(tmpdir_short, "ws")
    os.makedirs(d, exist_ok=True)
    return d


def status(d):
    c = d.conn()
    st = c.call("daemon.status")["result"]
    c.close()
    return st


def wait_status(d, pred, timeout=10.0):
    deadline = time.time() + timeout
    while True:
        st = status(d)
        if pred(st):
            return st
        assert time.time() < deadline, st["sessions"]
        time.sleep(0.02)


def no_catch_up(d):
    return wait_status(d, lambda st: st["sessions"]["catching_up"] == 0)


def test_catch_up_from_the_log_is_exact_then_live(make_daemon, ws):
    d = make_daemon(config=SMALL_RING)
    c, s, live = make_history(d, ws, 60)
    last = 1 + 60 * 4
    lines = by_seq(live.raw)
    assert sorted(lines) == list(range(1, last + 1))
    for after in (0, 1, 2, 63, 64, 65, 129, 200, last - 8, last - 7, last - 1, last):
        a, r = catch_up(d, s["id"], after)
        # The reply's first_seq is the oldest event still in memory.
        assert r["seq"] == last and r["first_seq"] == last - 7
        check_exact(a, last, after, lines)
        a.close()
    # After replay_complete the stream goes on live, identical to the live client's.
    a, r = catch_up(d, s["id"], 10)
    check_exact(a, last, 10, lines)
    send_turn(c, s["id"], "one more", live)
    read_until(a, seq_at_least(last + 4))
    k = read_until(a, is_type("replay_complete"))
    lines = by_seq(live.raw)
    assert a.raw[k + 1:] == [lines[q] for q in range(last + 1, last + 5)]
    # after_seq ahead of the session is still a resync.
    b = raw_conn(d)
    b.call("session.attach", {"session": s["id"], "after_seq": last + 100})
    read_until(b, is_type("replay_complete"))
    assert [ev(l)["type"] for l in b.raw] == ["resync_required", "replay_complete"]
    assert ev(b.raw[0])["after_seq"] == last + 100
    st = no_catch_up(d)
    assert st["clients"]["evicted"] == 0


@pytest.mark.parametrize("how", ["stop", "kill9"])
def test_catch_up_after_restart(make_daemon, ws, how):
    d = make_daemon(config=SMALL_RING)
    c, s, live = make_history(d, ws, 40)
    last = 1 + 40 * 4
    lines = by_seq(live.raw)
    if how == "stop":
        d.stop()
    else:
        d.kill9()
    d.start()
    for after in (0, 5, 64, 100, last - 9, last):
        a, r = catch_up(d, s["id"], after)
        assert r["seq"] == last
        check_exact(a, last, after, lines)
        a.close()
    # The index goes on from the replayed one: later events are found too.
    c = d.conn()
    live2 = raw_conn(d)
    live2.call("session.attach", {"session": s["id"], "after_seq": last})
    for i in range(20):
        send_turn(c, s["id"], "after restart %d" % i, live2)
    lines.update(by_seq(live2.raw))
    new_last = last + 20 * 4
    assert sorted(lines) == list(range(1, new_last + 1))
    for after in (0, last - 3, last + 30):
        a, r = catch_up(d, s["id"], after)
        check_exact(a, new_last, after, lines)
        a.close()


def test_thinned_index_still_finds_every_event(make_daemon, ws):
    """Past 64 x 128 events the index thins out (every other position, twice
    the stride): catch-ups from anywhere stay exact, also after a restart."""
    d = make_daemon(config=SMALL_RING + "[log]\nfsync = no\n")
    turns = 2100
    c, s, live = make_history(d, ws, turns, text="t")
    last = 1 + turns * 4
    lines = by_seq(live.raw)
    assert len(lines) == last
    for after in (0, 4095, 8192, 8193, last - 20):
        a, r = catch_up(d, s["id"], after)
        check_exact(a, last, after, lines)
        a.close()
    d.stop()
    d.start()
    for after in (3, 8300):
        a, r = catch_up(d, s["id"], after)
        check_exact(a, last, after, lines)
        a.close()


def first_session_seq_in_log(c, sid):
    """The oldest event of the session the disk log still has, and whether
    the log has dropped records (a gap after seq 0)."""
    after, gap = 0, None
    while True:
        r = c.call("log.read", {"after_seq": after, "limit": 1000})["result"]
        if gap is None:
            gap = r["gap"]
        for rec in r["records"]:
            if rec["type"].startswith("session.") and rec["data"].get("session") == sid:
                return rec["data"]["seq"], gap
        assert r["more"], "no record of the session in the log"
        after = r["records"][-1]["seq"]


@pytest.mark.parametrize("ring", ["small", "ring64"])
def test_resync_only_when_a_snapshot_dropped_the_events(make_daemon, ws, ring):
    """Events are replayed from the ring or the log; only those in neither
    (a snapshot replaced their segments) need resync_required. With a ring
    of 64 the ring reaches back past the log's oldest event of the session:
    the events just before the ring are the ones that are gone."""
    ring_conf = SMALL_RING if ring == "small" else "[session]\nring_events = 64\n"
    d = make_daemon(config=ring_conf + "[log]\nmax_bytes = 1M\nsegment_bytes = 64K\n")
    c = d.conn()
    s = c.call("session.create", {"workspace": ws})["result"]
    live = raw_conn(d)
    live.call("session.attach", {"session": s["id"], "after_seq": 0})
    big = "z" * 4000
    for i in range(400):
        send_turn(c, s["id"], "%d %s" % (i, big), live)
        dl = c.call("daemon.status")["result"]["disklog"]
        if dl["first_seq"] > 1 and i > 20:
            break
    assert dl["first_seq"] > 1, "no segment was dropped"
    for i in range(3):
        send_turn(c, s["id"], "after %d" % i, live)
    lines = by_seq(live.raw)
    last = max(lines)
    first, gap = first_session_seq_in_log(c, s["id"])
    assert gap and first > 2

    def check(after):
        a, r = catch_up(d, s["id"], after)
        ring_first = r["first_seq"]
        if after + 1 >= min(first, ring_first):
            check_exact(a, last, after, lines)
        else:
            assert [ev(l)["type"] for l in a.raw] == ["resync_required", "replay_complete"]
            p = ev(a.raw[0])
            assert p["after_seq"] == after and "hint" in p and "reason" in p
            assert ev(a.raw[1])["replayed"] == 0
        a.close()
        return ring_first

    ring_first = check(last - 10)
    if ring == "ring64":
        assert ring_first < first    # the case this variant is for
    for after in (0, 1, first - 2, first - 1, first, ring_first - 2, ring_first - 1):
        check(after)
    # The same after a restart: the snapshot kept the log index.
    d.stop()
    d.start()
    ring_first = check(last - 10)
    for after in (1, first - 2, first - 1, ring_first - 2, ring_first - 1):
        check(after)


def rpc(id_, method, params):
    return json.dumps({"jsonrpc": "2.0", "id": id_, "method": method, "params": params})


def test_clients_that_leave_during_catch_up(make_daemon, ws):
    d = make_daemon(config=SMALL_RING + SMALL_QUEUE)
    c, s, live = make_history(d, ws, 150, text="x" * 4000)
    last = 1 + 150 * 4
    sid = s["id"]
    # Attach and close at once; attach then detach; attach twice.
    for script in ([rpc(1, "session.attach", {"session": sid, "after_seq": 0})],
                   [rpc(1, "session.attach", {"session": sid, "after_seq": 0}),
                    rpc(2, "session.detach", {"session": sid})],
                   [rpc(1, "session.attach", {"session": sid, "after_seq": 0}),
                    rpc(2, "session.attach", {"session": sid, "after_seq": 100})]):
        for _ in range(5):
            x = d.conn()
            x.send_raw(("\n".join(script) + "\n").encode())
            x.close()
    # Clients that do not read: their catch-ups wait on their full queues.
    stuck = [d.conn() for _ in range(3)]
    for x in stuck:
        x.send_raw((rpc(1, "session.attach", {"session": sid, "after_seq": 0}) + "\n").encode())
    wait_status(d, lambda st: st["sessions"]["catching_up"] == 3)
    # The session goes on meanwhile and the live client is not held up.
    send_turn(c, sid, "meanwhile", live)
    assert status(d)["sessions"]["catching_up"] == 3
    for x in stuck:
        x.close()
    st = no_catch_up(d)
    assert st["sessions"]["attached"] == 1 and st["clients"]["evicted"] == 0
    # Attaching again on the same connection restarts the stream: after the
    # second reply only the second catch-up's events come.
    y = raw_conn(d)
    y.send_raw(("\n".join([rpc(1, "session.attach", {"session": sid, "after_seq": 0}),
                           rpc(2, "session.attach", {"session": sid, "after_seq": last - 2})])
                + "\n").encode())
    read_until(y, lambda p: p["type"] == "replay_complete" and p["replayed"] == 6)
    k = [i for i, l in enumerate(y.lines) if json.loads(l).get("id") == 2][0]
    after_reply = [l for l in y.lines[k + 1:]]
    lines = by_seq(live.raw)
    assert after_reply[:-1] == [lines[q] for q in range(last - 1, last + 5)]
    assert ev(after_reply[-1])["type"] == "replay_complete"
    y.close()
    st = no_catch_up(d)
    assert st["sessions"]["attached"] == 1


def test_slow_reader_is_paced_not_evicted(make_daemon, ws):
    """A backlog many times the client's 64K queue arrives whole for a
    client that reads late: the catch-up waits for the queue to drain."""
    d = make_daemon(config=SMALL_RING + SMALL_QUEUE)
    c, s, live = make_history(d, ws, 200, text="y" * 4000)
    lines = by_seq(live.raw)
    assert sum(len(l) for l in lines.values()) > 10 * 64 * 1024
    a = raw_conn(d)
    a.request("session.attach", {"session": s["id"], "after_seq": 0})
    time.sleep(0.5)         # it does not read for a while
    assert status(d)["sessions"]["catching_up"] == 1
    check_exact(a, max(lines), 0, lines)
    st = no_catch_up(d)
    assert st["clients"]["evicted"] == 0


def test_session_closed_during_catch_up(make_daemon, ws):
    """A client still catching up when the session closes gets every event,
    the close last, then replay_complete, and is detached."""
    d = make_daemon(config=SMALL_RING + SMALL_QUEUE)
    c, s, live = make_history(d, ws, 150, text="w" * 4000)
    a = raw_conn(d)
    a.request("session.attach", {"session": s["id"], "after_seq": 0})
    wait_status(d, lambda st: st["sessions"]["catching_up"] == 1)
    time.sleep(0.2)
    assert status(d)["sessions"]["catching_up"] == 1    # not read: it waits
    r = c.call("session.close", {"session": s["id"]})
    assert r["result"]["closed"] is True
    read_until(live, lambda p: p["type"] == "session.state" and p["state"] == "closed")
    lines = by_seq(live.raw)
    check_exact(a, max(lines), 0, lines)
    k = read_until(a, is_type("replay_complete"))
    assert ev(a.raw[k - 1])["state"] == "closed"
    st = no_catch_up(d)
    assert st["sessions"]["attached"] == 0 and st["sessions"]["open"] == 0
    # The connection is still fine, and the session is gone.
    assert a.call("session.attach", {"session": s["id"]})["error"]["data"]["kind"] == \
        "session_not_found"


def test_many_clients_catch_up_while_events_flow(make_daemon, ws):
    d = make_daemon(config=SMALL_RING)
    c, s, live = make_history(d, ws, 50)
    errors = []
    more = 40

    def sender():
        try:
            cc = d.conn()
            for i in range(more):
                send_turn(cc, s["id"], "flow %d" % i, live)
        except Exception as e:     # reported by the main thread
            errors.append(e)

    t = threading.Thread(target=sender)
    t.start()
    clients = []
    afters = [0, 3, 17, 64, 90, 128, 150, 190, 200, 0, 5, 199]
    for i, after in enumerate(afters):
        a = raw_conn(d)
        a.request("session.attach", {"session": s["id"], "after_seq": after})
        clients.append((a, after))
        time.sleep(0.01 * (i % 3))
    t.join(120)
    assert not errors, errors
    last = 1 + (50 + more) * 4
    lines = by_seq(live.raw)
    assert sorted(lines) == list(range(1, last + 1))
    for a, after in clients:
        read_until(a, is_type("replay_complete"))
        read_until(a, seq_at_least(last))
        seqs = [ev(l)["seq"] for l in a.raw if ev(l)["type"] != "replay_complete"]
        assert seqs == list(range(after + 1, last + 1)), (after, seqs[:5], seqs[-5:])
        done = [i for i, l in enumerate(a.raw) if ev(l)["type"] == "replay_complete"]
        assert len(done) == 1
        # Everything before replay_complete is at or below its seq, everything after above.
        k = done[0]
        mark = ev(a.raw[k])["seq"]
        assert all(ev(l)["seq"] <= mark for l in a.raw[:k])
        assert all(ev(l)["seq"] > mark for l in a.raw[k + 1:])
        for l in a.raw[:k] + a.raw[k + 1:]:
            assert l == lines[ev(l)["seq"]]
    no_catch_up(d)
