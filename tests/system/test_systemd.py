"""gbrd as a service: the sd_notify protocol seen from a notify
socket the test owns (READY, STATUS, STOPPING, RELOADING, WATCHDOG), socket
activation with a listening socket the test creates and passes as fd 3,
staying in the foreground under a service manager, logging (journal,
levels, syslog), the systemd units (systemd-analyze verify), the man pages
and `make install`.

Run against both builds: with libsystemd (the default when it is found) and
with --with-systemd=no (the built-in datagram code); daemon.status says
which one is in use and the tests check it matches the build."""
import json
import os
import re
import shutil
import signal
import socket
import stat
import subprocess
import tempfile
import time
import uuid

import pytest

from conftest import BUILD, GBRD, GBRCTL, TOP

SH_SET_PID = 'LISTEN_PID=$$; export LISTEN_PID; exec "$0" "$@"'
SH_SET_WATCHDOG_PID = 'WATCHDOG_PID=$$; export WATCHDOG_PID; exec "$0" "$@"'


def build_has_libsystemd():
    with open(os.path.join(BUILD, "gbr-config.h")) as f:
        return re.search(r"^#define HAVE_LIBSYSTEMD 1", f.read(), re.M) is not None


class NotifySocket:
    """The manager's end: a datagram socket gbrd's NOTIFY_SOCKET names."""

    def __init__(self, root, abstract=False):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        if abstract:
            name = "gbr-test-" + uuid.uuid4().hex
            self.sock.bind("\0" + name)
            self.env_value = "@" + name
        else:
            path = os.path.join(root, "notify.sock")
            self.sock.bind(path)
            self.env_value = path
        self.messages = []      # (monotonic time, {key: value}, raw text)

    def recv(self, timeout):
        """The next message, or None after timeout seconds."""
        self.sock.settimeout(max(timeout, 0.001))
        try:
            data = self.sock.recv(65536)
        except socket.timeout:
            return None
        text = data.decode()
        fields = dict(line.split("=", 1) for line in text.split("\n") if "=" in line)
        msg = (time.monotonic(), fields, text)
        self.messages.append(msg)
        return msg

    def wait_for(self, key, value=None, timeout=10.0):
        """Reads until a message has key (=value); returns the messages read."""
        got = []
        deadline = time.monotonic() + timeout
        while True:
            m = self.recv(deadline - time.monotonic())
            if m is None:
                raise AssertionError("no %s=%s within %ss; got %r" %
                                     (key, value, timeout, [x[2] for x in got]))
            got.append(m)
            if key in m[1] and (value is None or m[1][key] == value):
                return got

    def collect(self, seconds):
        """Everything that arrives in the next seconds."""
        got = []
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            m = self.recv(deadline - time.monotonic())
            if m is not None:
                got.append(m)
        return got

    def close(self):
        self.sock.close()


def spawn(d, args, wrapper=None, fds=(), extra_env=None, foreground=True,
          level="debug"):
    """Starts gbrd for Daemon d without waiting, optionally through a
    /bin/sh wrapper (to set LISTEN_PID or WATCHDOG_PID to gbrd's own pid)
    and with sockets passed as fd 3, 4, ..."""
    log = os.path.join(d.root, "gbrd-%d.log" % len(d.logs))
    d.logs.append(log)
    d.stderr = open(log, "wb")
    env = dict(d.env)
    if extra_env:
        env.update(extra_env)
    argv = [GBRD] + (["-f"] if foreground else []) + \
        (["-l", level] if level else []) + list(args)
    if wrapper is not None:
        argv = ["/bin/sh", "-c", wrapper] + argv

    def move_fds():
        # Out of the way first, so that no source is overwritten.
        high = [os.dup2(fd, 200 + i, inheritable=False) for i, fd in enumerate(fds)]
        for i, fd in enumerate(high):
            os.dup2(fd, 3 + i, inheritable=True)
            os.close(fd)

    # close_fds=False: Python's own descriptors are close-on-exec anyway,
    # and the passed ones must survive the exec.
    d.proc = subprocess.Popen(argv, env=env, stdin=subprocess.DEVNULL,
                              stdout=d.stderr, stderr=d.stderr,
                              close_fds=not fds,
                              preexec_fn=move_fds if fds else None)
    return d.proc


def ready_daemon(make_daemon, abstract=False, env=None, args=(), wrapper=None):
    """A gbrd with a notify socket, started and past READY=1."""
    d = make_daemon(start=False)
    ns = NotifySocket(d.root, abstract=abstract)
    e = {"NOTIFY_SOCKET": ns.env_value}
    e.update(env or {})
    spawn(d, args, wrapper=wrapper, extra_env=e)
    ns.wait_for("READY", "1")
    return d, ns


def connect_ok(path):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(5)
    s.connect(path)
    return s


# --- sd_notify ---------------------------------------------------------------

@pytest.mark.parametrize("abstract", [False, True], ids=["path", "abstract"])
def test_ready_only_once_the_socket_accepts(make_daemon, abstract):
    d = make_daemon(start=False)
    ns = NotifySocket(d.root, abstract=abstract)
    spawn(d, [], extra_env={"NOTIFY_SOCKET": ns.env_value})
    first = ns.recv(15)
    assert first is not None, "no notification at all:\n" + d.log()
    # Nothing before READY=1: it is the first message gbrd sends.
    assert first[1].get("READY") == "1", first[2]
    # The moment READY arrives, a client must get through.
    s = connect_ok(d.socket)
    s.close()
    c = d.conn()
    st = c.call("daemon.status")["result"]
    c.close()
    assert first[1]["STATUS"] == "Serving 0 clients"
    svc = st["service"]
    assert svc["notify_socket"] == ns.env_value
    assert svc["notify"] == ("libsystemd" if build_has_libsystemd() else "built-in")
    assert svc["socket_activated"] is False
    assert svc["watchdog_usec"] == 0
    assert svc["notifications_sent"] >= 1
    # Foreground by default under a service manager: the process we started
    # is the daemon (no -f needed, see test_foreground_by_default_*).
    assert st["pid"] == d.proc.pid
    ns.close()


def test_ready_after_the_log_is_replayed(make_daemon, tmpdir_short):
    d = make_daemon()
    caps = d.conn().hello["capabilities"]
    if "session.create" not in caps:
        pytest.skip("sessions are not implemented yet: nothing to replay")
    ws = os.path.join(tmpdir_short, "ws")
    os.mkdir(ws)
    d.ctl_json("call", "session.create", json.dumps({"workspace": ws, "name": "replayme"}))
    d.stop()
    ns = NotifySocket(d.root)
    spawn(d, [], extra_env={"NOTIFY_SOCKET": ns.env_value})
    ns.wait_for("READY", "1")
    c = d.conn()
    listed = c.call("session.list")
    c.close()
    assert "replayme" in json.dumps(listed), listed
    ns.close()


def test_stopping_on_sigterm(make_daemon):
    d, ns = ready_daemon(make_daemon)
    d.proc.send_signal(signal.SIGTERM)
    got = ns.wait_for("STOPPING", "1", timeout=10)
    assert d.proc.wait(10) == 0
    # Nothing is announced after STOPPING=1.
    assert ns.collect(0.3) == []
    assert all("READY" not in m[1] for m in got), [m[2] for m in got]
    d.exit_codes.append(0)
    ns.close()


def test_sigterm_during_start_up_stops_cleanly(make_daemon):
    # The socket listens before the loop has signal handlers; a SIGTERM in
    # between (systemd stopping a unit that is still starting) must wait for
    # them, then stop cleanly, not kill the daemon.
    d = make_daemon(start=False)
    ns = NotifySocket(d.root)
    for _ in range(10):
        spawn(d, [], extra_env={"NOTIFY_SOCKET": ns.env_value})
        d.wait_ready()
        d.proc.send_signal(signal.SIGTERM)
        assert d.proc.wait(10) == 0, d.log()
        d.exit_codes.append(0)
        ns.wait_for("STOPPING", "1")
    ns.close()


def test_stopping_on_daemon_shutdown(make_daemon):
    d, ns = ready_daemon(make_daemon)
    r = d.ctl("shutdown")
    assert r.returncode == 0, r.stderr
    ns.wait_for("STOPPING", "1", timeout=10)
    assert d.proc.wait(10) == 0
    d.exit_codes.append(0)
    ns.close()


def test_reloading_then_ready_on_sighup(make_daemon):
    d = make_daemon(config="[daemon]\nmax_clients = 100\n", start=False)
    ns = NotifySocket(d.root)
    spawn(d, [], extra_env={"NOTIFY_SOCKET": ns.env_value})
    ns.wait_for("READY", "1")
    for config, good in (("[daemon]\nmax_clients = 50\n", True),
                         ("[daemon]\nno_such_key = 1\n", False)):
        with open(d.config, "w") as f:
            f.write(config)
        d.proc.send_signal(signal.SIGHUP)
        got = ns.wait_for("READY", "1", timeout=10)
        keys = [m[1] for m in got]
        rel = [i for i, k in enumerate(keys) if k.get("RELOADING") == "1"]
        assert rel, [m[2] for m in got]
        assert rel[0] < len(keys) - 1
        # systemd's Type=notify-reload wants the time with RELOADING=1.
        assert int(keys[rel[0]]["MONOTONIC_USEC"]) > 0
        st = d.ctl_json("status")
        # A broken file is refused and the previous config stays.
        assert st["limits"]["max_clients"] == 50
    d.stop()
    ns.close()


def test_status_follows_clients_at_a_bounded_rate(make_daemon):
    d, ns = ready_daemon(make_daemon)
    conns = [d.conn() for _ in range(3)]
    ns.wait_for("STATUS", "Serving 3 clients", timeout=5)
    # A burst of connections: STATUS= changes at most once a second.
    t0 = time.monotonic()
    for _ in range(40):
        d.conn().close()
    for c in conns:
        c.close()
    got = ns.collect(2.5)
    statuses = [m for m in got if "STATUS" in m[1]]
    assert statuses and statuses[-1][1]["STATUS"] == "Serving 0 clients", \
        [m[2] for m in got]
    span = time.monotonic() - t0
    assert len(statuses) <= span + 1, [m[2] for m in got]
    for a, b in zip(statuses, statuses[1:]):
        assert b[0] - a[0] > 0.8, [m[2] for m in got]
    d.stop()
    ns.close()


def test_watchdog_rate(make_daemon):
    d, ns = ready_daemon(make_daemon, env={"WATCHDOG_USEC": "400000"})
    got = ns.collect(2.0)
    n = sum(1 for m in got if m[1].get("WATCHDOG") == "1")
    # Every 200 ms: about 10 in 2 s. Loose bounds for a loaded machine.
    assert 6 <= n <= 14, (n, [m[2] for m in got])
    st = d.ctl_json("status")
    assert st["service"]["watchdog_usec"] == 400000
    assert st["service"]["watchdog_ping_ms"] == 200
    d.stop()
    ns.close()


def test_watchdog_pid_is_honoured(make_daemon):
    # WATCHDOG_PID naming gbrd itself: pings.
    d, ns = ready_daemon(make_daemon, env={"WATCHDOG_USEC": "200000"},
                         wrapper=SH_SET_WATCHDOG_PID)
    got = ns.collect(1.0)
    assert sum(1 for m in got if m[1].get("WATCHDOG") == "1") >= 4
    d.stop()
    ns.close()
    # WATCHDOG_PID naming another process: the watchdog is not ours.
    d, ns = ready_daemon(make_daemon, env={"WATCHDOG_USEC": "200000",
                                           "WATCHDOG_PID": str(os.getpid())})
    got = ns.collect(1.0)
    assert not any("WATCHDOG" in m[1] for m in got), [m[2] for m in got]
    assert d.ctl_json("status")["service"]["watchdog_usec"] == 0
    d.stop()
    ns.close()


def test_no_notify_socket_means_no_service(daemon):
    svc = daemon.ctl_json("status")["service"]
    assert svc["notify_socket"] is None
    assert svc["socket_activated"] is False
    assert svc["notifications_sent"] == 0


def test_unusable_notify_socket_does_not_stop_the_daemon(make_daemon):
    # Nobody listens there: sends fail, are counted, the daemon serves.
    d = make_daemon(env={"NOTIFY_SOCKET": "/nonexistent/notify.sock"})
    st = d.ctl_json("status")
    assert st["service"]["notification_errors"] >= 1
    assert "cannot notify the service manager" in d.log()


# --- socket activation --------------------------------------------------------

def listening_socket(path, mode=0o700):
    os.makedirs(os.path.dirname(path), mode=mode, exist_ok=True)
    os.chmod(os.path.dirname(path), mode)
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    old = os.umask(0o177)
    try:
        s.bind(path)
    finally:
        os.umask(old)
    s.listen(16)
    return s


def test_socket_activation(make_daemon):
    d = make_daemon(start=False)
    path = os.path.join(d.root, "act", "gbrd.sock")
    ls = listening_socket(path)
    # As with systemd, the first client connects before gbrd runs.
    early = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    early.settimeout(10)
    early.connect(path)
    ns = NotifySocket(d.root)
    spawn(d, [], wrapper=SH_SET_PID, fds=[ls.fileno()],
          extra_env={"LISTEN_FDS": "1", "NOTIFY_SOCKET": ns.env_value})
    ns.wait_for("READY", "1")
    early.sendall(b'{"jsonrpc":"2.0","id":1,"method":"hello","params":{"protocol":1}}\n')
    reply = json.loads(early.makefile("rb").readline())
    assert reply["result"]["pid"] == d.proc.pid
    early.close()
    from conftest import Conn
    c = Conn(path)
    st = c.call("daemon.status")["result"]
    c.close()
    assert st["service"]["socket_activated"] is True
    assert st["listener"]["socket"] == path
    # gbrd did not create a socket of its own at the configured path.
    assert not os.path.exists(d.socket)
    assert d.stop() == 0
    # The socket belongs to the manager: still there, still listening.
    assert stat.S_ISSOCK(os.lstat(path).st_mode)
    s = connect_ok(path)
    s.close()
    ls.close()
    ns.close()


def test_socket_activation_restart_serves_the_backlog(make_daemon):
    d = make_daemon(start=False)
    path = os.path.join(d.root, "act", "gbrd.sock")
    ls = listening_socket(path)
    for _ in range(2):
        spawn(d, [], wrapper=SH_SET_PID, fds=[ls.fileno()], extra_env={"LISTEN_FDS": "1"})
        from conftest import Conn
        deadline = time.time() + 10
        while True:
            try:
                c = Conn(path, timeout=10)
                break
            except (OSError, EOFError):
                assert time.time() < deadline, d.log()
                time.sleep(0.05)
        assert c.hello["pid"] == d.proc.pid
        c.close()
        assert d.stop() == 0
    ls.close()


def test_socket_activation_not_for_us(make_daemon):
    # LISTEN_PID names another process: fd 3 is ignored, gbrd makes its own.
    d = make_daemon(start=False)
    path = os.path.join(d.root, "act", "gbrd.sock")
    ls = listening_socket(path)
    spawn(d, [], fds=[ls.fileno()],
          extra_env={"LISTEN_FDS": "1", "LISTEN_PID": str(os.getpid())})
    d.wait_ready()
    assert d.ctl_json("status")["service"]["socket_activated"] is False
    assert d.stop() == 0
    ls.close()


@pytest.mark.parametrize("case", ["public_dir", "not_listening", "two_fds"])
def test_socket_activation_refuses_what_it_cannot_serve(make_daemon, case):
    d = make_daemon(start=False)
    path = os.path.join(d.root, "act", "gbrd.sock")
    env = {"LISTEN_FDS": "1"}
    if case == "public_dir":
        ls = listening_socket(path, mode=0o755)
        want = "must be private"
    elif case == "not_listening":
        os.makedirs(os.path.dirname(path), mode=0o700)
        ls = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        ls.bind(path)
        want = "not listening"
    else:
        ls = listening_socket(path)
        env = {"LISTEN_FDS": "2"}
        want = "passed 2 sockets"
    fds = [ls.fileno()] * (2 if case == "two_fds" else 1)
    spawn(d, [], wrapper=SH_SET_PID, fds=fds, extra_env=env)
    assert d.proc.wait(10) == 1
    d.proc = None
    assert want in d.log(), d.log()
    ls.close()


# --- foreground under a service manager -----------------------------------------

@pytest.mark.parametrize("var", ["NOTIFY_SOCKET", "INVOCATION_ID"])
def test_foreground_by_default_under_a_service_manager(make_daemon, var):
    d = make_daemon(start=False)
    env = {"INVOCATION_ID": uuid.uuid4().hex}
    ns = None
    if var == "NOTIFY_SOCKET":
        ns = NotifySocket(d.root)
        env = {"NOTIFY_SOCKET": ns.env_value}
    spawn(d, [], extra_env=env, foreground=False)
    d.wait_ready()
    # Still running: it did not fork and exit.
    assert d.proc.poll() is None
    assert d.ctl_json("status")["pid"] == d.proc.pid
    assert d.stop() == 0
    if ns:
        ns.close()


def test_service_flag_exists_only_on_windows(tmp_path):
    # gbrd --service is the Windows Service Control Manager's entry
    # (tests/windows/test-service.sh); here it is a usage error that says
    # so, before anything is created.
    state = tmp_path / "state"
    r = subprocess.run([GBRD, "--service", "-S", str(state)],
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2, r
    assert "only on Windows" in r.stderr
    assert not state.exists()


def test_clients_start_gbrd_in_the_background_even_under_a_manager(make_daemon):
    # gbrctl start inside a service: the manager's variables are not passed
    # on, so gbrd goes to the background and gbrctl returns.
    d = make_daemon(start=False)
    ns = NotifySocket(d.root)
    env = dict(d.env, GBRD=GBRD, INVOCATION_ID=uuid.uuid4().hex,
               NOTIFY_SOCKET=ns.env_value)
    r = subprocess.run([GBRCTL, "start"], env=env, stdin=subprocess.DEVNULL,
                       capture_output=True, text=True, timeout=30)
    try:
        assert r.returncode == 0, r.stderr
        st = d.ctl_json("status")
        assert st["service"]["notify_socket"] is None
        assert ns.collect(0.3) == []
    finally:
        d.ctl("shutdown")
    deadline = time.time() + 10
    while os.path.exists(d.socket) and time.time() < deadline:
        time.sleep(0.05)
    assert not os.path.exists(d.socket)
    log = os.path.join(d.state, "gbrd.log")
    text = open(log, errors="replace").read()
    for mark in ("ERROR: AddressSanitizer", "runtime error:", "LeakSanitizer"):
        assert mark not in text, text
    ns.close()


# --- logging ------------------------------------------------------------------

TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3} gbrd\[\d+\] (error|warn|info|debug): ")


def test_log_lines_have_timestamps_and_levels(daemon):
    daemon.conn().close()
    lines = [l for l in daemon.log().splitlines() if l]
    assert lines and all(TIMESTAMP.match(l) for l in lines), lines[:5]
    assert any(" debug: " in l for l in lines)


def test_log_under_journald_has_priorities_and_no_timestamps(make_daemon):
    d = make_daemon(start=False)
    log = os.path.join(d.root, "gbrd-0.log")
    d.logs.append(log)
    f = open(log, "wb")
    sb = os.fstat(f.fileno())
    env = dict(d.env, JOURNAL_STREAM="%d:%d" % (sb.st_dev, sb.st_ino))
    d.proc = subprocess.Popen([GBRD, "-f", "-l", "debug"], env=env,
                              stdin=subprocess.DEVNULL, stdout=f, stderr=f)
    d.wait_ready()
    d.conn().close()
    assert d.stop() == 0
    lines = [l for l in d.log().splitlines() if l]
    assert lines and all(re.match(r"^<[3467]>", l) for l in lines), lines[:5]
    assert not any(TIMESTAMP.match(l[3:]) for l in lines)
    assert any(l.startswith("<6>") for l in lines)      # info
    assert any(l.startswith("<7>") for l in lines)      # debug


def test_journal_stream_of_another_file_keeps_timestamps(make_daemon):
    d = make_daemon(start=False, env={"JOURNAL_STREAM": "1:1"})
    d.start()
    d.stop()
    lines = [l for l in d.log().splitlines() if l]
    assert lines and all(TIMESTAMP.match(l) for l in lines), lines[:5]


def test_log_level_flag(make_daemon):
    d = make_daemon(args=("-l", "warn"))
    d.conn().close()
    d.stop()
    assert d.log().strip() == "", d.log()


def test_log_level_flag_survives_sighup(make_daemon):
    # The config says info; -l debug on the command line wins, also after a
    # reload.
    d = make_daemon(config="[daemon]\nlog_level = info\n")
    d.proc.send_signal(signal.SIGHUP)
    deadline = time.time() + 10
    while "SIGHUP: reloaded" not in d.log():
        assert time.time() < deadline, d.log()
        time.sleep(0.05)
    d.conn().close()
    d.stop()
    after = d.log().split("SIGHUP: reloaded", 1)[1]
    assert " debug: client " in after, d.log()


def test_log_level_from_the_config_follows_a_reload(make_daemon):
    # Without -l, log_level in gbrd.conf decides, and a reload changes it.
    d = make_daemon(config="[daemon]\nlog_level = warn\n", start=False)
    spawn(d, [], level=None)
    d.wait_ready()
    assert d.ctl_json("status")["log_level"] == "warn"
    with open(d.config, "w") as f:
        f.write("[daemon]\nlog_level = debug\n")
    d.proc.send_signal(signal.SIGHUP)
    wait_until(lambda: d.ctl_json("status")["log_level"] == "debug", 10,
               "the new log level")
    d.conn().close()
    assert d.stop() == 0
    assert " debug: client " in d.log()
    assert " info: gbrd " not in d.log()    # the start-up line, at warn


def test_debug_log_holds_no_message_text(make_daemon, tmpdir_short):
    # What a user sends (and so what files the agent reads) never reaches
    # the log, even at debug level.
    d = make_daemon()
    if "session.send" not in d.conn().hello["capabilities"]:
        pytest.skip("sessions are not implemented yet")
    ws = os.path.join(tmpdir_short, "ws")
    os.mkdir(ws)
    marker = "sk-SECRET-" + uuid.uuid4().hex
    sid = d.ctl_json("call", "session.create", json.dumps({"workspace": ws}))["id"]
    d.ctl("call", "session.send", json.dumps({"session": sid, "text": marker}))
    d.conn().close()
    assert d.stop() == 0
    assert "session %s" % sid in d.log()        # the session was logged...
    assert marker not in d.log()                 # ...but not what was said


def test_syslog_flag_keeps_stderr_quiet(make_daemon):
    d = make_daemon(args=("--syslog",))
    d.conn().close()
    d.stop()
    assert d.log().strip() == "", d.log()


def test_background_log_file_has_timestamps_even_from_the_journal(make_daemon):
    # gbrd started from a journal-connected process goes to the background:
    # its log file is not the journal, so the lines keep their timestamps.
    d = make_daemon(start=False)
    log = os.path.join(d.root, "gbrd-0.log")
    d.logs.append(log)
    f = open(log, "wb")
    sb = os.fstat(f.fileno())
    env = dict(d.env, JOURNAL_STREAM="%d:%d" % (sb.st_dev, sb.st_ino))
    r = subprocess.run([GBRD, "-l", "debug"], env=env, stdin=subprocess.DEVNULL,
                       stdout=f, stderr=f, timeout=30)
    assert r.returncode == 0, d.log()
    try:
        d.ctl_json("status")
    finally:
        d.ctl("shutdown")
    deadline = time.time() + 10
    while os.path.exists(d.socket) and time.time() < deadline:
        time.sleep(0.05)
    lines = [l for l in open(os.path.join(d.state, "gbrd.log")).read().splitlines() if l]
    assert lines and all(TIMESTAMP.match(l) for l in lines), lines[:5]


# --- man pages ------------------------------------------------------------------

MAN_PAGES = ["doc/gbrd.8", "doc/gbrctl.1", "doc/gbr.1", "doc/gbr-env.5"]


@pytest.mark.parametrize("page", MAN_PAGES)
def test_man_page_renders_without_warnings(page):
    path = os.path.join(TOP, page)
    if shutil.which("man") is None or shutil.which("groff") is None:
        pytest.skip("man or groff is not installed")
    env = dict(os.environ, MANWIDTH="80", LANG="C.UTF-8")
    r = subprocess.run(["man", "--warnings", "-l", path], env=env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stderr == "", r.stderr
    assert len(r.stdout) > 500
    r = subprocess.run(["groff", "-man", "-ww", "-z", path],
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0 and r.stderr == "", r.stderr


def help_commands():
    out = subprocess.run([GBRCTL, "--help"], capture_output=True, text=True).stdout
    block = out.split("Commands:\n", 1)[1].split("\n\n", 1)[0]
    # A command's line starts with two spaces and its name; a long one's
    # help continues on the next, more deeply indented line.
    return [l.split()[0] for l in block.splitlines() if re.match(r"^  [a-z]", l)]


def test_gbrctl_man_page_lists_every_command():
    text = open(os.path.join(TOP, "doc/gbrctl.1")).read()
    cmds = help_commands()
    assert "status" in cmds
    missing = [c for c in cmds if not re.search(r"^\.TP\n\.BR? %s\b" % re.escape(c), text, re.M)]
    assert missing == [], "gbrctl.1 does not describe: %s" % missing


def test_gbrd_man_page_lists_every_option():
    out = subprocess.run([GBRD, "--help"], capture_output=True, text=True).stdout
    text = open(os.path.join(TOP, "doc/gbrd.8")).read().replace("\\-", "-")
    for opt in re.findall(r"--[a-z][a-z-]+", out):
        assert opt in text, "gbrd.8 does not describe %s" % opt


# --- bash completion ---------------------------------------------------------------

def test_bash_completion_offers_gbrctl_commands():
    if shutil.which("bash") is None:
        pytest.skip("bash is not installed")
    comp = os.path.join(TOP, "contrib/bash-completion/gbrctl")
    script = ('source "$1"; COMP_WORDS=(gbrctl "$2"); COMP_CWORD=1; '
              'COMP_LINE="gbrctl $2"; COMP_POINT=${#COMP_LINE}; '
              '_gbrctl gbrctl "$2" gbrctl; printf "%s\\n" "${COMPREPLY[@]}"')
    env = dict(os.environ, PATH=BUILD + ":" + os.environ.get("PATH", ""))
    r = subprocess.run(["bash", "-c", script, "bash", comp, "s"], env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    got = sorted(r.stdout.split())
    assert got == sorted(c for c in help_commands() if c.startswith("s")), got
    r = subprocess.run(["bash", "-c", script, "bash", comp, "--js"], env=env,
                       capture_output=True, text=True, timeout=30)
    assert r.stdout.split() == ["--json"], r.stdout


# --- make install and the units ---------------------------------------------------

PRINT_MK = "print-%:\n\t@echo '$($*)'\n"


def make_var(name):
    with tempfile.NamedTemporaryFile("w", suffix=".mk", delete=False) as f:
        f.write(PRINT_MK)
    try:
        r = subprocess.run(["make", "-s", "--no-print-directory", "-C", BUILD,
                            "-f", "Makefile", "-f", f.name, "print-" + name],
                           capture_output=True, text=True, timeout=60)
    finally:
        os.unlink(f.name)
    assert r.returncode == 0, r.stderr
    return r.stdout.strip()


@pytest.fixture(scope="module")
def installed():
    """`make install DESTDIR=...` from the build folder under test, once."""
    dest = tempfile.mkdtemp(prefix="gbr-install-")
    r = subprocess.run(["make", "-C", BUILD, "install", "DESTDIR=" + dest],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    dirs = {v: make_var(v) for v in ("bindir", "mandir", "sysconfdir",
                                     "systemduserunitdir", "bashcompletiondir")}
    yield dest, dirs
    shutil.rmtree(dest, ignore_errors=True)


def under(dest, path):
    return os.path.join(dest, path.lstrip("/"))


def test_make_install_puts_every_file_in_place(installed):
    dest, dirs = installed
    for prog in ("gbrd", "gbrctl", "gbr"):
        p = under(dest, os.path.join(dirs["bindir"], prog))
        assert os.access(p, os.X_OK), p
    for page in MAN_PAGES:
        name = os.path.basename(page)
        p = under(dest, os.path.join(dirs["mandir"], "man" + name[-1], name))
        assert os.path.isfile(p), p
    for unit in ("gbrd.service", "gbrd.socket"):
        assert os.path.isfile(under(dest, os.path.join(dirs["systemduserunitdir"], unit)))
    assert os.path.isfile(under(dest, os.path.join(dirs["bashcompletiondir"], "gbrctl")))
    conf = under(dest, os.path.join(dirs["sysconfdir"], "gbr", "gbrd.conf"))
    assert open(conf).read() == open(os.path.join(TOP, "contrib/gbrd.conf")).read()
    # The unit runs the gbrd that was installed, in the foreground.
    svc = open(under(dest, os.path.join(dirs["systemduserunitdir"], "gbrd.service"))).read()
    assert re.search(r"^ExecStart=%s/gbrd -f$" % re.escape(dirs["bindir"]), svc, re.M), svc
    assert "@" not in svc.replace("%", ""), "unsubstituted variable in:\n" + svc


def test_sample_config_is_valid(installed, make_daemon):
    dest, dirs = installed
    conf = under(dest, os.path.join(dirs["sysconfdir"], "gbr", "gbrd.conf"))
    d = make_daemon(start=False)
    d.env["GBR_CONFIG"] = conf
    d.start()
    assert d.ctl_json("status")["config"] == conf
    d.stop()


def test_make_install_keeps_an_existing_config(installed):
    dest, dirs = installed
    conf = under(dest, os.path.join(dirs["sysconfdir"], "gbr", "gbrd.conf"))
    with open(conf, "w") as f:
        f.write("# mine\n[daemon]\nmax_clients = 7\n")
    r = subprocess.run(["make", "-C", BUILD, "install", "DESTDIR=" + dest],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr[-3000:]
    assert open(conf).read() == "# mine\n[daemon]\nmax_clients = 7\n"


def systemd_analyze_usable(tmp):
    """None if systemd-analyze can verify a trivial user unit here, else why not."""
    if shutil.which("systemd-analyze") is None:
        return "systemd-analyze is not installed (apt-get install systemd)"
    probe = os.path.join(tmp, "probe.service")
    with open(probe, "w") as f:
        f.write("[Unit]\nDescription=probe\n[Service]\nExecStart=/bin/true\n")
    r = subprocess.run(["systemd-analyze", "verify", "--user", "--man=no", probe],
                       env=dict(os.environ, XDG_RUNTIME_DIR=tmp),
                       capture_output=True, text=True, timeout=120)
    os.unlink(probe)
    if r.returncode != 0 or r.stderr:
        return "systemd-analyze cannot run here: " + r.stderr.strip()
    return None


def test_systemd_analyze_verify_accepts_both_units(installed):
    dest, dirs = installed
    tmp = tempfile.mkdtemp(prefix="gbr-units-")
    try:
        os.chmod(tmp, 0o700)
        why = systemd_analyze_usable(tmp)
        if why:
            pytest.skip(why)
        unitdir = os.path.join(tmp, "units")
        os.mkdir(unitdir)
        src = under(dest, dirs["systemduserunitdir"])
        # The unit names the installed gbrd, which lives under DESTDIR in
        # this test; point ExecStart there so that verify finds it.
        # (test_make_install_puts_every_file_in_place checks the real path.)
        bindir = dirs["bindir"]
        for unit in ("gbrd.service", "gbrd.socket"):
            text = open(os.path.join(src, unit)).read()
            text = text.replace("ExecStart=%s/" % bindir,
                                "ExecStart=%s/" % under(dest, bindir))
            with open(os.path.join(unitdir, unit), "w") as f:
                f.write(text)
        env = dict(os.environ, XDG_RUNTIME_DIR=tmp,
                   MANPATH=under(dest, dirs["mandir"]))
        r = subprocess.run(["systemd-analyze", "verify", "--user",
                            os.path.join(unitdir, "gbrd.socket"),
                            os.path.join(unitdir, "gbrd.service")],
                           env=env, capture_output=True, text=True, timeout=120)
        assert r.returncode == 0 and r.stderr == "", r.stderr
        # And a broken unit is reported, so this check can fail.
        with open(os.path.join(unitdir, "gbrd.service"), "a") as f:
            f.write("NoSuchDirective=yes\n")
        r = subprocess.run(["systemd-analyze", "verify", "--user",
                            os.path.join(unitdir, "gbrd.service")],
                           env=env, capture_output=True, text=True, timeout=120)
        assert "NoSuchDirective" in r.stderr
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def test_units_say_what_the_service_needs():
    svc = open(os.path.join(TOP, "contrib/systemd/gbrd.service.in")).read()
    sock = open(os.path.join(TOP, "contrib/systemd/gbrd.socket")).read()
    for line in ("Type=notify", "ExecStart=@bindir@/gbrd -f",
                 "ExecReload=kill -HUP $MAINPID", "Restart=on-failure",
                 "NoNewPrivileges=yes"):
        assert re.search("^" + re.escape(line) + "$", svc, re.M), line
    assert re.search(r"^WatchdogSec=\d+", svc, re.M)
    for line in ("ListenStream=%t/gbr/gbrd.sock", "SocketMode=0600",
                 "DirectoryMode=0700"):
        assert re.search("^" + re.escape(line) + "$", sock, re.M), line


# --- the real thing: a systemd user manager ------------------------------------------

def systemctl(env, *args, timeout=30):
    return subprocess.run(["systemctl", "--user"] + list(args), env=env,
                          capture_output=True, text=True, timeout=timeout)


def unit_props(env, unit, *props):
    r = systemctl(env, "show", unit, *["-p" + p for p in props])
    return dict(l.split("=", 1) for l in r.stdout.splitlines() if "=" in l)


def wait_until(pred, timeout, what):
    deadline = time.time() + timeout
    while True:
        v = pred()
        if v:
            return v
        if time.time() > deadline:
            raise AssertionError("timed out waiting for " + what)
        time.sleep(0.1)


MANAGER_SH = """
mount -t tmpfs tmpfs /run/systemd || exit 97
mkdir -p /run/systemd/system || exit 97
exec "$0" --user --unit=gbrd.socket --log-target=console
"""


def test_under_a_real_systemd_user_manager(make_daemon):
    """gbrd.socket and gbrd.service under a real `systemd --user`, run in a
    private mount namespace (where /run/systemd/system exists, as systemd
    requires, without touching the rest of the machine): socket activation,
    Type=notify readiness and status, reload, the watchdog restarting a
    stopped daemon, and a clean stop that leaves the socket in place."""
    manager = "/usr/lib/systemd/systemd"
    for need in (manager, shutil.which("systemctl"), shutil.which("unshare")):
        if need is None or not os.path.exists(need):
            pytest.skip("needs systemd, systemctl and unshare")
    if not os.path.isdir("/run/systemd"):
        pytest.skip("no /run/systemd to mount over")
    if os.geteuid() != 0:
        pytest.skip("needs root: the manager runs in a private mount namespace")
    unit_src = os.path.join(BUILD, "contrib/systemd/gbrd.service")
    d = make_daemon(start=False)
    root = d.root
    rt = os.path.join(root, "rt")
    units = os.path.join(rt, "systemd", "user")
    os.makedirs(os.path.join(units, "gbrd.service.d"))
    os.chmod(rt, 0o700)
    shutil.copy(unit_src, units)
    shutil.copy(os.path.join(TOP, "contrib/systemd/gbrd.socket"), units)
    log = os.path.join(root, "gbrd-0.log")
    d.logs.append(log)
    os.makedirs(d.state, mode=0o700)
    with open(os.path.join(units, "gbrd.service.d", "test.conf"), "w") as f:
        f.write("[Service]\nExecStart=\nExecStart=%s -f -l debug\n"
                "Environment=GBR_STATE_DIR=%s XDG_CONFIG_HOME=%s\n"
                "Environment=\"ASAN_OPTIONS=%s\" \"UBSAN_OPTIONS=%s\"\n"
                "WatchdogSec=1s\nTimeoutAbortSec=2s\nRestartSec=100ms\n"
                "StandardOutput=append:%s\nStandardError=append:%s\n"
                % (GBRD, d.state, os.path.join(root, "cfg"),
                   d.env["ASAN_OPTIONS"], d.env["UBSAN_OPTIONS"], log, log))
    env = dict(os.environ, XDG_RUNTIME_DIR=rt)
    for k in ("NOTIFY_SOCKET", "LISTEN_PID", "LISTEN_FDS", "INVOCATION_ID"):
        env.pop(k, None)
    mlog = open(os.path.join(root, "manager.log"), "wb")
    mgr = subprocess.Popen(["timeout", "120", "unshare", "-m", "--propagation",
                            "private", "sh", "-c", MANAGER_SH, manager],
                           env=env, stdin=subprocess.DEVNULL, stdout=mlog,
                           stderr=mlog, start_new_session=True)
    try:
        private = os.path.join(rt, "systemd", "private")
        deadline = time.time() + 20
        while not os.path.exists(private):
            if mgr.poll() is not None or time.time() > deadline:
                pytest.skip("cannot run a systemd user manager here: %s" %
                            open(os.path.join(root, "manager.log"), errors="replace").read()[-500:])
            time.sleep(0.1)
        wait_until(lambda: unit_props(env, "gbrd.socket", "ActiveState")
                   .get("ActiveState") == "active", 20, "gbrd.socket")
        sock = os.path.join(rt, "gbr", "gbrd.sock")
        assert stat.S_IMODE(os.stat(sock).st_mode) == 0o600
        assert stat.S_IMODE(os.stat(os.path.dirname(sock)).st_mode) == 0o700
        assert unit_props(env, "gbrd.service", "ActiveState")["ActiveState"] == "inactive"

        # The first connection starts gbrd (Type=notify: active once READY).
        from conftest import Conn
        c = Conn(sock, timeout=30)
        pid = c.hello["pid"]
        st = c.call("daemon.status")["result"]
        assert st["service"]["socket_activated"] is True
        assert st["service"]["watchdog_usec"] == 1000000
        assert st["service"]["notify_socket"]
        p = unit_props(env, "gbrd.service", "ActiveState", "SubState", "MainPID")
        assert (p["ActiveState"], p["SubState"], int(p["MainPID"])) == ("active", "running", pid), p
        wait_until(lambda: unit_props(env, "gbrd.service", "StatusText")
                   .get("StatusText") == "Serving 1 client", 10, "STATUS=")
        c.close()

        # Reload: RELOADING=1 then READY=1; the same process goes on.
        r = systemctl(env, "reload", "gbrd.service")
        assert r.returncode == 0, r.stderr
        p = unit_props(env, "gbrd.service", "ActiveState", "MainPID")
        assert (p["ActiveState"], int(p["MainPID"])) == ("active", pid), p
        assert "SIGHUP" in open(log, errors="replace").read()

        # Watchdog: a few pings' time later nothing happened...
        time.sleep(2.5)
        p = unit_props(env, "gbrd.service", "NRestarts", "MainPID")
        assert (p["NRestarts"], int(p["MainPID"])) == ("0", pid), p
        # ...but a daemon whose loop stops is killed and started again.
        os.kill(pid, signal.SIGSTOP)
        wait_until(lambda: int(unit_props(env, "gbrd.service", "NRestarts")
                               .get("NRestarts", "0")) >= 1, 30, "a watchdog restart")
        c = wait_until(lambda: _try_conn(sock), 30, "the restarted gbrd")
        assert c.hello["pid"] != pid
        c.close()

        # A clean stop: STOPPING=1, exit 0, the socket stays for the next start.
        r = systemctl(env, "stop", "gbrd.service")
        assert r.returncode == 0, r.stderr
        p = unit_props(env, "gbrd.service", "ActiveState", "Result")
        assert (p["ActiveState"], p["Result"]) == ("inactive", "success"), p
        assert stat.S_ISSOCK(os.lstat(sock).st_mode)
        assert "shutting down: SIGTERM" in open(log, errors="replace").read()
    finally:
        main = unit_props(env, "gbrd.service", "MainPID").get("MainPID", "0")
        try:
            os.killpg(mgr.pid, signal.SIGTERM)
            mgr.wait(15)
        except (ProcessLookupError, subprocess.TimeoutExpired):
            os.killpg(mgr.pid, signal.SIGKILL)
            mgr.wait()
        mlog.close()
        # A gbrd the manager could not stop must not outlive the test.
        if main.isdigit() and int(main) > 0:
            try:
                os.kill(int(main), signal.SIGKILL)
            except ProcessLookupError:
                pass


def _try_conn(path):
    from conftest import Conn
    try:
        return Conn(path, timeout=10)
    except (OSError, EOFError):
        return None
