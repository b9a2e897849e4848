"""System tests for the disk log: log.append and log.read on the
real gbrd, following and eviction, durability across SIGKILL, injected
storage errors, the disk budget, torn tails, corruption and --repair, and
`gbrctl log verify`."""
import errno
import json
import os
import random
import signal
import subprocess
import threading
import time

import pytest

import conftest
from conftest import GBRCTL

LOG_HEADER = 64          # segment header size (doc/DISKLOG.md)
CLEAN_OFFSET = 48        # the clean marker's 8 bytes in the header


# These tests count records by seq; the hash chain's heads (log.chain
# records, doc/DISKLOG.md) would be records of their own among them, so
# the chain is off here: test_logchain.py tests it, and the rest of the
# suite runs with it on (the default).
NO_CHAIN = "\n[log]\nchain = no\n"


@pytest.fixture
def make_daemon(tmpdir_short):
    made = []

    def make(config=None, env=None, start=True, args=()):
        root = os.path.join(tmpdir_short, "d%d" % len(made))
        os.makedirs(root, mode=0o700)
        d = conftest.Daemon(root, extra_env=env,
                            config=(config or "") + NO_CHAIN)
        made.append(d)
        if start:
            d.start(args)
        return d

    yield make
    for d in made:
        if d.proc is not None and d.proc.poll() is None:
            d.stop()
        elif d.proc is not None and d.proc.returncode not in (None,) and \
                d.proc.returncode not in d.exit_codes and \
                d.proc.returncode != -signal.SIGKILL:
            d.exit_codes.append(d.proc.returncode)
        d.check_clean()


@pytest.fixture
def daemon(make_daemon):
    return make_daemon()


def read_all(conn, after=0):
    """Every record after `after`, paging through log.read."""
    out = []
    while True:
        r = conn.call("log.read", {"after_seq": after, "limit": 1000})
        assert "result" in r, r
        recs = r["result"]["records"]
        out += recs
        if recs:
            after = recs[-1]["seq"]
        if not r["result"]["more"]:
            return out


def append(conn, data, type_="user.test", durable=True):
    r = conn.call("log.append", {"type": type_, "data": data, "durable": durable})
    return r


def segments(d):
    logdir = os.path.join(d.state, "log")
    return sorted(f for f in os.listdir(logdir) if f.endswith(".seg"))


def log_bytes(d):
    """Bytes of the log's files (segments and snapshots) on disk now."""
    logdir = os.path.join(d.state, "log")
    total = 0
    for f in os.listdir(logdir):
        if f.endswith((".seg", ".snap", ".tmp")):
            try:
                total += os.stat(os.path.join(logdir, f)).st_size
            except FileNotFoundError:
                pass
    return total


def status(d):
    c = d.conn()
    r = c.call("daemon.status")
    c.close()
    return r["result"]["disklog"]


def rss_kb(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def unseal_and_cut(path, cut):
    """What a crash leaves: the clean marker unset and a write cut short."""
    with open(path, "r+b") as f:
        f.seek(CLEAN_OFFSET)
        f.write(b"\0" * 8)
        f.seek(0, os.SEEK_END)
        f.truncate(f.tell() - cut)


def test_append_and_read(daemon):
    c = daemon.conn()
    r1 = append(c, {"a": 1})
    r2 = append(c, "two", durable=False)
    r3 = append(c, [1, 2, 3], type_="user.x-y_z.9")
    assert [r["result"]["seq"] for r in (r1, r2, r3)] == [1, 2, 3]
    recs = read_all(c)
    assert [(x["seq"], x["type"], x["data"]) for x in recs] == [
        (1, "user.test", {"a": 1}), (2, "user.test", "two"),
        (3, "user.x-y_z.9", [1, 2, 3])]
    assert all(abs(x["ts_ms"] / 1000 - time.time()) < 60 for x in recs)
    r = c.call("log.read", {"after_seq": 1, "limit": 1})
    assert [x["seq"] for x in r["result"]["records"]] == [2]
    assert r["result"]["more"] is True and r["result"]["last_seq"] == 3
    r = c.call("log.read", {"after_seq": 3})
    assert r["result"]["records"] == [] and r["result"]["more"] is False
    st = status(daemon)
    assert st["last_seq"] == 3 and st["next_seq"] == 4 and st["segments"] == 1
    assert st["previous_shutdown"] == "new" and st["storage_error"] is None


@pytest.mark.parametrize("params,kind,field", [
    ({"type": "session.create", "data": {}}, "invalid_params", "type"),
    ({"type": "user.", "data": {}}, "invalid_params", "type"),
    ({"type": "user.A", "data": {}}, "invalid_params", "type"),
    ({"type": "user.a b", "data": {}}, "invalid_params", "type"),
    ({"type": "user." + "a" * 60, "data": {}}, "invalid_params", "type"),
    ({"type": "user.x"}, "invalid_params", "data"),
    ({"type": 5, "data": {}}, "invalid_params", "type"),
    ({"type": "user.x", "data": {}, "durable": "yes"}, "invalid_params", "durable"),
    ({"type": "user.x", "data": {}, "extra": 1}, "invalid_params", "extra"),
    ({"type": "user.x", "data": "x" * 300000}, "too_large", "data"),
])
def test_append_rejects(daemon, params, kind, field):
    c = daemon.conn()
    r = c.call("log.append", params)
    assert r["error"]["data"]["kind"] == kind, r
    assert r["error"]["data"]["field"] == field, r
    assert read_all(c) == []


@pytest.mark.parametrize("params,field", [
    ({"limit": 0}, "limit"), ({"limit": 1001}, "limit"),
    ({"after_seq": -1}, "after_seq"), ({"follow": 1}, "follow"),
    ({"after_seq": "1"}, "after_seq"), ({"bogus": True}, "bogus"),
])
def test_read_rejects(daemon, params, field):
    c = daemon.conn()
    r = c.call("log.read", params)
    assert r["error"]["data"]["kind"] == "invalid_params", r
    assert r["error"]["data"]["field"] == field


def test_follow_streams_in_order(daemon):
    w = daemon.conn()
    for i in range(1500):
        w.request("log.append", {"type": "user.pre", "data": i, "durable": False})
    for i in range(1500):
        w.recv()
    f = daemon.conn()
    r = f.call("log.read", {"after_seq": 10, "limit": 5, "follow": True})
    assert [x["seq"] for x in r["result"]["records"]] == [11, 12, 13, 14, 15]
    assert r["result"]["following"] is True
    again = f.call("log.read", {"follow": True})
    assert again["error"]["data"]["kind"] == "busy"
    for i in range(300):
        append(w, {"live": i}, durable=(i % 2 == 0))
    # Catch-up records may arrive before the busy reply: call() kept them.
    pending = list(f.events)
    f.events.clear()
    seen = []
    deadline = time.time() + 20
    while len(seen) < 1500 + 300 - 15 and time.time() < deadline:
        m = pending.pop(0) if pending else f.recv()
        assert m.get("method") == "event", m
        p = m["params"]
        assert p["type"] == "log.record", p
        assert p["seq"] == p["record"]["seq"]
        seen.append(p["record"])
    seqs = [x["seq"] for x in seen]
    assert seqs == list(range(16, 1801)), "gap or duplicate in the stream"
    assert seen[-1]["data"] == {"live": 299} and seen[0]["data"] == 15
    assert status(daemon)["followers"] == 1
    f.close()
    time.sleep(0.3)
    assert status(daemon)["followers"] == 0


def test_follower_that_never_reads_is_evicted(make_daemon):
    # Under ASan a small quarantine, or freed memory would count as growth.
    d = make_daemon(config="[daemon]\nclient_queue_bytes = 64K\n",
                    env={"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:"
                         "exitcode=99:quarantine_size_mb=8:"
                         "thread_local_quarantine_size_kb=256"})
    lazy = d.conn()
    r = lazy.call("log.read", {"follow": True})
    assert r["result"]["following"] is True
    w = d.conn()
    append(w, "warm-up")
    rss0 = rss_kb(d.proc.pid)
    blob = "y" * 100000
    # 100 MB of records flow while the follower reads nothing at all.
    for burst in range(50):
        for i in range(20):
            w.request("log.append", {"type": "user.flood", "durable": False,
                                     "data": {"i": burst * 20 + i, "b": blob}})
        for i in range(20):
            m = w.recv()
            assert "result" in m, m
    rss1 = rss_kb(d.proc.pid)
    # The follower gets what fitted, a final evicted event, then the end.
    events = []
    lazy.sock.settimeout(10)
    try:
        while True:
            events.append(lazy.recv())
    except (EOFError, ConnectionResetError):
        pass
    assert events and events[-1]["params"]["type"] == "evicted", events[-1:]
    assert all(e["params"]["type"] == "log.record" for e in events[:-1])
    st = d.ctl_json("status")
    assert st["clients"]["evicted"] >= 1
    assert st["disklog"]["followers"] == 0
    # Memory stays flat: far less than the 100 MB that went by.
    assert rss1 - rss0 < 40 * 1024, (rss0, rss1)
    # The writer is still fine and the other client unaffected.
    assert append(w, "after")["result"]["seq"] == 1002


def test_sigkill_loses_no_acknowledged_record(make_daemon):
    d = make_daemon()
    rng = random.Random(1234)
    acked_all = {}
    for rnd in range(20):
        if rnd > 0:
            d.start()
        acked = []
        lock = threading.Lock()
        stop = threading.Event()

        def client(i):
            try:
                c = d.conn(timeout=30)
            except (EOFError, OSError, ValueError, AssertionError):
                return      # killed before or during its hello
            n = 0
            try:
                while not stop.is_set():
                    r = c.call("log.append", {"type": "user.kill",
                                              "data": {"r": rnd, "c": i, "n": n}})
                    if "result" in r:
                        with lock:
                            acked.append((r["result"]["seq"], (rnd, i, n)))
                    n += 1
            except (EOFError, OSError, ValueError):
                pass

        threads = [threading.Thread(target=client, args=(i,)) for i in range(16)]
        for t in threads:
            t.start()
        # A random moment once the appends are flowing.
        deadline = time.time() + 10
        while not acked and time.time() < deadline:
            time.sleep(0.005)
        time.sleep(rng.uniform(0.0, 0.5))
        d.kill9()
        stop.set()
        for t in threads:
            t.join(30)
        assert acked, "no record was acknowledged in round %d" % rnd
        for seq, key in acked:
            acked_all[key] = seq

        d.start()
        c = d.conn()
        recs = read_all(c)
        c.close()
        assert [x["seq"] for x in recs] == list(range(1, len(recs) + 1))
        keys = [(x["data"]["r"], x["data"]["c"], x["data"]["n"]) for x in recs]
        assert len(keys) == len(set(keys)), "a record is there twice"
        where = {k: x["seq"] for k, x in zip(keys, recs)}
        for key, seq in acked_all.items():
            assert where.get(key) == seq, "acknowledged %s at seq %d: %s" % (
                key, seq, where.get(key))
        # Each client's records are in the order it sent them.
        last = {}
        for r_, c_, n_ in keys:
            assert last.get((r_, c_), -1) < n_
            last[(r_, c_)] = n_
        assert status(d)["previous_shutdown"] == "crash"
        d.stop()
    st = d.ctl("log", "verify", "--state-dir", d.state)
    assert st.returncode == 0, st.stdout + st.stderr


def test_storage_errors_on_write_and_fsync(make_daemon, tmpdir_short):
    ff = os.path.join(tmpdir_short, "faults")
    d = make_daemon(env={"GBR_FAULT_FILE": ff})
    c = d.conn()
    for i in range(5):
        assert append(c, i)["result"]["seq"] == i + 1
    for site, err in (("disklog.write", "ENOSPC"), ("disklog.fsync", "EIO")):
        with open(ff, "w") as f:
            f.write("%s %s\n" % (site, err))
        time.sleep(0.1)
        for durable in (True, False) if site == "disklog.write" else (True,):
            r = append(c, {"lost": site}, durable=durable)
            assert r["error"]["data"]["kind"] == "storage_error", r
            assert r["error"]["data"]["errno"] == getattr(errno, err)
        st = status(d)
        assert st["storage_error"]["errno"] == getattr(errno, err)
        assert st["storage_error"]["op"] == ("write" if site == "disklog.write" else "fsync")
        # Still serving; reads are fine.
        assert [x["seq"] for x in read_all(c)] == [1, 2, 3, 4, 5] + \
            ([6] if site == "disklog.fsync" else [])
        os.unlink(ff)
        time.sleep(0.1)
        r = append(c, {"ok": site})
        assert "result" in r, r
        assert status(d)["storage_error"] is None
        assert status(d)["last_storage_error"]["errno"] == getattr(errno, err)
    recs = read_all(c)
    assert [x["data"] for x in recs] == [0, 1, 2, 3, 4, {"ok": "disklog.write"},
                                         {"ok": "disklog.fsync"}]
    c.close()
    d.stop()
    d.start()
    c = d.conn()
    assert [x["data"] for x in read_all(c)] == [0, 1, 2, 3, 4, {"ok": "disklog.write"},
                                                {"ok": "disklog.fsync"}]
    assert "fault injection armed" in d.log()


def test_disk_use_stays_under_budget_for_1gb(make_daemon):
    budget = 16 * 1024 * 1024
    d = make_daemon(config="[log]\nsegment_bytes = 1M\nmax_bytes = 16M\n")
    blob = b"z" * 200000
    total_wanted = 1024 * 1024 * 1024
    count = total_wanted // len(blob) + 1
    c = d.conn(timeout=60)
    window = threading.Semaphore(32)
    stop = threading.Event()
    res = {"ok": 0, "busy": 0, "other": [], "peak": 0}

    def receiver():
        got = 0
        while got < count:
            m = c.recv()
            got += 1
            window.release()
            if "result" in m:
                res["ok"] += 1
            elif m["error"]["data"]["kind"] == "busy":
                res["busy"] += 1
            else:
                res["other"].append(m)

    def sampler():
        while not stop.is_set():
            res["peak"] = max(res["peak"], log_bytes(d))
            time.sleep(0.002)

    threads = [threading.Thread(target=receiver), threading.Thread(target=sampler)]
    for t in threads:
        t.start()
    t0 = time.time()
    try:
        for n in range(count):
            window.acquire()
            # Encoded by hand: the test must not be slower than the daemon.
            c.send_raw(b'{"jsonrpc":"2.0","id":%d,"method":"log.append",'
                       b'"params":{"type":"user.bulk","durable":false,'
                       b'"data":{"n":%d,"b":"' % (n + 100, n) + blob + b'"}}}\n')
        threads[0].join(120)
    finally:
        stop.set()
        threads[1].join()
    elapsed = time.time() - t0
    st = status(d)
    assert res["other"] == [] and res["ok"] + res["busy"] == count
    assert res["ok"] * len(blob) > 0.9 * total_wanted, res
    assert st["snapshot"]["written"] > 10
    assert res["peak"] <= budget, "the log took %d bytes, budget %d" % (
        res["peak"], budget)
    assert st["bytes"] <= budget and not st["over_budget"]
    print("1 GB in %.1f s, peak %d bytes, %d snapshots, %d busy" % (
        elapsed, res["peak"], st["snapshot"]["written"], res["busy"]))
    # The log still reads: old records are gone (covered by snapshots).
    r = c.call("log.read", {"after_seq": 0, "limit": 1})
    assert r["result"]["gap"] is True and r["result"]["first_seq"] > 1000
    d.stop()
    assert d.ctl("log", "verify", "--state-dir", d.state).returncode == 0


def test_torn_tail_is_cut_and_reported(make_daemon):
    d = make_daemon()
    c = d.conn()
    for i in range(50):
        append(c, {"i": i})
    c.close()
    d.stop()
    seg = os.path.join(d.state, "log", segments(d)[-1])
    unseal_and_cut(seg, 7)
    v = d.ctl("log", "verify", "--state-dir", d.state)
    assert v.returncode == 1 and "TORN" in v.stdout, v.stdout
    d.start()
    st = status(d)
    assert st["torn_tail"] is not None and st["torn_tail"]["file"] == segments(d)[-1]
    assert st["previous_shutdown"] == "crash"
    assert "torn tail" in d.log()
    c = d.conn()
    assert [x["data"]["i"] for x in read_all(c)] == list(range(49))
    assert append(c, "next")["result"]["seq"] == 50
    c.close()
    d.stop()
    assert d.ctl("log", "verify", "--state-dir", d.state).returncode == 0


def test_corruption_refuses_start_and_repair_keeps_the_good_part(make_daemon):
    d = make_daemon()
    c = d.conn()
    for i in range(100):
        append(c, {"i": i, "pad": "p" * 40})
    c.close()
    d.stop()
    seg = os.path.join(d.state, "log", segments(d)[0])
    size = os.path.getsize(seg)
    with open(seg, "r+b") as f:
        f.seek(size // 2)
        b = f.read(1)
        f.seek(size // 2)
        f.write(bytes([b[0] ^ 0x04]))
    v = d.ctl("--json", "log", "verify", "--state-dir", d.state)
    out = json.loads(v.stdout)
    assert v.returncode == 1 and out["clean"] is False
    assert out["files"][0]["verdict"] == "CORRUPT"
    proc = d.start(wait=False)
    assert proc.wait(15) == 1
    text = d.log()
    assert segments(d)[0] in text and "offset" in text and "gbrd --repair" in text
    assert not os.path.exists(os.path.join(d.state, "log", "damaged"))
    d.start(args=["--repair"])
    c = d.conn()
    recs = read_all(c)
    assert 0 < len(recs) < 100
    assert [x["data"]["i"] for x in recs] == list(range(len(recs)))
    st = status(d)
    assert st["repaired"]["file"] == segments(d)[0]
    damaged = os.listdir(os.path.join(d.state, "log", "damaged"))
    assert len(damaged) == 1 and damaged[0].startswith(segments(d)[0])
    assert os.path.getsize(os.path.join(d.state, "log", "damaged", damaged[0])) == size
    assert append(c, "after repair")["result"]["seq"] == len(recs) + 1
    c.close()
    d.stop()
    assert d.ctl("log", "verify", "--state-dir", d.state).returncode == 0
    d.start()       # and it starts normally again
    assert status(d)["last_seq"] == len(recs) + 1


def test_gbrctl_log_and_verify(make_daemon):
    d = make_daemon()
    c = d.conn()
    for i in range(5):
        append(c, {"i": i})
    r = d.ctl("--json", "log", "--after", "2")
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert [x["seq"] for x in lines] == [3, 4, 5]
    r = d.ctl("log", "--limit", "2")
    assert r.returncode == 0 and len(r.stdout.splitlines()) == 2
    assert "user.test" in r.stdout
    assert d.ctl("log", "--after", "x").returncode == 2
    assert d.ctl("log", "--bogus").returncode == 2
    # --follow prints the backlog, then new records as they come.
    p = subprocess.Popen([GBRCTL, "--json", "log",
                          "--follow", "--after", "4"], env=d.env,
                         stdout=subprocess.PIPE, text=True)
    try:
        first = json.loads(p.stdout.readline())
        append(c, "live")
        second = json.loads(p.stdout.readline())
        assert (first["seq"], second["seq"], second["data"]) == (5, 6, "live")
    finally:
        p.kill()
        p.wait()
    # verify while running: clean, and says the log is in use.
    v = d.ctl("log", "verify", "--state-dir", d.state)
    assert v.returncode == 0 and "in use" in v.stdout and "clean" in v.stdout
    c.close()
    d.stop()
    v = d.ctl("log", "verify", "--state-dir", d.state)
    assert v.returncode == 0 and "sealed" in v.stdout
    v = d.ctl("log", "verify", "--state-dir", os.path.join(d.root, "nowhere"))
    assert v.returncode == 1
    assert d.ctl("log", "verify", "--bogus").returncode == 2
    # Without a daemon, `gbrctl log` cannot reach it.
    assert d.ctl("log").returncode == 3


def test_second_daemon_on_the_same_log_is_refused(make_daemon):
    from conftest import GBRD
    d = make_daemon()
    env = dict(d.env, GBR_SOCKET=os.path.join(d.root, "other.sock"))
    r = subprocess.run([GBRD, "-f"], env=env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       text=True, timeout=30)
    assert r.returncode == 1 and "in use by another gbrd" in r.stdout, r.stdout
    # The first one is unaffected, and verify's peek at the lock does not
    # stop a daemon from starting.
    c = d.conn()
    assert append(c, "still here")["result"]["seq"] == 1
    c.close()
    d.stop()
    for _ in range(5):
        assert d.ctl("log", "verify", "--state-dir", d.state).returncode == 0
    d.start()
    assert status(d)["last_seq"] == 1


@pytest.mark.parametrize("snapshot", [False, True])
def test_nul_bytes_in_text_survive_replay(make_daemon, tmpdir_short, snapshot):
    """A command's output may hold NUL bytes and still be text; jansson
    writes them as \\u0000 and refuses them on reading unless told. They
    once aborted gbrd (history re-read for session.history) and then kept
    it from starting (the replay called the record damaged). Now they pass
    through the history, clients, gbrctl log, a SIGKILL and the replay,
    and (snapshot) through a snapshot of the sessions' state."""
    ws = os.path.join(tmpdir_short, "ws")
    os.makedirs(ws)
    d = make_daemon(config="[log]\nsegment_bytes = 64K\nmax_bytes = 1M\n"
                    if snapshot else None)
    c = d.conn()
    sid = c.call("session.create", {"workspace": ws})["result"]["id"]
    out = "text with a NUL\0in it, and enough plain text around it\n"
    r = c.call("tool.call", {"session": sid, "tool": "run_command",
                             "args": {"argv": ["printf", out.replace("\0", "\\000")]}})
    res = r["result"].get("result", r["result"])
    assert res["stdout"] == out and res["stdout_encoding"] == "utf-8", r

    def texts(conn):
        h = conn.call("session.history", {"session": sid})
        assert "result" in h, h
        return json.dumps(h["result"]["messages"])

    before = texts(c)
    assert "\\u0000in it" in before
    # The clients read such lines too (gbrctl's parser is the clients' one).
    r = d.ctl("--json", "log")
    assert r.returncode == 0, r.stderr
    assert "\\u0000in it" in r.stdout
    if snapshot:
        # Past the budget: a snapshot of the live state, then the old
        # segments (with the command's records) go.
        for i in range(40):
            assert "result" in append(c, "x" * 60000)
        snaps = [f for f in os.listdir(os.path.join(d.state, "log"))
                 if f.endswith(".snap")]
        assert snaps and status(d)["first_seq"] > 3, status(d)
    c.close()
    d.kill9()
    d.start()
    c = d.conn()
    assert texts(c) == before
    c.close()
    d.stop()
    v = d.ctl("log", "verify", "--state-dir", d.state)
    assert v.returncode == 0, v.stdout + v.stderr
    d.check_clean()


def test_snapshot_whose_body_is_not_json_says_why(make_daemon):
    """A snapshot whose checksums hold but whose body does not parse (only a
    writer's bug could make one) is refused with the parser's own words and
    the repair command, not a bare "not a snapshot"."""
    import struct
    import zlib
    d = make_daemon(config="[log]\nsegment_bytes = 64K\nmax_bytes = 1M\n")
    c = d.conn()
    for i in range(40):
        assert "result" in append(c, "x" * 60000)
    c.close()
    d.stop()
    logdir = os.path.join(d.state, "log")
    snap = os.path.join(logdir, sorted(f for f in os.listdir(logdir)
                                       if f.endswith(".snap"))[-1])
    with open(snap, "rb") as f:
        hdr, body = bytearray(f.read(64)), f.read()
    body = b'{"seq":1,"modules":{"user": [1, 2,, 3]}}'
    struct.pack_into("<Q", hdr, 40, len(body))
    struct.pack_into("<I", hdr, 48, zlib.crc32(body))
    struct.pack_into("<I", hdr, 52, zlib.crc32(bytes(hdr[:52])))
    with open(snap, "wb") as f:
        f.write(hdr + body)
    proc = d.start(wait=False)
    assert proc.wait(15) == 1
    text = d.log()
    assert "body is not JSON: unexpected token near ','" in text, text
    assert "at byte 35" in text, text
    assert os.path.basename(snap) in text and "gbrd --repair" in text, text
    # --repair moves it aside and starts.
    d.start(args=["--repair"])
    d.stop()
    assert os.listdir(os.path.join(logdir, "damaged"))
