"""The shadow store on disk (issue 27): what no remembered change needs
is collected off the event loop, what a live change needs is never
collected (a rewind after a collection gives back the exact bytes), and
the store counts in [log] max_bytes: past it the oldest changes are
forgotten, their content goes, rewind says `gone` for them and still
undoes the newer ones."""
import base64
import hashlib
import os
import time

from test_rewind import call, changes, get, ok, put, rewind, seq_now, sh


def status(d):
    c = d.conn()
    r = c.call("daemon.status")["result"]
    c.close()
    return r


def store_dir(d):
    return os.path.join(d.state, "shadow")


def du(path):
    """Bytes on disk of a folder and everything in it (as du counts)."""
    n = 0
    for top, dirs, files in os.walk(path):
        for name in dirs + files:
            try:
                n += os.lstat(os.path.join(top, name)).st_blocks * 512
            except FileNotFoundError:
                pass
    return n


def loose(d, content):
    """The path a blob of these bytes has in the store, if it is there."""
    oid = hashlib.sha1(b"blob %d\0" % len(content) + content).hexdigest()
    for g in os.listdir(store_dir(d)):
        p = os.path.join(store_dir(d), g, "objects", oid[:2], oid[2:])
        if os.path.exists(p):
            return p
    return None


def wait_gc(d, pred, timeout=40):
    """Waits for a finished collection after which pred(status) holds."""
    end = time.time() + timeout
    runs = status(d)["shadow"]["gc_runs"]
    while time.time() < end:
        st = status(d)["shadow"]
        if st["gc_runs"] > runs and not st["running"] and pred(st):
            return st
        time.sleep(0.2)
    raise AssertionError("no collection did it: %r" % status(d)["shadow"])


def session(d, ws):
    c = d.conn()
    sid = c.call("session.create", {"workspace": ws})["result"]["id"]
    return {"c": c, "sid": sid, "ws": ws, "d": d}


def test_gc_removes_only_what_no_change_needs(make_daemon, tmpdir_short):
    """A closed session's contents are collected; everything an open
    session's changes need stays, and rewinds after the collection put
    back the exact bytes (text and binary), then undo themselves."""
    d = make_daemon()
    ws = os.path.join(tmpdir_short, "gcws")
    os.makedirs(ws)
    # A first session's contents: unneeded once it is closed.
    a = session(d, ws)
    junk = [b"junk one %s\n" % os.urandom(8).hex().encode(),
            b"junk two %s\n" % os.urandom(8).hex().encode()]
    for j in junk:
        ok(call(a, "write_file", path="junk.txt", content=j.decode()))
    assert loose(d, junk[0]) and loose(d, junk[1])
    # A second session's, some of them binary through a command.
    w = session(d, ws)
    put(w, "keep.txt", "kept 1\n")
    base = seq_now(w)
    ok(call(w, "write_file", path="keep.txt", content="kept 2\n"))
    binary = bytes(range(256)) * 3
    with open(os.path.join(ws, "bin.dat"), "wb") as f:
        f.write(binary)
    sh(w, "printf 'other' > bin.dat; echo made > made.txt")
    ok(call(w, "write_file", path="keep.txt", content="kept 3\n"))
    # Past the grace that keeps what was just stored, closing the first
    # session forgets its changes: junk one goes (junk two is what
    # junk.txt holds, so the store's index keeps it).
    time.sleep(2.5)
    a["c"].call("session.close", {"session": a["sid"]})
    st = wait_gc(d, lambda st: loose(d, junk[0]) is None)
    assert st["removed"] >= 1 and st["removed_bytes"] > 0, st
    assert st["bytes"] > 0 and st["stores"] == 1, st
    # Nothing the second session's changes need is gone: exact bytes.
    assert loose(d, b"kept 1\n") and loose(d, binary)
    ok(rewind(w, seq=base))
    assert get(w, "keep.txt") == "kept 1\n"
    with open(os.path.join(ws, "bin.dat"), "rb") as f:
        assert f.read() == binary
    assert get(w, "made.txt") is None
    # And after another collection, the rewind itself is undone too.
    r = changes(w)[-1]
    assert r["rewind"] is True
    wait_gc(d, lambda st: True)
    ok(rewind(w, seq=r["seq"] - 1))
    assert get(w, "keep.txt") == "kept 3\n" and get(w, "made.txt") == "made\n"


def test_store_stays_within_the_budget(make_daemon, tmpdir_short):
    """A 2 MiB budget, about 3 MiB of distinct contents written: the
    oldest changes are forgotten, the store shrinks on disk, log and
    store end within the budget, the oldest rewinds say gone (naming
    the point they can reach), the newest still undo to the byte."""
    budget = 2 << 20
    d = make_daemon(config="[log]\nsegment_bytes = 64K\nmax_bytes = 2M\n")
    ws = os.path.join(tmpdir_short, "budgetws")
    os.makedirs(ws)
    w = session(d, ws)
    c = w["c"]
    seqs, texts = [], []
    for i in range(100):
        text = base64.b64encode(os.urandom(24000)).decode()
        seqs.append(seq_now(w))
        texts.append(text)
        ok(call(w, "write_file", path="f%d.txt" % (i % 10), content=text))
    peak = du(store_dir(d))
    assert peak > 2 << 20, peak
    st = wait_gc(d, lambda st: st["forgotten"] > 0 and st["removed"] > 0 and
                 st["bytes"] + st["log_bytes"] <= budget)
    after = du(store_dir(d))
    assert after < peak * 3 // 4, (peak, after, st)
    assert after + st["log_bytes"] <= budget, (after, st)
    assert st["max_bytes"] == budget
    # The oldest: gone, and said.
    r = rewind(w, seq=seqs[0])
    assert r["error"]["data"]["kind"] == "gone", r
    assert "max_bytes" in r["error"]["message"]
    floor = r["error"]["data"]["floor"]
    assert floor > seqs[0]
    assert ok(c.call("session.changes", {"session": w["sid"]}))["floor"] == \
        floor
    # The newest: undone, exact bytes (f9.txt back to write 89's text).
    ok(rewind(w, seq=seqs[99]))
    assert get(w, "f9.txt") == texts[89]


def test_lost_content_is_gone_naming_it(make_daemon, tmpdir_short):
    """Content that left the store behind gbr's back (the store removed
    while gbrd ran) is not half restored: rewind answers gone, naming
    the file and its change, and changes nothing."""
    d = make_daemon()
    ws = os.path.join(tmpdir_short, "lostws")
    os.makedirs(ws)
    w = session(d, ws)
    put(w, "a.txt", "one\n")
    put(w, "b.txt", "bee\n")
    base = seq_now(w)
    ok(call(w, "write_file", path="a.txt", content="two\n"))
    ok(call(w, "write_file", path="b.txt", content="bee 2\n"))
    os.unlink(loose(d, b"one\n"))
    d.kill9()               # and its memory of the object with it
    d.start()
    w["c"] = d.conn()
    r = rewind(w, seq=base)
    assert r["error"]["data"]["kind"] == "gone", r
    missing = r["error"]["data"]["missing"]
    assert [m["path"] for m in missing] == ["a.txt"], missing
    assert missing[0]["seq"] > base
    assert missing[0]["content"] == hashlib.sha1(b"blob 4\0one\n").hexdigest()
    assert "a.txt" in r["error"]["message"]
    assert get(w, "a.txt") == "two\n" and get(w, "b.txt") == "bee 2\n"


def test_gc_keeps_what_a_command_in_flight_needs(make_daemon, tmpdir_short):
    """A command's snapshot taken before it ran is all that holds a file's
    old content while it runs (the store's index moved on with another
    session's command): a collection meanwhile keeps it, and undoing the
    command gives the content back."""
    import threading
    d = make_daemon()
    ws = os.path.join(tmpdir_short, "flightws")
    os.makedirs(ws)
    a, b = session(d, ws), session(d, ws)
    old = b"old content %s\n" % os.urandom(8).hex().encode()
    with open(os.path.join(ws, "g.txt"), "wb") as f:
        f.write(old)
    sh(a, "true")                     # the store's index now holds old
    base = seq_now(b)
    out = {}

    def slow():
        out["r"] = b["d"].conn().call("tool.call", {
            "session": b["sid"], "tool": "run_script",
            "args": {"language": "sh", "code": "sleep 7; rm -f g.txt"}})
    t = threading.Thread(target=slow)
    t.start()
    time.sleep(3)                     # old is past the grace
    put(a, "g.txt", "the person's\n")
    sh(a, "echo x > other.txt")       # the index holds the person's now
    wait_gc(d, lambda st: True, timeout=4)
    assert t.is_alive()               # the collection ran meanwhile
    t.join(30)
    assert "result" in out["r"], out
    assert loose(d, old), "the collection removed what the command needs"
    ok(rewind(b, seq=base, force=True))
    with open(os.path.join(ws, "g.txt"), "rb") as f:
        assert f.read() == old


def test_commands_after_a_collection_are_still_recorded(make_daemon,
                                                        tmpdir_short):
    """The store's index remembers the trees of its last snapshot and the
    next snapshot reuses those of the folders that did not change: a
    collection must keep them, or the next command's changes could not
    be compared (and would not be recorded)."""
    d = make_daemon()
    ws = os.path.join(tmpdir_short, "treews")
    for sub in ("a/b", "c"):
        os.makedirs(os.path.join(ws, sub))
    put({"ws": ws}, "a/b/x.txt", "x\n")
    put({"ws": ws}, "c/y.txt", "y\n")
    w = session(d, ws)
    sh(w, "echo 1 > a/one.txt")
    time.sleep(2.5)                   # its trees are past the grace
    ok(call(w, "write_file", path="kick.txt", content="k\n"))
    st = wait_gc(d, lambda st: True)
    assert st["removed"] >= 1, st     # the command's first trees went
    base = seq_now(w)
    sh(w, "echo 2 > c/two.txt")
    assert changes(w)[-1]["files"] == ["c/two.txt"]
    ok(rewind(w, seq=base))
    assert get(w, "c/two.txt") is None and get(w, "a/one.txt") == "1\n"
