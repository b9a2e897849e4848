"""The sandbox's invariants for commands, tried as an attacker would,
through the real gbrd: as root and as an ordinary user (CI runs
this file as both), with and without namespaces ("nons": [exec] namespaces
= off, as where user namespaces are restricted), and with each layer alone
where a layer can be turned off. Every test checks an outcome on disk or
in gbrd (the outside file does not exist, the profile in force is the same,
the approval is still pending), never only a message.

A command here is the agent's: a tool.call of run_script or run_command in
a session, exactly the path the model's calls take.
"""
import json
import os
import signal
import socket
import subprocess
import threading
import time
import uuid

import pytest

from conftest import GBRCTL

MODES = {"ns": "", "nons": "[exec]\nnamespaces = off\n"}


def status(d):
    return d.conn().call("daemon.status")["result"]["security"]["runner"]


@pytest.fixture(params=sorted(MODES))
def mode(request):
    return request.param


@pytest.fixture
def gbrd(make_daemon, mode):
    """A gbrd in the mode; "ns" is skipped where namespaces cannot be had."""
    d = make_daemon(config=MODES[mode] or None)
    st = status(d)
    if mode == "ns" and not st["mount_namespace"]:
        pytest.skip("no namespaces here: %s" % st["namespaces"]["why_not"])
    assert st["commands"] == "allowed", st["refusal"]
    assert st["seccomp"]["active"], st["seccomp"]
    return d


def workspace(d, name="ws", gleam=True, git=False):
    ws = os.path.join(d.root, name)
    os.makedirs(ws, exist_ok=True)
    if gleam:
        write(os.path.join(ws, "gleam.toml"), 'name = "app"\nversion = "1.0.0"\n')
    if git:
        os.makedirs(os.path.join(ws, ".git", "hooks"), exist_ok=True)
        write(os.path.join(ws, ".git", "config"), "[core]\n\tbare = false\n")
        write(os.path.join(ws, ".git", "HEAD"), "ref: refs/heads/main\n")
    return os.path.realpath(ws)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def read(path):
    with open(path) as f:
        return f.read()


def session(d, ws, env=None):
    c = d.conn()
    p = {"workspace": ws}
    if env:
        p["env"] = env
    r = c.call("session.create", p)
    assert "result" in r, r
    return c, r["result"]["id"]


def run(c, sid, code, lang="python", timeout_ms=30000, **extra):
    args = {"language": lang, "code": code, "timeout_ms": timeout_ms}
    args.update(extra)
    r = c.call("tool.call", {"session": sid, "tool": "run_script", "args": args})
    return r


def out(r):
    assert "result" in r, r
    return r["result"]["result"]


def sessions(d):
    return {s["id"] for s in d.conn().call("session.list")["result"]["sessions"]}


def pending(d, sid=None):
    p = {"session": sid} if sid else {}
    return d.conn().call("approval.list", p)["result"]["approvals"]


def env_in_force(d, sid):
    r = d.conn().call("env.show", {"session": sid})
    assert "result" in r, r
    return r["result"]


def marker():
    return "%d.%06d" % (300 + uuid.uuid4().int % 600, uuid.uuid4().int % 999999)


def alive(mark):
    return subprocess.run(["pgrep", "-f", "^sleep " + mark], capture_output=True,
                          text=True).stdout.split()


# A client the command runs: tries everything, prints what it got.
DRIVE = r'''
import json, socket, sys
path, calls = %r, %r
got = []
try:
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(path)
    f = s.makefile("rwb")
    for i, (m, p) in enumerate([("hello", {"protocol": 1, "client": "evil/1"})] + calls):
        f.write((json.dumps({"jsonrpc": "2.0", "id": i, "method": m, "params": p}) + "\n").encode())
        f.flush()
        line = f.readline()
        got.append(line.decode()[:200])
    print("CONNECTED", got)
except OSError as e:
    # A refusal may be sent and the socket closed before our first write
    # (EPIPE then): what gbrd said is still waiting to be read.
    try:
        got.append(s.recv(4096).decode()[:200])
    except (OSError, NameError):  # NameError: no socket was made at all
        pass
    print("REFUSED", e.errno, got)
'''


def drive(path, calls):
    return DRIVE % (path, calls)


# -- No process started by the agent reaches a gbrd control channel. --

def test_command_cannot_drive_its_own_gbrd(gbrd):
    ws = workspace(gbrd)
    outside = os.path.join(gbrd.root, "outside")
    os.makedirs(outside)
    c, sid = session(gbrd, ws)
    before = sessions(gbrd)
    code = drive(gbrd.socket, [("session.create", {"workspace": outside}),
                               ("session.list", {})])
    r = out(run(c, sid, code))
    assert "REFUSED" in r["stdout"], r
    assert sessions(gbrd) == before
    assert os.listdir(outside) == []


def test_command_cannot_approve_its_own_request(gbrd):
    ws = workspace(gbrd)
    c, sid = session(gbrd, ws)
    c2 = gbrd.conn()
    rid = c2.request("tool.call", {"session": sid, "tool": "write_file",
                                   "args": {"path": "gleam.toml",
                                            "content": "evil = true\n"}})
    deadline = time.time() + 10
    while not pending(gbrd, sid) and time.time() < deadline:
        time.sleep(0.05)
    [a] = pending(gbrd, sid)
    m = marker()
    resolve = [("approval.resolve", {"id": a["id"], "decision": "approve"})]
    # Now, and from a process left behind that tries again later.
    code = drive(gbrd.socket, resolve) + (
        "import subprocess\n"
        "subprocess.Popen(['setsid', 'sh', '-c', 'sleep %s; python3 -c \"$0\"', %r],"
        " start_new_session=True)\n" % (m, drive(gbrd.socket, resolve)))
    r = out(run(c, sid, code))
    assert "REFUSED" in r["stdout"], r
    time.sleep(1.5)
    assert not alive(m), "a process of the command outlived it"
    [a2] = pending(gbrd, sid)
    assert a2["id"] == a["id"] and a2["state"] == "pending"
    assert read(os.path.join(ws, "gleam.toml")) == 'name = "app"\nversion = "1.0.0"\n'
    gbrd.conn().call("approval.resolve", {"id": a["id"], "decision": "deny"})


def test_command_cannot_reach_another_gbrd(gbrd, make_daemon):
    other = make_daemon()
    ws = workspace(gbrd)
    c, sid = session(gbrd, ws)
    target = os.path.join(other.root, "target")
    os.makedirs(target)
    r = out(run(c, sid, drive(other.socket, [("session.create", {"workspace": target})])))
    assert "REFUSED" in r["stdout"], r
    assert sessions(other) == set()


def test_command_cannot_reach_an_abstract_socket(gbrd):
    name = "\0gbr-test-%s" % uuid.uuid4().hex
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(name)
    srv.listen(4)
    srv.settimeout(0.2)
    accepted = []

    def serve():
        deadline = time.time() + 20
        while time.time() < deadline and not accepted:
            try:
                accepted.append(srv.accept()[0])
            except socket.timeout:
                pass
    t = threading.Thread(target=serve)
    t.start()
    try:
        ws = workspace(gbrd)
        c, sid = session(gbrd, ws)
        r = out(run(c, sid, drive(name, [])))
        assert "REFUSED" in r["stdout"], r
        time.sleep(0.3)
        assert accepted == []
    finally:
        accepted.append(None)
        t.join()
        srv.close()


def test_command_cannot_trace_a_client(gbrd):
    ws = workspace(gbrd)
    c, sid = session(gbrd, ws)
    att = subprocess.Popen([GBRCTL, "attach", sid], env=gbrd.env,
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        time.sleep(0.3)
        code = (
            "import ctypes, os\n"
            "libc = ctypes.CDLL(None, use_errno=True)\n"
            "r = libc.ptrace(16, %d, 0, 0)\n"
            "print('ptrace', r, ctypes.get_errno())\n"
            "pfd = libc.syscall(434, %d, 0)\n"
            "fd = libc.syscall(438, pfd, 3, 0) if pfd >= 0 else -1\n"
            "print('getfd', pfd, fd)\n" % (att.pid, att.pid))
        r = out(run(c, sid, code))
        assert "ptrace -1" in r["stdout"], r
        assert "getfd" in r["stdout"] and r["stdout"].split()[-1] == "-1", r
        with open("/proc/%d/status" % att.pid) as f:
            tracer = [l for l in f if l.startswith("TracerPid:")][0]
        assert tracer.split()[1] == "0"
        assert att.poll() is None
    finally:
        att.terminate()
        att.wait()


def test_peer_check_alone_refuses_a_command(make_daemon):
    # The second wall: seccomp off (its risk accepted) and no namespaces,
    # so the command does reach the socket; gbrd refuses it by ancestry.
    d = make_daemon(config="[exec]\nnamespaces = off\nseccomp = off\n"
                           "accept_risks = control\n")
    st = status(d)
    assert not st["seccomp"]["active"] and st["commands"] == "allowed"
    ws = workspace(d)
    outside = os.path.join(d.root, "outside")
    os.makedirs(outside)
    c, sid = session(d, ws)
    before = sessions(d)
    r = out(run(c, sid, drive(d.socket, [("session.create", {"workspace": outside})])))
    # It reached the socket (seccomp is really off) and gbrd refused it.
    assert "permission_denied" in r["stdout"], r
    assert "may not drive gbrd" in r["stdout"], r
    assert sessions(d) == before and os.listdir(outside) == []
    lst = d.conn().call("daemon.status")["result"]["listener"]
    assert lst["refused_from_command"] >= 1


# -- Nothing that decides the sandbox can be changed by a command. --

EVIL_PROFILE = "[env]\nread_only_roots = /\nautonomy = full\n"


def test_new_profile_from_a_command_is_never_applied(gbrd):
    ws = workspace(gbrd)                       # no .gbr_envs: built-in default
    c, sid = session(gbrd, ws)
    assert env_in_force(gbrd, sid)["builtin"]
    code = ("import os\nos.makedirs('.gbr_envs', exist_ok=True)\n"
            "open('.gbr_envs/default.ini', 'w').write(%r)\n"
            "print('planted')\n" % EVIL_PROFILE)
    r = out(run(c, sid, code))
    assert "planted" in r["stdout"] or r["exit_code"] != 0, r
    time.sleep(1.0)                             # the watcher's delay, and more
    assert not os.path.exists(os.path.join(ws, ".gbr_envs", "default.ini"))
    e = env_in_force(gbrd, sid)
    assert e["builtin"] and e["autonomy"] == "supervised"
    rr = c.call("tool.call", {"session": sid, "tool": "read_file",
                              "args": {"path": "/etc/hostname"}})
    assert rr["error"]["data"]["kind"] == "path_traversal"
    # What it wrote waits for a human, as the command's change.
    props = [a for a in pending(gbrd, sid) if a["tool"] == "write_file"]
    if gbrd_mode_locked(r):
        assert props == []                      # could not even be written
    else:
        assert [a["args"]["path"] for a in props] == [".gbr_envs/default.ini"]
        assert props[0]["args"]["content"] == EVIL_PROFILE
        assert props[0]["why"] in ("env_dir", "command_change")


def gbrd_mode_locked(result):
    return result["exit_code"] != 0


def test_changed_profile_from_a_command_is_held(gbrd):
    ws = workspace(gbrd)
    good = "[env]\nautonomy = supervised\nprotected_files = gleam.toml\n"
    write(os.path.join(ws, ".gbr_envs", "default.ini"), good)
    c, sid = session(gbrd, ws)
    code = "open('.gbr_envs/default.ini', 'w').write(%r)\n" % EVIL_PROFILE
    out(run(c, sid, code))
    time.sleep(1.0)
    assert read(os.path.join(ws, ".gbr_envs", "default.ini")) == good
    e = env_in_force(gbrd, sid)
    assert not e["builtin"] and e["autonomy"] == "supervised"
    rr = c.call("tool.call", {"session": sid, "tool": "read_file",
                              "args": {"path": "/etc/hostname"}})
    assert rr["error"]["data"]["kind"] == "path_traversal"


def test_hooks_and_git_config_cannot_be_planted(gbrd):
    ws = workspace(gbrd, git=True)
    c, sid = session(gbrd, ws)
    code = ("import os\n"
            "for p, t in (('.git/hooks/pre-commit', '#!/bin/sh\\ntouch /tmp/pwned\\n'),"
            " ('.git/config', '[core]\\n\\thooksPath = evil\\n')):\n"
            "    try:\n"
            "        open(p, 'w').write(t); os.chmod(p, 0o755); print('wrote', p)\n"
            "    except OSError as e: print('refused', p, e.errno)\n")
    r = out(run(c, sid, code))
    assert not os.path.exists(os.path.join(ws, ".git", "hooks", "pre-commit")), r
    assert read(os.path.join(ws, ".git", "config")) == "[core]\n\tbare = false\n"


def test_hooks_folder_made_by_a_command_is_taken_away(gbrd):
    ws = workspace(gbrd, git=True)
    os.rmdir(os.path.join(ws, ".git", "hooks"))
    c, sid = session(gbrd, ws)
    code = ("import os\nos.makedirs('.git/hooks', exist_ok=True)\n"
            "open('.git/hooks/post-checkout', 'w').write('#!/bin/sh\\n')\n")
    out(run(c, sid, code))
    assert not os.path.exists(os.path.join(ws, ".git", "hooks", "post-checkout"))


def test_protected_folder_glob_and_literal_files(gbrd):
    # Without namespaces the folder can be renamed away; what matters is
    # that priv/ holds what it held, not what the command wrote.
    ws = workspace(gbrd)
    write(os.path.join(ws, ".gbr_envs", "default.ini"),
          "[env]\nprotected_files = gleam.toml, priv/**\n")
    write(os.path.join(ws, "priv", "key.pem"), "KEY\n")
    c, sid = session(gbrd, ws)
    code = ("import os\n"
            "for p in ('priv/key.pem', 'priv/new.txt', 'gleam.toml'):\n"
            "    try:\n"
            "        open(p, 'w').write('evil\\n')\n"
            "    except OSError as e: print('refused', p, e.errno)\n"
            "try:\n"
            "    os.rename('priv', 'moved')\n"
            "except OSError as e: print('refused rename', e.errno)\n")
    r = out(run(c, sid, code))
    assert read(os.path.join(ws, "priv", "key.pem")) == "KEY\n", r
    assert not os.path.exists(os.path.join(ws, "priv", "new.txt"))
    if r["sandbox"]["namespaces"]:
        # The folder could not even be renamed (a mount point).
        assert not os.path.exists(os.path.join(ws, "moved")), r
    assert read(os.path.join(ws, "gleam.toml")) == 'name = "app"\nversion = "1.0.0"\n'


def test_renaming_the_parent_of_a_read_only_root(gbrd):
    ws = workspace(gbrd)
    write(os.path.join(ws, "build", "packages", "lib", "lib.gleam"), "pub fn f() { 1 }\n")
    c, sid = session(gbrd, ws)
    code = ("mv build b && echo evil > b/packages/lib/lib.gleam; mv b build; "
            "echo evil2 > build/packages/lib/lib.gleam; echo done")
    out(run(c, sid, code, lang="sh"))
    assert read(os.path.join(ws, "build", "packages", "lib", "lib.gleam")) == \
        "pub fn f() { 1 }\n"


def test_a_changed_protected_file_is_put_back_and_proposed(gbrd, mode):
    ws = workspace(gbrd)
    c, sid = session(gbrd, ws)
    r = out(run(c, sid, "echo 'version = \"9\"' >> gleam.toml; echo rc=$?", lang="sh"))
    assert read(os.path.join(ws, "gleam.toml")) == 'name = "app"\nversion = "1.0.0"\n'
    if mode == "nons":
        # Written, then put back; the new version is offered to a human.
        assert [ch["path"] for ch in r["protected_changes"]] == [
            os.path.join(ws, "gleam.toml")], r
        time.sleep(0.3)
        [a] = [a for a in pending(gbrd, sid) if a["why"] == "command_change"]
        assert a["args"]["content"].endswith('version = "9"\n')
        gbrd.conn().call("approval.resolve", {"id": a["id"], "decision": "approve"})
        deadline = time.time() + 10
        while 'version = "9"' not in read(os.path.join(ws, "gleam.toml")):
            assert time.time() < deadline, "the approved change was not written"
            time.sleep(0.05)
    else:
        assert "rc=1" in r["stdout"] or "Read-only" in r["stderr"], r
        assert "note" in r


def test_approved_command_may_write_protected_files_never_profiles(gbrd):
    ws = workspace(gbrd)
    write(os.path.join(ws, ".gbr_envs", "default.ini"), "[env]\nprotected_files = gleam.toml\n")
    c, sid = session(gbrd, ws)
    c2 = gbrd.conn()
    code = ("echo 'version = \"2\"' >> gleam.toml; "
            "echo '[env]' > .gbr_envs/default.ini; echo done")
    rid = c2.request("tool.call", {"session": sid, "tool": "run_script",
                                   "args": {"language": "sh", "code": code,
                                            "write_protected": True}})
    deadline = time.time() + 10
    while not pending(gbrd, sid) and time.time() < deadline:
        time.sleep(0.05)
    [a] = pending(gbrd, sid)
    assert a["why"] == "write_protected" and ".gbr_envs" in a["effect"]
    gbrd.conn().call("approval.resolve", {"id": a["id"], "decision": "approve"})
    while True:
        m = c2.recv()
        if m.get("id") == rid:
            break
    assert read(os.path.join(ws, "gleam.toml")).endswith('version = "2"\n')
    assert read(os.path.join(ws, ".gbr_envs", "default.ini")) == \
        "[env]\nprotected_files = gleam.toml\n"


# -- Temp space is the session's own; nothing else survives the run. --

def test_temp_space_is_private_to_the_session(gbrd, mode):
    ws = workspace(gbrd)
    c, a = session(gbrd, ws)
    _, b = session(gbrd, ws)
    tag = uuid.uuid4().hex
    code = ("import os\nopen(os.path.join(os.environ['TMPDIR'], 's-%s'), 'w').write('x')\n"
            "try:\n    open('/dev/shm/g-%s', 'w').write('x'); print('shm ok')\n"
            "except OSError as e: print('shm refused', e.errno)\n"
            "print(os.environ['TMPDIR'])\n" % (tag, tag))
    ra = out(run(c, a, code))
    assert not os.path.exists("/dev/shm/g-%s" % tag), ra
    look = ("import os\nprint(os.path.exists(os.path.join(os.environ['TMPDIR'], 's-%s')),"
            " os.path.exists('/dev/shm/g-%s'))\n" % (tag, tag))
    rb = out(run(c, b, look))
    assert rb["stdout"].strip() == "False False", rb
    if mode == "nons":
        assert "shm refused" in ra["stdout"]
    # Nothing was written where the host's processes would see it.
    assert not [f for f in os.listdir("/tmp") if tag in f]
    # The session's temp space goes with the session.
    gbrd.conn().call("session.close", {"session": a})
    tmp = os.path.join(gbrd.state, "run-tmp", a)
    deadline = time.time() + 5
    while os.path.exists(tmp) and time.time() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(tmp)


def test_proc_is_the_pid_namespaces_own(gbrd, mode):
    if mode != "ns":
        pytest.skip("without a pid namespace /proc is the host's")
    ws = workspace(gbrd)
    c, sid = session(gbrd, ws)
    r = out(run(c, sid, "import os\nprint(sorted(int(p) for p in os.listdir('/proc') "
                        "if p.isdigit()))\n"))
    pids = json.loads(r["stdout"])
    assert os.getpid() not in pids and gbrd.proc.pid not in pids
    assert len(pids) < 10, pids
    assert r["sandbox"]["own_proc"]


def test_a_run_leaves_no_process_behind(gbrd):
    ws = workspace(gbrd)
    c, sid = session(gbrd, ws)
    m = marker()
    out(run(c, sid, "setsid sh -c 'sleep %s & sleep %s' & (trap '' TERM HUP; sleep %s) &"
                    " echo started" % (m, m, m), lang="sh"))
    time.sleep(0.5)
    assert not alive(m)


# -- A layer that cannot be had is named, never silently dropped. --

def test_without_landlock_or_namespaces_commands_are_refused(make_daemon):
    d = make_daemon(config="[exec]\nnamespaces = off\nlandlock = off\n")
    st = status(d)
    assert st["commands"] == "refused" and "Landlock" in st["refusal"]
    assert "accept_risks = writes" in st["refusal"]
    assert st["invariants"]["writes_confined"] == "refused"
    ws = workspace(d)
    c, sid = session(d, ws)
    target = os.path.join(d.root, "outside.txt")
    r = run(c, sid, "open(%r, 'w').write('x')\n" % target)
    assert r["error"]["data"]["kind"] == "unavailable", r
    assert not os.path.exists(target)
    # Accepting the risk by name is the way out.
    d2 = make_daemon(config="[exec]\nnamespaces = off\nlandlock = off\n"
                            "accept_risks = writes\n")
    assert status(d2)["commands"] == "allowed"
    assert status(d2)["invariants"]["writes_confined"] == "accepted risk"


def test_without_seccomp_commands_are_refused(make_daemon):
    d = make_daemon(config="[exec]\nseccomp = off\n")
    st = status(d)
    assert st["commands"] == "refused" and "seccomp" in st["refusal"]
    assert "accept_risks = control" in st["refusal"]
    ws = workspace(d)
    c, sid = session(d, ws)
    r = run(c, sid, "print(1)\n")
    assert r["error"]["data"]["kind"] == "unavailable", r
    r = d.ctl("status")
    assert r.returncode == 0 and "commands" in r.stdout and "refused" in r.stdout


def test_too_many_read_only_paths_are_refused_not_dropped(make_daemon):
    d = make_daemon()
    ws = workspace(d)
    roots = []
    for i in range(130):
        os.makedirs(os.path.join(ws, "r%03d" % i))
        roots.append("r%03d" % i)
    write(os.path.join(ws, ".gbr_envs", "default.ini"),
          "[env]\nread_only_roots = %s\n" % ", ".join(roots))
    c, sid = session(d, ws)
    r = run(c, sid, "open('.gbr_envs/default.ini', 'w').write('[env]\\n')\n")
    assert r["error"]["data"]["kind"] == "invalid_env", r
    assert read(os.path.join(ws, ".gbr_envs", "default.ini")).startswith(
        "[env]\nread_only_roots = r000")


def test_a_gbrd_killed_mid_run_puts_things_back(make_daemon, mode):
    d = make_daemon(config=MODES[mode] or None)
    if mode == "ns" and not status(d)["mount_namespace"]:
        pytest.skip("no namespaces here")
    ws = workspace(d)
    c, sid = session(d, ws)
    c.request("tool.call", {"session": sid, "tool": "run_script", "args": {
        "language": "sh", "timeout_ms": 60000,
        "code": "mkdir -p .gbr_envs; printf '%s' > .gbr_envs/default.ini; "
                "echo x >> gleam.toml; sleep 30" % EVIL_PROFILE.replace("\n", "\\n")}})
    deadline = time.time() + 10
    while not os.path.exists(os.path.join(ws, ".gbr_envs", "default.ini")):
        assert time.time() < deadline, "the command did not run"
        time.sleep(0.05)
    time.sleep(0.2)
    d.kill9()
    d.start()
    assert not os.path.exists(os.path.join(ws, ".gbr_envs", "default.ini"))
    assert read(os.path.join(ws, "gleam.toml")) == 'name = "app"\nversion = "1.0.0"\n'
    assert env_in_force(d, sid)["builtin"]


def test_protected_wildcard_pattern_matches_are_kept(gbrd):
    # A pattern with no one folder to bind: its existing matches are
    # locked one by one (with namespaces) and checked after the run.
    ws = workspace(gbrd)
    write(os.path.join(ws, ".gbr_envs", "default.ini"),
          "[env]\nprotected_files = **/*.secret, *.toml\n")
    write(os.path.join(ws, "deep", "er", "db.secret"), "s1\n")
    c, sid = session(gbrd, ws)
    code = ("for p in ('deep/er/db.secret', 'gleam.toml'):\n"
            "    try:\n"
            "        open(p, 'w').write('evil\\n')\n"
            "    except OSError as e: print('refused', p, e.errno)\n")
    out(run(c, sid, code))
    assert read(os.path.join(ws, "deep", "er", "db.secret")) == "s1\n"
    assert read(os.path.join(ws, "gleam.toml")) == 'name = "app"\nversion = "1.0.0"\n'


def test_gbrds_own_files_are_out_of_every_tools_reach(make_daemon, mode):
    # A workspace that holds gbrd's state, its config folder and the keys
    # (as $HOME does): the file tools never reach them, and commands
    # either do not see them (mount namespace) or do not run there.
    d = make_daemon(config=MODES[mode] or None, start=False)
    d.env["XDG_CONFIG_HOME"] = os.path.join(d.root, "xdg-config")
    envfile = os.path.join(d.root, "xdg-config", "gbr", "gbrd.env")
    write(envfile, "GEMINI_API_KEY=sk-very-secret\n")
    d.start()
    st = status(d)
    if mode == "ns" and not st["mount_namespace"]:
        pytest.skip("no namespaces here")
    c, sid = session(d, os.path.realpath(d.root))
    for tool, args in (("read_file", {"path": "xdg-config/gbr/gbrd.env"}),
                       ("list_directory", {"path": "state"}),
                       ("write_file", {"path": "state/x", "content": "x"}),
                       ("write_file", {"path": "xdg-config/gbr/gbrd.env",
                                       "content": "x"})):
        r = c.call("tool.call", {"session": sid, "tool": tool, "args": args})
        assert r["error"]["data"]["kind"] == "permission_denied", (tool, r)
    r = c.call("tool.call", {"session": sid, "tool": "search",
                             "args": {"pattern": "sk-very-secret"}})
    assert "sk-very-secret" not in json.dumps(r), r
    assert read(envfile) == "GEMINI_API_KEY=sk-very-secret\n"
    assert not os.path.exists(os.path.join(d.state, "x"))
    r = run(c, sid, "cat xdg-config/gbr/gbrd.env; ls state; echo end", lang="sh")
    if mode == "ns":
        assert "sk-very-secret" not in out(r)["stdout"], r
        assert "log" not in out(r)["stdout"].split()
    else:
        assert r["error"]["data"]["kind"] == "permission_denied", r


def test_a_humans_edit_after_overlapping_commands_is_applied(gbrd):
    # The watcher waits while commands of the workspace run, and only so
    # long: once the last of two overlapping ones has ended, a person's
    # edit is applied as always.
    ws = workspace(gbrd)
    write(os.path.join(ws, ".gbr_envs", "default.ini"), "[env]\nautonomy = supervised\n")
    c, sid = session(gbrd, ws)
    c1, c2 = gbrd.conn(), gbrd.conn()
    r1 = c1.request("tool.call", {"session": sid, "tool": "run_script", "args": {
        "language": "sh", "code": "sleep 1"}})
    r2 = c2.request("tool.call", {"session": sid, "tool": "run_script", "args": {
        "language": "sh", "code": "sleep 0.3"}})
    for cc, rid in ((c1, r1), (c2, r2)):
        while cc.recv().get("id") != rid:
            pass
    write(os.path.join(ws, ".gbr_envs", "default.ini"), "[env]\nautonomy = full\n")
    deadline = time.time() + 10
    while env_in_force(gbrd, sid)["autonomy"] != "full":
        assert time.time() < deadline, "the person's edit was never applied"
        time.sleep(0.1)


def test_seccomp_alone_keeps_the_supervisor_alive(make_daemon):
    # Without Landlock's signal scoping and without a pid namespace, the
    # seccomp program alone keeps the run from killing its supervisor,
    # which then ends what the run left.
    d = make_daemon(config="[exec]\nnamespaces = off\nlandlock = off\n"
                           "accept_risks = writes\n")
    assert status(d)["commands"] == "allowed"
    ws = workspace(d)
    c, sid = session(d, ws)
    m = marker()
    r = out(run(c, sid, "setsid sleep %s & kill -KILL $PPID; echo killed=$?; "
                        "kill -TERM $PPID; echo termed=$?" % m, lang="sh"))
    assert "killed=1" in r["stdout"] and "termed=1" in r["stdout"], r
    assert r["sandbox"]["supervised"] and r["sandbox"]["seccomp"]
    time.sleep(0.3)
    assert not alive(m), "the supervisor was killed and the run's leftover lived"


def test_closing_a_session_stops_its_commands(gbrd):
    """A closed session's command does not run on to its timeout, with
    its temp space gone from under it."""
    ws = workspace(gbrd)
    c, sid = session(gbrd, ws)
    m = marker()
    rid = c.request("tool.call", {"session": sid, "tool": "run_script", "args": {
        "language": "sh", "code": "sleep %s" % m, "timeout_ms": 600000}})
    deadline = time.time() + 15
    while time.time() < deadline and not alive(m):
        time.sleep(0.05)
    assert alive(m)
    r = gbrd.conn().call("session.close", {"session": sid})
    assert "result" in r, r
    deadline = time.time() + 15
    while time.time() < deadline and alive(m):
        time.sleep(0.05)
    assert not alive(m), "the closed session's command still runs"
    while True:
        resp = c.recv()
        if resp.get("id") == rid:
            break
    assert resp["error"]["data"]["kind"] in ("cancelled", "session_not_found"), resp


def test_a_read_only_root_under_tmp_stays_read_only(gbrd):
    """With namespaces the session's temp space is mounted on /tmp and the
    run may write it; a read-only root that lives under /tmp (bound back in
    there) must not become writable with it. Also when the workspace lies
    inside that root: the workspace stays writable, the rest does not."""
    assert gbrd.root.startswith("/tmp/"), gbrd.root
    refs = os.path.join(gbrd.root, "refs")
    write(os.path.join(refs, "lib", "a.txt"), "orig\n")
    ws = workspace(gbrd, name=os.path.join("refs", "ws"))
    other = workspace(gbrd, name="ws2")
    for w, root in ((other, refs), (ws, refs)):
        write(os.path.join(w, ".gbr_envs", "default.ini"),
              "[env]\nread_only_roots = %s\n" % root)
        c, sid = session(gbrd, w)
        code = ("for f in %s/lib/a.txt %s/lib/new.txt; do echo evil > $f; done; "
                "echo ok > %s/mine.txt; cat %s/lib/a.txt" % (refs, refs, w, refs))
        r = out(run(c, sid, code, lang="sh"))
        assert "orig" in r["stdout"], r        # it could read the root
        assert read(os.path.join(refs, "lib", "a.txt")) == "orig\n", (w, r)
        assert not os.path.exists(os.path.join(refs, "lib", "new.txt")), (w, r)
        assert read(os.path.join(w, "mine.txt")) == "ok\n", (w, r)
