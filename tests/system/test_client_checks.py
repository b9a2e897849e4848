"""The clients check whom they talk to (DESIGN.md section 4, last invariant):
before connecting, the socket's folder must be a real folder of ours that
nobody else may write in; after connecting, the server must run as our uid.
A fake gbrd in a folder another user made first (/tmp/gbr-<uid> without
XDG_RUNTIME_DIR), or one of another uid in our own folder, gets nothing from
gbrctl, gbr or the auto-start path: not a hello, not a workspace path. And
the clients are not dumpable, so that a process of the same uid cannot take
their connected socket.

Each case runs a fake server that answers like gbrd and records every
connection and byte; the outcome asserted is what it received, the exit code
(3: cannot reach the daemon) and that the message names the folder, its
owner and mode, and the way out."""
import ctypes
import errno
import json
import os
import pwd
import select
import signal
import socket
import subprocess
import sys
import time

import pytest

from conftest import GBR, GBRCTL, GBRD, Conn

NOBODY = 65534


def _nobody_name():
    try:
        return pwd.getpwuid(NOBODY).pw_name
    except KeyError:
        return None


def _reply(conn, line):
    """Answers one line as gbrd would: hello works, other methods do not."""
    try:
        msg = json.loads(line)
    except ValueError:
        return
    if not isinstance(msg, dict) or "id" not in msg:
        return
    if msg.get("method") == "hello":
        out = {"jsonrpc": "2.0", "id": msg["id"], "result": {
            "protocol": 1, "server": "gbrd", "version": "fake",
            "pid": os.getpid(), "epoch": "fake", "capabilities": [],
            "limits": {"max_line_bytes": 1048576}}}
    else:
        out = {"jsonrpc": "2.0", "id": msg["id"], "error": {
            "code": -32601, "message": "fake gbrd",
            "data": {"kind": "method_not_found"}}}
    try:
        conn.sendall(json.dumps(out).encode() + b"\n")
    except OSError:
        pass


def _serve(srv, stop_fd):
    """Serves until stop_fd reads end of file; returns what it saw."""
    record = {"connections": 0, "received": ""}
    conns = {}
    while True:
        ready, _, _ = select.select([srv, stop_fd] + list(conns), [], [])
        if stop_fd in ready:
            # Connections still in the backlog count too: accept them and
            # read what is there before answering.
            srv.setblocking(False)
            while True:
                try:
                    c, _ = srv.accept()
                except (BlockingIOError, InterruptedError):
                    break
                conns[c] = b""
                record["connections"] += 1
            for c in conns:
                c.setblocking(False)
                try:
                    record["received"] += c.recv(65536).decode("latin-1")
                except OSError:
                    pass
            return record
        for s in ready:
            if s is srv:
                c, _ = srv.accept()
                conns[c] = b""
                record["connections"] += 1
                continue
            try:
                data = s.recv(65536)
            except OSError:
                data = b""
            if not data:
                s.close()
                del conns[s]
                continue
            record["received"] += data.decode("latin-1")
            buf = conns[s] + data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                _reply(s, line)
            conns[s] = buf


class FakeServer:
    """A fake gbrd listening on path in a child process, as uid when given.
    It binds as the test's user (so it can sit in a folder closed to uid),
    then takes uid before listen(2): that is the uid the kernel reports to
    whoever connects."""

    def __init__(self, path, uid=None):
        self.path = path
        ready_r, ready_w = os.pipe()
        stop_r, self.stop_w = os.pipe()
        self.res_r, res_w = os.pipe()
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                os.close(ready_r)
                os.close(self.stop_w)
                os.close(self.res_r)
                srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
                srv.bind(path)
                if uid is not None:
                    os.setgroups([])
                    os.setgid(uid)
                    os.setuid(uid)
                srv.listen(16)
                os.write(ready_w, b"1")
                os.close(ready_w)
                record = _serve(srv, stop_r)
                os.write(res_w, json.dumps(record).encode())
                code = 0
            except BaseException as e:
                os.write(2, ("fake server: %r\n" % (e,)).encode())
            finally:
                os._exit(code)
        self.pid = pid
        os.close(ready_w)
        os.close(stop_r)
        os.close(res_w)
        ok = os.read(ready_r, 1)
        os.close(ready_r)
        self.record = None
        if ok != b"1":
            self.stop()
            raise RuntimeError("the fake server did not start")

    def stop(self):
        """Stops the server; returns {connections, received}."""
        if self.record is not None:
            return self.record
        os.close(self.stop_w)
        data = b""
        while True:
            chunk = os.read(self.res_r, 65536)
            if not chunk:
                break
            data += chunk
        os.close(self.res_r)
        os.waitpid(self.pid, 0)
        self.record = json.loads(data) if data else {"connections": -1,
                                                    "received": "?"}
        return self.record


@pytest.fixture
def fake_server():
    made = []

    def make(path, uid=None):
        f = FakeServer(path, uid)
        made.append(f)
        return f

    yield make
    for f in made:
        f.stop()


@pytest.fixture
def ws(tmpdir_short):
    d = os.path.join(tmpdir_short, "proj")
    os.makedirs(d)
    return d


def need_root(why):
    if os.geteuid() != 0:
        pytest.skip("needs root: " + why)


def bad_folder(kind, top):
    """Makes a socket folder of the given kind under top. Returns the folder
    to put in GBR_SOCKET, the real folder behind it, and the words its
    refusal must contain."""
    me = "(uid %d)" % os.getuid()
    way_out = "GBR_SOCKET"
    if kind == "foreign":
        need_root("chown a folder to another uid")
        d = os.path.join(top, "foreign")
        os.mkdir(d, 0o700)
        os.chown(d, NOBODY, NOBODY)
        owner = "(uid %d)" % NOBODY
        if _nobody_name() is not None:
            owner = "%s (uid %d)" % (_nobody_name(), NOBODY)
        return d, d, [d, owner, "not by you " + me, "mode 0700",
                      "ask the owner of " + d, way_out]
    if kind in ("group_writable", "other_writable"):
        d = os.path.join(top, kind)
        os.mkdir(d)
        mode = 0o770 if kind == "group_writable" else 0o1777
        os.chmod(d, mode)
        return d, d, [d, me, "mode %04o" % mode, "chmod 700 " + d, way_out]
    assert kind == "symlink"
    real = os.path.join(top, "real")
    os.mkdir(real, 0o700)
    link = os.path.join(top, "link")
    os.symlink(real, link)
    return link, real, [link, "symbolic link", me, way_out]


def clients(ws):
    """Every way a client reaches the daemon: gbrctl commands (each connect
    path: the common one, log, approvals, mcp, start) and the REPL."""
    return [
        [GBRCTL, "status"],
        [GBRCTL, "--json", "sessions"],
        [GBRCTL, "new", ws],
        [GBRCTL, "log"],
        [GBRCTL, "approvals"],
        [GBRCTL, "start"],
        [GBRCTL, "mcp", "--workspace", ws],
        [GBR, ws],
    ]


def run(argv, env):
    # The REPL reads its commands from stdin when it is not a terminal.
    return subprocess.run(argv, env=env, input="/call daemon.status\n/quit\n",
                          capture_output=True, text=True, timeout=60)


def client_env(d, sockdir):
    return dict(d.env, GBR_SOCKET=os.path.join(sockdir, "gbrd.sock"), GBRD=GBRD)


def gbrd_processes(sock):
    """Pids of any gbrd started for sock."""
    r = subprocess.run(["pgrep", "-f", "--", "%s -s %s" % (GBRD, sock)],
                       capture_output=True, text=True)
    return r.stdout.split()


@pytest.mark.parametrize("kind", ["foreign", "group_writable",
                                  "other_writable", "symlink"])
def test_bad_socket_folder_is_refused_before_connecting(make_daemon, fake_server,
                                                        tmpdir_short, ws, kind):
    d = make_daemon(start=False)
    sockdir, real, words = bad_folder(kind, tmpdir_short)
    # A fake gbrd of our own uid waits there: only the folder check can
    # keep the clients away from it.
    fake = fake_server(os.path.join(real, "gbrd.sock"))
    env = client_env(d, sockdir)
    for argv in clients(ws):
        r = run(argv, env)
        assert r.returncode == 3, (argv, r.returncode, r.stdout, r.stderr)
        for w in words:
            assert w in r.stderr, (argv, w, r.stderr)
        assert "refusing the socket folder" in r.stderr, (argv, r.stderr)
    seen = fake.stop()
    assert seen == {"connections": 0, "received": ""}, seen


def test_foreign_folder_is_refused_to_an_ordinary_user(make_daemon, ws):
    """Without root, a folder root owns stands for another user's."""
    if os.geteuid() == 0:
        pytest.skip("as root every root-owned folder is ours (the root case "
                    "runs in test_bad_socket_folder_is_refused_before_connecting)")
    d = make_daemon(start=False)
    sockdir = os.path.dirname(GBRD)
    if os.lstat(sockdir).st_uid == os.getuid():
        sockdir = "/"
    assert os.lstat(sockdir).st_uid != os.getuid()
    env = client_env(d, sockdir)
    for argv in ([GBRCTL, "status"], [GBRCTL, "start"], [GBR, ws]):
        r = run(argv, env)
        assert r.returncode == 3, (argv, r.stderr)
        assert "refusing the socket folder %s: it is owned by " % sockdir in r.stderr
        assert "not by you (uid %d)" % os.getuid() in r.stderr
    assert gbrd_processes(env["GBR_SOCKET"]) == []


@pytest.mark.parametrize("kind", ["foreign", "group_writable", "symlink"])
def test_autostart_into_a_bad_folder_starts_nothing(make_daemon, fake_server,
                                                    tmpdir_short, ws, kind):
    d = make_daemon(start=False)
    sockdir, real, words = bad_folder(kind, tmpdir_short)
    env = client_env(d, sockdir)
    starters = ([GBRCTL, "start"], [GBR, ws], [GBRCTL, "mcp", "--workspace", ws])
    # Nobody there: no gbrd is started, and nothing (lock, socket) is made.
    for argv in starters:
        r = run(argv, env)
        assert r.returncode == 3, (argv, r.stderr)
        for w in words:
            assert w in r.stderr, (argv, w, r.stderr)
    assert os.listdir(real) == []
    assert gbrd_processes(env["GBR_SOCKET"]) == []
    # A fake gbrd there is not taken for a running daemon either.
    fake = fake_server(os.path.join(real, "gbrd.sock"))
    for argv in starters:
        r = run(argv, env)
        assert r.returncode == 3, (argv, r.stdout, r.stderr)
    assert fake.stop() == {"connections": 0, "received": ""}
    assert os.listdir(real) == ["gbrd.sock"]
    assert gbrd_processes(env["GBR_SOCKET"]) == []


def test_server_of_another_uid_is_refused_before_hello(make_daemon, fake_server,
                                                       tmpdir_short, ws):
    need_root("run a fake server as another uid")
    d = make_daemon(start=False)
    sockdir = os.path.join(tmpdir_short, "ours")
    os.mkdir(sockdir, 0o700)
    fake = fake_server(os.path.join(sockdir, "gbrd.sock"), uid=NOBODY)
    env = client_env(d, sockdir)
    argvs = clients(ws)
    for argv in argvs:
        r = run(argv, env)
        assert r.returncode == 3, (argv, r.returncode, r.stdout, r.stderr)
        assert "refusing the server on %s: it runs as " % env["GBR_SOCKET"] in r.stderr
        assert "(uid %d), not as you (uid 0)" % NOBODY in r.stderr, r.stderr
        assert "nothing was sent" in r.stderr and "GBR_SOCKET" in r.stderr
    seen = fake.stop()
    # Each client did connect (the folder is fine), and sent not one byte.
    assert seen == {"connections": len(argvs), "received": ""}, seen
    assert gbrd_processes(env["GBR_SOCKET"]) == []


def test_fake_server_of_ours_gets_hello(make_daemon, fake_server, tmpdir_short):
    """The control for the cases above: in a folder of ours, open to reading
    but not to writing (the clients allow that; gbrd itself makes 0700), a
    server of our uid is talked to. So a refusal above is the check's."""
    d = make_daemon(start=False)
    sockdir = os.path.join(tmpdir_short, "readable")
    os.mkdir(sockdir)
    os.chmod(sockdir, 0o755)
    fake = fake_server(os.path.join(sockdir, "gbrd.sock"))
    r = run([GBRCTL, "status"], client_env(d, sockdir))
    assert r.returncode == 1 and "fake gbrd" in r.stderr, (r.returncode, r.stderr)
    seen = fake.stop()
    assert seen["connections"] == 1
    assert '"method":"hello"' in seen["received"].replace(" ", "")


def _drop_ptrace():
    """In a child: lose CAP_SYS_PTRACE for good, so that root tries what a
    same-uid process without privileges could do."""
    if os.geteuid() == 0:
        libc = ctypes.CDLL(None, use_errno=True)
        PR_CAPBSET_DROP, CAP_SYS_PTRACE = 24, 19
        if libc.prctl(PR_CAPBSET_DROP, CAP_SYS_PTRACE, 0, 0, 0) != 0:
            os._exit(120)


# Run by peek() in a process of our uid without CAP_SYS_PTRACE: the ways
# to reach into another process, each reported as 0 or the errno it got.
PEEK = r"""
import ctypes, errno, json, os, platform, sys
pid = int(sys.argv[1])
libc = ctypes.CDLL(None, use_errno=True)
out = {}
PTRACE_SEIZE = 0x4206    # attaches without stopping the process
out["ptrace"] = 0 if libc.ptrace(PTRACE_SEIZE, pid, 0, 0) == 0 else ctypes.get_errno()
try:
    os.close(os.open("/proc/%d/mem" % pid, os.O_RDONLY))
    out["mem"] = 0
except OSError as e:
    out["mem"] = e.errno
# pidfd_getfd(2) copies a file descriptor out of another process: the
# very theft at stake. The syscall numbers are the generic table's.
if platform.machine() in ("x86_64", "aarch64"):
    pidfd = libc.syscall(434, pid, 0)
    if pidfd < 0:
        out["getfd"] = ctypes.get_errno()
    else:
        fd = libc.syscall(438, pidfd, 0, 0)
        out["getfd"] = 0 if fd >= 0 else ctypes.get_errno()
out["fd_owner"] = os.stat("/proc/%d/fd" % pid).st_uid
print(json.dumps(out))
"""


def peek(pid):
    r = subprocess.run([sys.executable, "-c", PEEK, str(pid)],
                       preexec_fn=_drop_ptrace, capture_output=True, text=True,
                       timeout=30)
    assert r.returncode == 0, (r.returncode, r.stderr)
    return json.loads(r.stdout)


def test_clients_are_not_dumpable(daemon, ws):
    sid = daemon.ctl_json("new", ws)["id"]
    # As root, every process here goes without CAP_SYS_PTRACE: the kernel
    # also wants a tracer's capabilities to cover the tracee's, so this way
    # dumpability is the one difference between the clients and the control.
    procs = [
        subprocess.Popen([GBR, ws], env=daemon.env, stdin=subprocess.PIPE,
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                         preexec_fn=_drop_ptrace),
        subprocess.Popen([GBRCTL, "attach", sid], env=daemon.env,
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, preexec_fn=_drop_ptrace),
    ]
    control = subprocess.Popen(["sleep", "60"], preexec_fn=_drop_ptrace)
    try:
        c = Conn(daemon.socket)
        deadline = time.time() + 15
        # Both clients connected (and the watcher itself).
        while time.time() < deadline:
            st = c.call("daemon.status")["result"]
            if st["clients"]["connected"] >= 3:
                break
            time.sleep(0.05)
        assert st["clients"]["connected"] >= 3, st["clients"]
        c.close()
        # A dumpable process of ours: /proc shows it as ours, and (where
        # no LSM restricts ptrace further) it can be reached into.
        ctl = peek(control.pid)
        assert ctl["fd_owner"] == os.getuid(), ctl
        reachable = all(v == 0 for k, v in ctl.items() if k != "fd_owner")
        for p in procs:
            assert p.poll() is None, p.stderr.read()
            got = peek(p.pid)
            if os.geteuid() != 0:
                # Non-dumpable, its /proc files belong to root, not to us.
                assert got["fd_owner"] == 0, got
            if reachable:
                assert got["ptrace"] == errno.EPERM, got
                assert got["mem"] == errno.EACCES, got
                if "getfd" in got:
                    assert got["getfd"] == errno.EPERM, got
        if not reachable and os.geteuid() == 0:
            pytest.skip("ptrace is restricted even for a dumpable process "
                        "here: %r" % ctl)
    finally:
        control.kill()
        control.wait()
        for p in procs:
            p.send_signal(signal.SIGTERM)
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
