"""gbrctl audit (issue 27): the trail read back from the disk log, against
a real gbrd: who approved and who denied (client, uid, pid, and the
terminal when it has one), a session grant given and revoked, what ran
and with which exit, which files the agent changed, a rewind, a profile
reload; one JSON object per line with --json, and --session and --since
narrowing it."""
import json
import os
import subprocess

from conftest import GBRCTL
from test_approvals import GLEAM_NEW, ask, new_session, ws  # noqa: F401
from test_approvals import answer


def audit(d, *args):
    p = d.ctl("audit", *args)
    assert p.returncode == 0, p.stderr
    return p.stdout


def audit_json(d, *args):
    return [json.loads(l) for l in audit(d, "--json", *args).splitlines()]


def ctl_on_a_terminal(d, *args):
    """gbrctl on a pseudo-terminal of its own (its controlling terminal
    and its stdin), as a person's would be."""
    import fcntl
    import termios
    master, slave = os.openpty()
    try:
        return subprocess.run(
            [GBRCTL] + list(args), env=d.env, stdin=slave,
            capture_output=True, text=True, timeout=30,
            start_new_session=True,
            preexec_fn=lambda: fcntl.ioctl(0, termios.TIOCSCTTY, 0))
    finally:
        os.close(master)
        os.close(slave)


def test_audit_trail(daemon, ws):  # noqa: F811
    c, sid = new_session(daemon, ws)
    # Approved from a terminal.
    rid, a = ask(c, sid, "write_file", {"path": "gleam.toml",
                                        "content": GLEAM_NEW})
    p = ctl_on_a_terminal(daemon, "approve", a["id"])
    assert p.returncode == 0, p.stderr
    assert "result" in answer(c, rid)
    # Denied with a reason, by a script.
    rid, b = ask(c, sid, "write_file", {"path": "gleam.toml",
                                        "content": "x = 1\n"})
    p = daemon.ctl("deny", b["id"], "--reason", "not now")
    assert p.returncode == 0, p.stderr
    answer(c, rid)
    # Approved for the session: a grant, then revoked.
    rid, g = ask(c, sid, "write_file", {"path": "gleam.toml",
                                        "content": "y = 2\n"})
    p = daemon.ctl("approve", g["id"], "--scope", "session")
    assert p.returncode == 0, p.stderr
    answer(c, rid)
    grants = daemon.conn().call("approval.grants")["result"]["grants"]
    assert len(grants) == 1
    assert daemon.ctl("revoke", grants[0]["id"]).returncode == 0
    # A command, a file change, a rewind, a profile reload.
    r = c.call("tool.call", {"session": sid, "tool": "run_script", "args": {
        "language": "sh", "code": "echo hi > made.txt; exit 3"}})
    assert "result" in r, r
    r = c.call("tool.call", {"session": sid, "tool": "write_file", "args": {
        "path": "notes.txt", "content": "n\n"}})
    assert "result" in r, r
    seq = [s for s in c.call("session.list")["result"]["sessions"]
           if s["id"] == sid][0]["seq"]
    r = c.call("tool.call", {"session": sid, "tool": "write_file", "args": {
        "path": "notes.txt", "content": "m\n"}})
    assert "result" in r, r
    assert "result" in c.call("session.rewind", {"session": sid, "seq": seq})
    assert "result" in c.call("env.reload", {"session": sid})

    rows = audit_json(daemon)
    what = [r["what"] for r in rows]
    for w in ("approval.asked", "approval.decided", "grant.given",
              "grant.revoked", "command", "workspace.changed",
              "workspace.rewound", "env.reloaded"):
        assert w in what, (w, what)
    decided = [r for r in rows if r["what"] == "approval.decided"]
    assert [r["state"] for r in decided] == ["approved", "denied", "approved"]
    assert all(r["session"] == sid and r["tool"] == "write_file" and
               r["target"] == "gleam.toml" for r in decided)
    for r in decided:
        assert r["who"]["client"].startswith("gbrctl")
        assert r["who"]["uid"] == os.getuid() and r["who"]["pid"] > 0
    assert decided[0]["who"]["tty"].startswith("/dev/pts/"), decided[0]
    assert decided[1]["reason"] == "not now"
    cmd = [r for r in rows if r["what"] == "command"][0]
    assert cmd["tool"] == "run_script" and cmd["exit_code"] == 3
    ch = {r["tool"]: [c["path"] for c in r["changes"]]
          for r in rows if r["what"] == "workspace.changed"}
    assert ch == {"write_file": ["notes.txt"], "run_script": ["made.txt"]} \
        or ch["run_script"] == ["made.txt"], ch
    rw = [r for r in rows if r["what"] == "workspace.rewound"][0]
    assert rw["who"]["uid"] == os.getuid()
    assert [c["path"] for c in rw["changes"]] == ["notes.txt"]
    seqs = [r["seq"] for r in rows]
    assert seqs == sorted(seqs)

    text = audit(daemon)
    assert "approved approval %s: write_file gleam.toml by gbrctl" % a["id"] \
        in text, text
    assert "denied   approval %s" % b["id"] in text and ": not now" in text
    assert "ran      run_script echo hi > made.txt; exit 3: exit 3" in text
    assert "changed  write_file: notes.txt" in text
    assert "revoked  grant" in text and "profile  default" in text

    # --session: another session's changes are left out; --since the future.
    c2, sid2 = new_session(daemon, ws)
    r = c2.call("tool.call", {"session": sid2, "tool": "write_file",
                              "args": {"path": "other.txt", "content": "o"}})
    assert "result" in r, r
    mine = audit_json(daemon, "--session", sid)
    assert mine and all(r.get("session") == sid for r in mine)
    other = audit_json(daemon, "--session", sid2)
    assert [r["what"] for r in other] == ["workspace.changed"]
    assert audit_json(daemon, "--since", "2999-01-01") == []
    assert len(audit_json(daemon, "--since", "1h")) == len(audit_json(daemon))
    p = daemon.ctl("audit", "--since", "yesterday-ish")
    assert p.returncode == 2 and "--since" in p.stderr


# ---- The hash chain and `gbrctl log verify` (doc/DISKLOG.md, "The chain") ----

import struct  # noqa: E402
import zlib  # noqa: E402

import pytest  # noqa: E402

SEG_HEADER = 64


def records_of(path):
    """The records of a segment: (offset, bytes) each."""
    with open(path, "rb") as f:
        b = f.read()
    out, off = [], SEG_HEADER
    while off + 8 <= len(b):
        (n,) = struct.unpack_from("<I", b, off)
        if n == 0:
            break
        out.append(b[off:off + 8 + n])
        off += 8 + n
    return b[:SEG_HEADER], out


def seal(rec):
    """A record with its CRC made right again (what a careful forger does)."""
    body = rec[8:]
    crc = zlib.crc32(rec[0:4] + body) & 0xffffffff
    return rec[0:4] + struct.pack("<I", crc) + body


def with_seq(rec, seq):
    return seal(rec[:8] + struct.pack("<Q", seq) + rec[16:])


def seq_of(rec):
    return struct.unpack_from("<Q", rec, 8)[0]


def type_of(rec):
    tl = rec[24]
    return rec[28:28 + tl].decode()


def write_segment(path, head, recs):
    with open(path, "wb") as f:
        f.write(head + b"".join(recs))


def chain_daemon(make_daemon, extra=""):
    return make_daemon(config="[log]\nchain_every = 10\n" + extra)


def fill(d, n, tag="r"):
    c = d.conn()
    for i in range(n):
        r = c.call("log.append", {"type": "user.test", "data": {
            "i": i, "tag": tag, "text": "abcdefgh" * 4}})
        assert "result" in r, r


def verify(d, *args):
    p = d.ctl("log", "verify", "--state-dir", d.state, *args)
    return p.returncode, p.stdout + p.stderr


def only_segment(d):
    segs = sorted(f for f in os.listdir(os.path.join(d.state, "log"))
                  if f.endswith(".seg"))
    assert len(segs) == 1, segs
    return os.path.join(d.state, "log", segs[0])


def test_a_valid_log_verifies_and_heads_are_in_it(make_daemon):
    d = chain_daemon(make_daemon)
    fill(d, 35)
    d.stop()
    rc, out = verify(d)
    assert rc == 0, out
    assert "chain" in out and "heads checked" in out, out
    head, recs = records_of(only_segment(d))
    assert [type_of(r) for r in recs].count("log.chain") >= 4


@pytest.mark.parametrize("how", ["flip", "delete", "reorder"])
def test_tampering_is_found(make_daemon, how):
    """A flipped byte, a deleted record, two records swapped: each with
    its checksum and the seqs made right again, so that only the chain can
    tell; log verify names where it breaks and exits 1."""
    d = chain_daemon(make_daemon)
    fill(d, 40)
    d.stop()
    path = only_segment(d)
    head, recs = records_of(path)
    users = [i for i, r in enumerate(recs) if type_of(r) == "user.test"]
    k = users[12]
    if how == "flip":
        r = recs[k]
        pos = r.index(b"abcdefgh")
        recs[k] = seal(r[:pos] + b"X" + r[pos + 1:])
    elif how == "delete":
        del recs[k]
        first = seq_of(recs[0])
        recs = [with_seq(r, first + i) for i, r in enumerate(recs)]
    else:
        a, b = recs[k], recs[k + 1]
        sa, sb = seq_of(a), seq_of(b)
        recs[k], recs[k + 1] = with_seq(b, sa), with_seq(a, sb)
    write_segment(path, head, recs)
    rc, out = verify(d)
    assert rc == 1, out
    assert "BROKEN" in out and "the chain is broken between seq" in out, out
    # It names the stretch that holds the change, not the whole log.
    m = __import__("re").search(r"between seq (\d+) and seq (\d+)", out)
    lo, hi = int(m.group(1)), int(m.group(2))
    assert lo <= seq_of(recs[k]) <= hi and hi - lo <= 12, out


def test_signed_heads_verify_with_the_key_only(make_daemon, tmpdir_short):
    key = os.path.join(tmpdir_short, "log-signing.key")
    p = subprocess.run([GBRCTL, "log", "keygen", key], capture_output=True,
                       text=True, timeout=30)
    assert p.returncode == 0, p.stderr
    pub = p.stdout.strip()
    assert len(pub) == 64 and oct(os.stat(key).st_mode & 0o777) == "0o600"
    assert open(key + ".pub").read().strip() == pub
    d = chain_daemon(make_daemon, "signing_key = %s\n" % key)
    fill(d, 25)
    d.stop()
    rc, out = verify(d, "--key", pub)
    assert rc == 0 and "signed with this key" in out, out
    rc, out = verify(d, "--key", key + ".pub")
    assert rc == 0, out
    other = subprocess.run([GBRCTL, "log", "keygen", key + "2"],
                           capture_output=True, text=True).stdout.strip()
    rc, out = verify(d, "--key", other)
    assert rc == 1 and "bad signature" in out, out
    # A forger who rewrites a record and every head after it still lacks
    # the key: here, one head's hash changed.
    path = only_segment(d)
    head, recs = records_of(path)
    k = [i for i, r in enumerate(recs) if type_of(r) == "log.chain"][1]
    r = recs[k]
    pos = r.index(b'"head":"') + 8
    c = b"0" if r[pos:pos + 1] != b"0" else b"1"
    recs[k] = seal(r[:pos] + c + r[pos + 1:])
    write_segment(path, head, recs)
    rc, out = verify(d, "--key", pub)
    assert rc == 1 and "BROKEN" in out, out


def test_chain_verifies_after_snapshots_dropped_old_segments(make_daemon):
    d = chain_daemon(make_daemon, "segment_bytes = 64K\nmax_bytes = 1M\n")
    c = d.conn()
    for i in range(3000):
        r = c.call("log.append", {"type": "user.test", "data": {
            "i": i, "pad": "p" * 300}})
        assert "result" in r, r
    st = c.call("daemon.status")["result"]
    d.stop()
    files = os.listdir(os.path.join(d.state, "log"))
    assert any(f.endswith(".snap") for f in files), files
    first = min(int(f[:16], 16) for f in files if f.endswith(".seg"))
    assert first > 1, (files, st)        # old segments are gone
    rc, out = verify(d)
    assert rc == 0, out
    assert "heads checked" in out, out
    # And gbrd carries the chain on across the restart.
    d.start()
    fill(d, 15, tag="after")
    d.stop()
    rc, out = verify(d)
    assert rc == 0, out


def test_chain_leaves_out_writes_that_failed(make_daemon, tmpdir_short):
    """gbrd hashes a record into the chain on its writer thread once the
    record is in the file. A write that fails half way (the disk full) is
    cut off and its seqs are given out again to other records: the chain
    must hold the records that are there, not those that failed, so log
    verify passes and the heads vouch for every record up to the last,
    across a restart too."""
    import re
    import time
    ff = os.path.join(tmpdir_short, "faults")
    d = make_daemon(config="[log]\nchain_every = 10\n",
                    env={"GBR_FAULT_FILE": ff})
    fill(d, 15)
    c = d.conn()
    with open(ff, "w") as f:
        f.write("disklog.write ENOSPC\n")
    time.sleep(0.1)
    for durable in (True, False):
        r = c.call("log.append", {"type": "user.test", "durable": durable,
                                  "data": {"lost": "lost-record"}})
        assert r["error"]["data"]["kind"] == "storage_error", r
    os.unlink(ff)
    time.sleep(0.1)
    c.close()
    fill(d, 15, tag="healed")
    d.stop()
    head, recs = records_of(only_segment(d))
    assert not any(b"lost-record" in r for r in recs)
    last = seq_of(recs[-1])
    rc, out = verify(d)
    assert rc == 0, out
    m = re.search(r"up to seq (\d+) vouched", out)
    assert m and int(m.group(1)) == last - 1, (last, out)
    d.start()
    fill(d, 12, tag="restarted")
    d.stop()
    rc, out = verify(d)
    assert rc == 0, out
    head, recs = records_of(only_segment(d))
    m = re.search(r"up to seq (\d+) vouched", out)
    assert m and int(m.group(1)) == seq_of(recs[-1]) - 1, out
