"""Environment profiles against a real gbrd: env.list/show/use/reload, a
session created with a profile, hot reload while a client is attached
(env.reloaded, the new rule on the next call, the system message
replaced), a broken profile (env.invalid, old rules kept), a burst of
saves giving one reload, a deleted profile, and a restart keeping the
session's choice."""
import os
import time

import pytest

from test_approvals import write_kind
from test_tools import evparams, wait_for


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.rename(tmp, path)


PROFILE = """[env]
allowed_root = .
protected_files = {prot}
[prompt]
system = {prompt}
"""


@pytest.fixture
def ws(tmpdir_short):
    d = os.path.join(tmpdir_short, "proj")
    os.makedirs(d)
    write(os.path.join(d, ".gbr_envs", "dev.ini"),
          PROFILE.format(prot="locked.txt", prompt="You are dev one."))
    return d


def session(d, ws, env="dev"):
    c = d.conn()
    r = c.call("session.create", {"workspace": ws, "env": env})
    assert "result" in r, r
    w = d.conn()
    w.call("session.attach", {"session": r["result"]["id"]})
    return c, w, r["result"]["id"]


def write_tool(c, sid, path):
    return c.call("tool.call", {"session": sid, "tool": "write_file",
                                "args": {"path": path, "content": "x"}})


def test_list_show_use(daemon, ws):
    c, w, sid = session(daemon, ws)
    l = c.call("env.list", {"session": sid})["result"]
    names = {e["name"] for e in l["envs"]}
    assert "dev" in names and l["current"] == "dev"
    l = c.call("env.list", {"workspace": ws})["result"]
    assert "dev" in {e["name"] for e in l["envs"]}
    sh = c.call("env.show", {"session": sid})["result"]
    assert sh["in_use"] is True and sh["name"] == "dev"
    h = c.call("session.history", {"session": sid})["result"]
    assert h["system"]["content"] == "You are dev one."
    # env.use: the built-in default (no default.ini here).
    r = c.call("env.use", {"session": sid, "env": "default"})["result"]
    assert r["env"] == "default"
    wait_for(w, lambda p: p["type"] == "env.reloaded" and p["env"] == "default")
    assert "result" in write_tool(c, sid, "locked.txt")
    r = c.call("env.use", {"session": sid, "env": "nope"})
    assert r["error"]["data"]["kind"] == "invalid_env"
    r = c.call("env.show", {"session": sid, "env": "nope"})
    assert r["error"]["data"]["kind"] == "invalid_env"
    r = c.call("env.use", {"session": sid, "env": "dev"})["result"]
    # Protected again: the write waits for a human (write_kind denies it).
    assert write_kind(c, sid, "locked.txt") == "protected_path"


def test_create_with_broken_profile_refused(daemon, ws):
    write(os.path.join(ws, ".gbr_envs", "bad.ini"), "[env]\nbogus_key = 1\n")
    r = daemon.conn().call("session.create", {"workspace": ws, "env": "bad"})
    assert r["error"]["data"]["kind"] == "invalid_env"
    assert "bad.ini" in r["error"]["data"]["error"]


def test_hot_reload(daemon, ws):
    c, w, sid = session(daemon, ws)
    c.call("session.send", {"session": sid, "text": "keep me"})
    assert "result" in write_tool(c, sid, "other.txt")
    write(os.path.join(ws, ".gbr_envs", "dev.ini"),
          PROFILE.format(prot="other.txt", prompt="You are dev two."))
    ev = wait_for(w, lambda p: p["type"] == "env.reloaded", timeout=20)[-1]
    assert "env.protected_files" in ev["changed"] or ev["changed"]
    assert write_kind(c, sid, "other.txt") == "protected_path"
    assert "result" in write_tool(c, sid, "locked.txt")
    h = c.call("session.history", {"session": sid})["result"]
    assert h["system"]["content"] == "You are dev two."
    assert [m["content"] for m in h["messages"] if m["role"] == "user"] == ["keep me"]

    # Broken: env.invalid, the old rules stay.
    write(os.path.join(ws, ".gbr_envs", "dev.ini"), "[env]\nallowed_root = ../..\n")
    ev = wait_for(w, lambda p: p["type"] == "env.invalid", timeout=20)[-1]
    assert "dev.ini" in ev["error"]
    assert write_kind(c, sid, "other.txt") == "protected_path"
    h = c.call("session.history", {"session": sid})["result"]
    assert h["system"]["content"] == "You are dev two."

    # Deleted: the last good one stays, and the clients hear why.
    os.unlink(os.path.join(ws, ".gbr_envs", "dev.ini"))
    ev = wait_for(w, lambda p: p["type"] == "env.invalid" and p.get("deleted"),
                  timeout=20)[-1]
    assert write_kind(c, sid, "other.txt") == "protected_path"


def test_hot_reload_beyond_the_inotify_workspaces(daemon, tmpdir_short):
    """Past 64 workspaces watched with inotify, the next ones are polled:
    an edit there still reloads, and daemon.status says how each is watched."""
    c = daemon.conn()
    last = None
    for i in range(70):
        d = os.path.join(tmpdir_short, "w%d" % i)
        write(os.path.join(d, ".gbr_envs", "dev.ini"),
              PROFILE.format(prot="locked.txt", prompt="You are %d." % i))
        r = c.call("session.create", {"workspace": d, "env": "dev"})
        assert "result" in r, r
        last = (d, r["result"]["id"])
    st = c.call("daemon.status")["result"]["security"]["env_watch"]
    assert st["watched_workspaces"] == 70
    # At most 64 with inotify, the rest polled. Fewer than 64 when this
    # user's inotify instances run out elsewhere (another gbrd's tests
    # at the same time): those are polled too, which is the point.
    assert st["inotify"] <= 64 and st["poll"] >= 6, st
    assert st["inotify"] + st["poll"] == 70, st
    d, sid = last
    w = daemon.conn()
    w.call("session.attach", {"session": sid})
    write(os.path.join(d, ".gbr_envs", "dev.ini"),
          PROFILE.format(prot="other.txt", prompt="You are polled."))
    wait_for(w, lambda p: p["type"] == "env.reloaded", timeout=20)
    h = c.call("session.history", {"session": sid})["result"]
    assert h["system"]["content"] == "You are polled."
    assert write_kind(c, sid, "other.txt") == "protected_path"


def test_burst_gives_one_reload(daemon, ws):
    c, w, sid = session(daemon, ws)
    path = os.path.join(ws, ".gbr_envs", "dev.ini")
    for i in range(50):
        write(path, PROFILE.format(prot="locked.txt", prompt="burst %d" % i))
    wait_for(w, lambda p: p["type"] == "env.reloaded", timeout=20)
    time.sleep(3)
    c.call("daemon.ping")
    w.call("daemon.ping")
    n = [p for p in evparams(w) if p["type"] == "env.reloaded"]
    assert len(n) == 1, n
    h = c.call("session.history", {"session": sid})["result"]
    assert h["system"]["content"] == "burst 49"


def test_restart_gives_each_session_its_own_profile(make_daemon, tmpdir_short):
    """At start the sessions of one workspace share the profile loaded for
    the first of them (session_env_recover's cache): each session must still get
    its own workspace's profile under its own name, and a later edit must
    reach exactly the sessions of that workspace."""
    wa = os.path.join(tmpdir_short, "a")
    wb = os.path.join(tmpdir_short, "b")
    write(os.path.join(wa, ".gbr_envs", "dev.ini"),
          PROFILE.format(prot="a.txt", prompt="A dev."))
    write(os.path.join(wa, ".gbr_envs", "other.ini"),
          PROFILE.format(prot="o.txt", prompt="A other."))
    write(os.path.join(wb, ".gbr_envs", "dev.ini"),
          PROFILE.format(prot="b.txt", prompt="B dev."))
    d = make_daemon()
    c = d.conn()
    want = {}
    for ws, env, prompt, prot in ((wa, "dev", "A dev.", "a.txt"),
                                  (wb, "dev", "B dev.", "b.txt"),
                                  (wa, "other", "A other.", "o.txt"),
                                  (wa, "dev", "A dev.", "a.txt"),
                                  (wb, "dev", "B dev.", "b.txt")):
        r = c.call("session.create", {"workspace": ws, "env": env})
        want[r["result"]["id"]] = (ws, env, prompt, prot)
    d.kill9()
    d.start()
    c = d.conn()
    for sid, (ws, env, prompt, prot) in want.items():
        assert c.call("env.show", {"session": sid})["result"]["name"] == env
        h = c.call("session.history", {"session": sid})["result"]
        assert h["system"]["content"] == prompt, (sid, ws, env)
        assert write_kind(c, sid, prot) == "protected_path", (sid, prot)
        others = {"a.txt", "b.txt", "o.txt"} - {prot}
        for o in others:
            assert write_kind(c, sid, o) == "ok", (sid, o)
    # An edit of a's dev profile reaches a's two dev sessions only.
    w = d.conn()
    for sid in want:
        w.call("session.attach", {"session": sid})
    write(os.path.join(wa, ".gbr_envs", "dev.ini"),
          PROFILE.format(prot="a.txt", prompt="A dev, edited."))
    a_dev = {sid for sid, v in want.items() if v[0] == wa and v[1] == "dev"}

    def reloaded():
        return {p["session"] for p in evparams(w)
                if p["type"] == "env.reloaded"}
    wait_for(w, lambda p: reloaded() >= a_dev, timeout=20)
    assert reloaded() == a_dev
    for sid, (ws, env, prompt, prot) in want.items():
        h = c.call("session.history", {"session": sid})["result"]
        expect = "A dev, edited." if sid in a_dev else prompt
        assert h["system"]["content"] == expect, (sid, ws, env)


def test_reload_forced(daemon, ws):
    c, w, sid = session(daemon, ws)
    r = c.call("env.reload", {"session": sid})["result"]
    assert r["env"] == "dev" and r["reloaded"] is True
    r = daemon.ctl("env", "reload", sid)
    assert r.returncode == 0, r.stderr
    r = daemon.ctl("env", "list", sid)
    assert r.returncode == 0 and "dev" in r.stdout
    r = daemon.ctl("env", "use", sid, "nope")
    assert r.returncode == 1


def test_restart_keeps_env(make_daemon, ws):
    d = make_daemon()
    c, w, sid = session(d, ws)
    write(os.path.join(ws, ".gbr_envs", "other.ini"),
          PROFILE.format(prot="x.txt", prompt="Other."))
    assert "result" in c.call("env.use", {"session": sid, "env": "other"})
    d.stop()
    d.start()
    c = d.conn()
    info = c.call("session.list")["result"]["sessions"][0]
    assert info["env"] == "other"
    assert c.call("env.show", {"session": sid})["result"]["name"] == "other"
    assert write_kind(c, sid, "x.txt") == "protected_path"
    h = c.call("session.history", {"session": sid})["result"]
    assert h["system"]["content"] == "Other."
    # A profile broken while the daemon was down: the session stays, on
    # the built-in default, with env.invalid.
    write(os.path.join(ws, ".gbr_envs", "other.ini"), "[env]\nnope = 1\n")
    d.stop()
    d.start()
    c = d.conn()
    c.call("session.attach", {"session": sid, "after_seq": 0})
    wait_for(c, lambda p: p["type"] == "env.invalid")
    assert c.call("env.show", {"session": sid})["result"]["name"] == "default"


def test_workspace_deleted_and_made_again(daemon, ws, tmpdir_short):
    """rm -rf of the project, then a fresh clone at the same path: the
    session follows the path, with the new folder's profile, its hot
    reload, and its files (as it would after a restart)."""
    import shutil
    c, w, sid = session(daemon, ws)
    assert write_kind(c, sid, "locked.txt") == "protected_path"
    shutil.rmtree(ws)
    gone = wait_for(w, lambda p: p["type"] == "workspace.gone")
    assert gone[0]["workspace"] == ws
    for tool, args in (("read_file", {"path": "a.txt"}),
                       ("write_file", {"path": "b.txt", "content": "x"}),
                       ("run_command", {"argv": ["true"]})):
        r = c.call("tool.call", {"session": sid, "tool": tool, "args": args})
        assert r["error"]["data"]["kind"] == "invalid_env", r
        assert "does not exist any more" in r["error"]["message"], r
    assert not os.path.exists(os.path.join(ws, "b.txt"))
    # Made again by someone else (anyone may, in a shared /tmp): refused.
    # (Only root can give a folder away; as another user this part waits.)
    os.makedirs(ws)
    if os.geteuid() == 0:
        os.chown(ws, 54321, 54321)
        r = c.call("tool.call", {"session": sid, "tool": "read_file",
                                 "args": {"path": "a.txt"}})
        assert r["error"]["data"]["kind"] == "invalid_env", r
        assert "belongs to uid 54321" in r["error"]["message"], r
        os.chown(ws, os.getuid(), os.getgid())
    # Made again, with other rules: they apply at once...
    write(os.path.join(ws, ".gbr_envs", "dev.ini"),
          PROFILE.format(prot="new-locked.txt", prompt="You are dev anew."))
    with open(os.path.join(ws, "a.txt"), "w") as f:
        f.write("new a\n")
    r = c.call("tool.call", {"session": sid, "tool": "read_file",
                             "args": {"path": "a.txt"}})
    assert r["result"]["result"]["content"] == "new a\n", r
    assert write_kind(c, sid, "new-locked.txt") == "protected_path"
    assert write_kind(c, sid, "locked.txt") == "ok"
    r = c.call("tool.call", {"session": sid, "tool": "run_command",
                             "args": {"argv": ["cat", "a.txt"]}})
    assert r["result"]["result"]["stdout"] == "new a\n", r
    # ...and the new folder's profile is watched: an edit is hot again.
    # (First let the report of the deletion, debounced up to 2 s, go by:
    # it reloads from disk too, and would hide a watch that is dead.)
    time.sleep(2.5)
    write(os.path.join(ws, ".gbr_envs", "dev.ini"),
          PROFILE.format(prot="later.txt", prompt="You are dev later."))
    wait_for(w, lambda p: p["type"] == "env.reloaded" and
             "later" in str(p), timeout=20)
    assert write_kind(c, sid, "later.txt") == "protected_path"
    # Moved away: the same as deleted, and moved back, it goes on.
    os.rename(ws, ws + "-moved")
    wait_for(w, lambda p: p["type"] == "workspace.gone" and
             p["seq"] > gone[0]["seq"])
    r = c.call("tool.call", {"session": sid, "tool": "run_command",
                             "args": {"argv": ["true"]}})
    assert "does not exist any more" in r["error"]["message"], r
    os.rename(ws + "-moved", ws)
    r = c.call("tool.call", {"session": sid, "tool": "run_command",
                             "args": {"argv": ["cat", "a.txt"]}})
    assert r["result"]["result"]["stdout"] == "new a\n", r
    assert write_kind(c, sid, "later.txt") == "protected_path"
    # A link put in its place is not followed.
    shutil.rmtree(ws)
    n = len([p for p in evparams(w) if p["type"] == "workspace.gone"])
    wait_for(w, lambda p: len([q for q in evparams(w)
                               if q["type"] == "workspace.gone"]) > n)
    other = os.path.join(tmpdir_short, "elsewhere")
    os.makedirs(other)
    with open(os.path.join(other, "a.txt"), "w") as f:
        f.write("not the project\n")
    os.symlink(other, ws)
    r = c.call("tool.call", {"session": sid, "tool": "read_file",
                             "args": {"path": "a.txt"}})
    assert r["error"]["data"]["kind"] == "invalid_env", r
    assert "now leads to " + other in r["error"]["message"], r
    r = c.call("tool.call", {"session": sid, "tool": "write_file",
                             "args": {"path": "x.txt", "content": "x"}})
    assert "error" in r and not os.path.exists(os.path.join(other, "x.txt"))


@pytest.mark.parametrize("snapshot", [False, True])
def test_restart_refuses_a_workspace_made_again_by_another_owner(
        make_daemon, ws, snapshot):
    """The folder's owner is part of the session's record (and of its
    snapshot): a workspace deleted and made again by someone else while
    gbrd was down is refused after the restart as well."""
    if os.geteuid() != 0:
        pytest.skip("only root can give a folder away")
    import shutil
    d = make_daemon(config="[log]\nsegment_bytes = 64K\nmax_bytes = 1M\n"
                    if snapshot else None)
    c, w, sid = session(d, ws)
    if snapshot:
        for i in range(40):
            r = c.call("log.append", {"type": "user.pad", "data": "x" * 60000})
            assert "result" in r, r
        snaps = [f for f in os.listdir(os.path.join(d.state, "log"))
                 if f.endswith(".snap")]
        assert snaps
    d.stop()
    shutil.rmtree(ws)
    write(os.path.join(ws, ".gbr_envs", "dev.ini"),
          PROFILE.format(prot="none.txt", prompt="Not yours."))
    os.chown(ws, 54321, 54321)
    d.start()
    c = d.conn()
    r = c.call("tool.call", {"session": sid, "tool": "list_directory",
                             "args": {"path": "."}})
    assert r["error"]["data"]["kind"] == "invalid_env", r
    assert "belongs to uid 54321" in r["error"]["message"], r
    os.chown(ws, os.getuid(), os.getgid())
    r = c.call("tool.call", {"session": sid, "tool": "list_directory",
                             "args": {"path": "."}})
    assert "result" in r, r


def test_gbrctl_env_list_marks_the_profile_in_use(daemon, ws):
    c, w, sid = session(daemon, ws)
    write(os.path.join(ws, ".gbr_envs", "other.ini"),
          PROFILE.format(prot="x.txt", prompt="Other."))
    lines = daemon.ctl("env", "list", sid).stdout.splitlines()
    marked = [l.split()[1] for l in lines if l.startswith("* ")]
    assert marked == ["dev"], lines
    assert any(l.split()[0] == "other" for l in lines if not l.startswith("*"))
    assert "result" in c.call("env.use", {"session": sid, "env": "other"})
    lines = daemon.ctl("env", "list", sid).stdout.splitlines()
    assert [l.split()[1] for l in lines if l.startswith("* ")] == ["other"], lines
    # A folder's listing has no session: nothing is marked.
    lines = daemon.ctl("env", "list", ws).stdout.splitlines()
    assert lines and not any(l.startswith("*") for l in lines), lines
