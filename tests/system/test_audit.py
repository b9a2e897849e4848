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
    """gbrctl with a pseudo-terminal as its stdin, as a person's would be."""
    master, slave = os.openpty()
    try:
        return subprocess.run([GBRCTL] + list(args), env=d.env, stdin=slave,
                              capture_output=True, text=True, timeout=30)
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
    assert "tty" not in decided[1]["who"]
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
