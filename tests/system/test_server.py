"""gbrd's lifecycle and socket rules, and gbrctl's contract: paths and
permissions, one daemon per socket, stale sockets, signals, config reload,
background start, exit codes."""
import json
import os
import signal
import socket
import stat
import subprocess
import threading
import time

import pytest

from conftest import GBR, GBRCTL, GBRD, Conn


def test_socket_folder_and_socket_are_private(daemon):
    st = os.lstat(daemon.sockdir)
    assert stat.S_IMODE(st.st_mode) == 0o700
    assert st.st_uid == os.getuid()
    st = os.lstat(daemon.socket)
    assert stat.S_ISSOCK(st.st_mode)
    assert stat.S_IMODE(st.st_mode) & 0o077 == 0


def test_sigterm_removes_socket(daemon):
    assert daemon.stop(signal.SIGTERM) == 0
    assert not os.path.exists(daemon.socket)
    assert "shutting down: SIGTERM" in daemon.log()


def test_sigint_stops_cleanly(daemon):
    assert daemon.stop(signal.SIGINT) == 0
    assert not os.path.exists(daemon.socket)


def test_shutdown_method(daemon):
    r = daemon.ctl("shutdown")
    assert r.returncode == 0, r.stderr
    daemon.expect_exit(0)
    assert not os.path.exists(daemon.socket)


def test_second_daemon_is_refused(daemon):
    r = subprocess.run([GBRD, "-f"], env=daemon.env, capture_output=True,
                       text=True, timeout=10)
    assert r.returncode == 1
    assert "another gbrd is already running on %s (pid %d)" % (
        daemon.socket, daemon.proc.pid) in r.stderr
    # In the background too, the refusal reaches the terminal.
    r = subprocess.run([GBRD], env=daemon.env, capture_output=True, text=True,
                       timeout=10)
    assert r.returncode == 1
    assert "another gbrd is already running" in r.stderr
    # The first daemon still serves.
    assert "result" in daemon.conn().call("daemon.ping")


def test_stale_socket_after_kill9_is_replaced(daemon):
    daemon.kill9()
    assert os.path.exists(daemon.socket)      # left behind
    daemon.start()
    assert "removing stale socket" in daemon.log()
    assert "result" in daemon.conn().call("daemon.ping")


def test_live_server_on_the_path_is_not_replaced(make_daemon):
    """Something else answering on the socket path is never displaced."""
    d = make_daemon(start=False)
    os.makedirs(d.sockdir, mode=0o700)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(d.socket)
    srv.listen(8)
    try:
        d.start(wait=False)
        d.expect_exit(1)
        assert "a server is answering on" in d.log()
        assert "removing stale socket" not in d.log()
        assert stat.S_ISSOCK(os.lstat(d.socket).st_mode)
    finally:
        srv.close()


def test_socket_that_stops_answering_soon_is_replaced(make_daemon):
    """A daemon killed while starting a child leaves a socket that accepts
    for a moment (the child holds it until its exec closes it): gbrd waits
    that out instead of refusing to start."""
    d = make_daemon(start=False)
    os.makedirs(d.sockdir, mode=0o700)
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind(d.socket)
    srv.listen(8)
    closer = threading.Timer(0.3, srv.close)
    closer.start()
    try:
        d.start()
        assert "removing stale socket" in d.log()
        assert "result" in d.conn().call("daemon.ping")
    finally:
        closer.cancel()
        srv.close()


def test_non_socket_in_the_way_is_not_removed(make_daemon):
    d = make_daemon(start=False)
    os.makedirs(d.sockdir, mode=0o700)
    with open(d.socket, "w") as f:
        f.write("precious")
    d.start(wait=False)
    d.expect_exit(1)
    assert "exists and is not a socket" in d.log()
    assert open(d.socket).read() == "precious"


def test_open_socket_folder_is_refused(make_daemon):
    d = make_daemon(start=False)
    os.makedirs(d.sockdir, mode=0o755)
    os.chmod(d.sockdir, 0o755)
    d.start(wait=False)
    d.expect_exit(1)
    assert "has mode 755; it must be private (chmod 700" in d.log()
    assert not os.path.exists(d.socket)


def test_symlinked_socket_folder_is_refused(make_daemon, tmpdir_short):
    d = make_daemon(start=False)
    target = os.path.join(tmpdir_short, "elsewhere")
    os.makedirs(target, mode=0o700)
    os.symlink(target, d.sockdir)
    d.start(wait=False)
    d.expect_exit(1)
    assert "is not a directory" in d.log()
    assert os.listdir(target) == []


def test_socket_path_too_long(make_daemon):
    d = make_daemon(start=False)
    long = os.path.join(d.root, "x" * 120, "gbrd.sock")
    r = subprocess.run([GBRD, "-f", "-s", long], env=d.env, capture_output=True,
                       text=True, timeout=10)
    assert r.returncode == 1
    assert "socket path too long" in r.stderr


def test_socket_env_and_flag_resolution(make_daemon):
    d = make_daemon(start=False)
    alt = os.path.join(d.root, "alt", "g.sock")
    d.start(["-s", alt], wait=False)
    deadline = time.time() + 10
    while not os.path.exists(alt) and time.time() < deadline:
        time.sleep(0.01)
    r = d.ctl("--socket", alt, "ping")
    assert r.returncode == 0, r.stderr
    # XDG_RUNTIME_DIR is used when GBR_SOCKET is not set.
    env = dict(d.env)
    del env["GBR_SOCKET"]
    env["GBR_STATE_DIR"] = os.path.join(d.root, "state2")   # one daemon per state folder
    env["XDG_RUNTIME_DIR"] = os.path.join(d.root, "xdg")
    os.makedirs(env["XDG_RUNTIME_DIR"], mode=0o700)
    p = subprocess.Popen([GBRD, "-f"], env=env, stderr=subprocess.PIPE)
    path = os.path.join(env["XDG_RUNTIME_DIR"], "gbr", "gbrd.sock")
    deadline = time.time() + 10
    while not os.path.exists(path) and time.time() < deadline:
        time.sleep(0.01)
    assert os.path.exists(path)
    r = subprocess.run([GBRCTL, "ping"], env=env, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    p.terminate()
    assert p.wait(10) == 0


def test_background_start_returns_when_listening(make_daemon):
    d = make_daemon(start=False)
    r = subprocess.run([GBRD], env=d.env, capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    # No wait: the socket answers as soon as gbrd returned.
    c = Conn(d.socket)
    pid = c.hello["pid"]
    assert pid > 0
    c.call("daemon.shutdown")
    deadline = time.time() + 10
    while os.path.exists("/proc/%d" % pid) and time.time() < deadline:
        time.sleep(0.02)
    log = open(os.path.join(d.state, "gbrd.log")).read()
    assert "started on %s" % d.socket in log
    assert "stopped" in log
    assert stat.S_IMODE(os.stat(os.path.join(d.state, "gbrd.log")).st_mode) == 0o600


def test_sighup_reloads_config(make_daemon):
    d = make_daemon(config="[daemon]\nmax_line_bytes = 4K\n")
    assert d.conn().hello["limits"]["max_line_bytes"] == 4096
    with open(d.config, "w") as f:
        f.write("[daemon]\nmax_line_bytes = 8K\nlog_level = info\n")
    d.proc.send_signal(signal.SIGHUP)
    deadline = time.time() + 10
    while time.time() < deadline:
        if d.conn().hello["limits"]["max_line_bytes"] == 8192:
            break
        time.sleep(0.05)
    c = d.conn()
    assert c.hello["limits"]["max_line_bytes"] == 8192
    # -l debug (conftest) wins over log_level, at start and after a reload
    # (gbrd(8)); test_systemd.py checks log_level applies without -l.
    assert c.call("daemon.status")["result"]["log_level"] == "debug"
    # A broken config is refused and the previous one stays.
    with open(d.config, "w") as f:
        f.write("[daemon]\nmax_line_bytes = lots\n")
    d.proc.send_signal(signal.SIGHUP)
    deadline = time.time() + 10
    while "keeping the previous config" not in d.log() and time.time() < deadline:
        time.sleep(0.05)
    assert "gbrd.conf:2: daemon.max_line_bytes = 'lots': expected a size" in d.log()
    assert d.conn().hello["limits"]["max_line_bytes"] == 8192


def test_bad_config_refuses_start(make_daemon):
    d = make_daemon(config="[daemon]\nmax_clients = -1\n", start=False)
    d.start(wait=False)
    d.expect_exit(1)
    assert "gbrd.conf:2: daemon.max_clients = '-1'" in d.log()


def test_gbrd_help_and_version(make_daemon):
    r = subprocess.run([GBRD, "--help"], capture_output=True, text=True)
    assert r.returncode == 0 and "--foreground" in r.stdout and "SIGHUP" in r.stdout
    r = subprocess.run([GBRD, "--version"], capture_output=True, text=True)
    assert r.returncode == 0 and r.stdout.startswith("gbrd ")
    r = subprocess.run([GBRD, "--bogus"], capture_output=True, text=True)
    assert r.returncode == 2
    r = subprocess.run([GBRD, "-l", "loud", "-f"], capture_output=True, text=True)
    assert r.returncode == 2 and "unknown log level" in r.stderr


def test_gbrctl_exit_codes(daemon):
    assert daemon.ctl("status").returncode == 0
    r = daemon.ctl("call", "no.such.method")
    assert r.returncode == 1 and "(method_not_found)" in r.stderr
    r = daemon.ctl("--json", "call", "no.such.method")
    assert r.returncode == 1
    assert json.loads(r.stdout)["data"]["kind"] == "method_not_found"
    assert daemon.ctl("call").returncode == 2
    assert daemon.ctl("frobnicate").returncode == 2
    assert daemon.ctl("call", "daemon.ping", "{not json").returncode == 2
    assert daemon.ctl("call", "daemon.ping", "3").returncode == 2
    assert daemon.ctl("--timeout", "-4", "status").returncode == 2
    assert daemon.ctl().returncode == 2
    # A command without arguments takes gbrctl's options after it too.
    r = daemon.ctl("sessions", "--json")
    assert r.returncode == 0 and json.loads(r.stdout)["sessions"] == []
    r = daemon.ctl("status", "-j", "--timeout", "5000")
    assert r.returncode == 0 and json.loads(r.stdout)["server"] == "gbrd"
    for bad in (("sessions", "--bogus"), ("sessions", "x"), ("ping", "-t", "x"),
                ("status", "--json", "extra")):
        r = daemon.ctl(*bad)
        assert r.returncode == 2 and "usage: gbrctl " + bad[0] in r.stderr, bad
    daemon.stop()
    r = daemon.ctl("status")
    assert r.returncode == 3
    assert "is gbrd running?" in r.stderr


def test_gbrctl_json_and_text(daemon):
    st = daemon.ctl_json("status")
    assert st["pid"] == daemon.proc.pid
    assert st["security"]["peer_uid_check"] == "SO_PEERCRED"
    r = daemon.ctl("status")
    assert "gbrd " in r.stdout and "security.peer_uid_check" in r.stdout
    res = daemon.ctl_json("call", "hello", '{"protocol":1,"client":"again"}')
    assert res["protocol"] == 1
    r = daemon.ctl("--help")
    assert r.returncode == 0
    for word in ("status", "shutdown", "call", "--socket", "--json", "Exit status"):
        assert word in r.stdout
    assert daemon.ctl("--version").stdout.startswith("gbrctl ")


def test_gbrctl_start_starts_once(make_daemon):
    d = make_daemon(start=False)
    env = dict(d.env, GBRD=GBRD)
    r = subprocess.run([GBRCTL, "start"], env=env, capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    c = Conn(d.socket)
    pid = c.hello["pid"]
    r = subprocess.run([GBRCTL, "start"], env=env, capture_output=True, text=True, timeout=20)
    assert r.returncode == 0
    assert Conn(d.socket).hello["pid"] == pid
    c.call("daemon.shutdown")


def test_two_clients_autostarting_at_once_make_one_daemon(make_daemon):
    d = make_daemon(start=False)
    env = dict(d.env, GBRD=GBRD)
    procs = [subprocess.Popen([GBR, d.root], env=env, stdin=subprocess.PIPE,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
             for _ in range(4)]
    outs = [p.communicate(b"/call daemon.status\n/quit\n", timeout=30) for p in procs]
    pids = set()
    for p, (out, err) in zip(procs, outs):
        assert p.returncode == 0, err
        pids.add(json.loads(out)["pid"])
    assert len(pids) == 1
    pid = pids.pop()
    # Exactly one gbrd process serves this socket.
    r = subprocess.run(["pgrep", "-f", "^%s -s %s" % (GBRD, d.socket)],
                       capture_output=True, text=True)
    assert r.stdout.split() == [str(pid)]
    Conn(d.socket).call("daemon.shutdown")
