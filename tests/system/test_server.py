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
    # The socket exists from bind(); it answers from listen() on.
    while time.time() < deadline:
        r = d.ctl("--socket", alt, "ping")
        if r.returncode == 0:
            break
        time.sleep(0.02)
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


def test_background_daemon_lock_names_its_own_pid(make_daemon):
    """SOCKET.lock names the daemon that serves, not the parent that forked it."""
    d = make_daemon(start=False)
    r = subprocess.run([GBRD], env=d.env, capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    c = Conn(d.socket)
    pid = c.hello["pid"]
    try:
        with open(d.socket + ".lock") as f:
            assert int(f.read().strip()) == pid
        r = subprocess.run([GBRD, "-f"], env=d.env, capture_output=True,
                           text=True, timeout=10)
        assert r.returncode == 1
        assert "another gbrd is already running on %s (pid %d)" % (
            d.socket, pid) in r.stderr
    finally:
        c.call("daemon.shutdown")
        deadline = time.time() + 10
        while os.path.exists("/proc/%d" % pid) and time.time() < deadline:
            time.sleep(0.02)


def test_background_start_prints_nothing_on_success(make_daemon):
    """What gbrd logs before it detaches goes to gbrd.log, not the caller's
    terminal (a line would land in the middle of a REPL's prompt)."""
    d = make_daemon(start=False)
    r = subprocess.run([GBRD], env=d.env, capture_output=True, text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    pid = Conn(d.socket).hello["pid"]
    os.kill(pid, signal.SIGKILL)
    deadline = time.time() + 10
    while os.path.exists("/proc/%d" % pid) and time.time() < deadline:
        time.sleep(0.02)
    # The second start finds the stale socket and says so: in the log only.
    r = subprocess.run([GBRD, "-l", "debug"], env=d.env, capture_output=True,
                       text=True, timeout=20)
    assert r.returncode == 0, r.stderr
    assert r.stdout == "" and r.stderr == ""
    c = Conn(d.socket)
    pid = c.hello["pid"]
    log = open(os.path.join(d.state, "gbrd.log")).read()
    assert "removing stale socket" in log
    c.call("daemon.shutdown")
    deadline = time.time() + 10
    while os.path.exists("/proc/%d" % pid) and time.time() < deadline:
        time.sleep(0.02)
    # A start that fails still tells the terminal why.
    bad = make_daemon(config="[daemon]\nmax_clients = -1\n", start=False)
    r = subprocess.run([GBRD], env=bad.env, capture_output=True, text=True,
                       timeout=20)
    assert r.returncode == 1
    assert "daemon.max_clients = '-1'" in r.stderr


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


def test_reload_method_rereads_config_and_refuses_a_broken_one(make_daemon):
    """daemon.reload (gbrctl reload) does what SIGHUP does, and says how it
    went: on Windows it is the way to reload a gbrd outside a service."""
    d = make_daemon(config="[daemon]\nmax_line_bytes = 4K\n")
    with open(d.config, "w") as f:
        f.write("[daemon]\nmax_line_bytes = 8K\n")
    r = d.ctl("reload")
    assert r.returncode == 0 and r.stdout == "gbrd reloaded %s\n" % d.config, r
    assert d.conn().hello["limits"]["max_line_bytes"] == 8192
    assert "daemon.reload: reloaded" in d.log()
    with open(d.config, "w") as f:
        f.write("[daemon]\nmax_line_bytes = lots\n")
    r = d.conn().call("daemon.reload")
    assert r["error"]["data"]["kind"] == "invalid_config"
    assert "gbrd.conf:2: daemon.max_line_bytes = 'lots': expected a size" in r["error"]["message"]
    r = d.ctl("reload")
    assert r.returncode == 1 and "expected a size" in r.stderr
    assert d.conn().hello["limits"]["max_line_bytes"] == 8192
    # Without a config file there is nothing to read: the defaults stay.
    e = make_daemon()
    assert e.ctl_json("reload") == {"config": None}


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
                ("status", "--json", "one", "two")):
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
    assert st["security"]["listener"]["kind"] == "unix socket"
    assert st["security"]["listener"]["folder_private"] is True
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


# A request line left unfinished: 512 KiB of a string, never closed.
PARTIAL = (b'{"jsonrpc":"2.0","id":1,"method":"daemon.ping","params":{"pad":"'
           + b"x" * (512 * 1024))


def rss_kb(pid):
    for line in open("/proc/%d/status" % pid):
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError("no VmRSS for %d" % pid)


def raw_partial(d, data):
    """A raw client that sends data (no newline) and keeps the socket."""
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.settimeout(10)
    s.connect(d.socket)
    try:
        s.sendall(data)
    except (BrokenPipeError, ConnectionResetError):
        pass        # refused while it was still sending
    return s


def outcome(s, timeout=0.5):
    """What the daemon did with a raw client: ("held", None), or
    ("closed", the error line it sent last, or None)."""
    s.settimeout(timeout)
    buf = b""
    try:
        while True:
            chunk = s.recv(65536)
            if not chunk:
                break
            buf += chunk
    except socket.timeout:
        return ("held", None)
    except ConnectionResetError:
        pass
    lines = [l for l in buf.split(b"\n") if l]
    return ("closed", json.loads(lines[-1]) if lines else None)


def input_status(c):
    return c.call("daemon.status")["result"]["input"]


def wait_input(c, pred, timeout=10.0):
    deadline = time.time() + timeout
    while True:
        st = input_status(c)
        if pred(st) or time.time() > deadline:
            return st
        time.sleep(0.02)


def test_unfinished_lines_share_one_budget(make_daemon, tmpdir_short):
    """The unfinished lines of all clients together stay within
    max_input_bytes: the clients whose line does not fit get busy
    (data.limit max_input_bytes) and are closed, while ordinary requests
    and a whole 900 KiB line that fits are served."""
    budget = 4 * 1024 * 1024
    d = make_daemon(config="[daemon]\nmax_input_bytes = 4M\n")
    c = d.conn()
    st = c.call("daemon.status")["result"]
    assert st["limits"]["max_input_bytes"] == budget
    assert st["input"]["max_bytes"] == budget and st["input"]["used_bytes"] == 0
    socks = []
    for i in range(24):
        socks.append(raw_partial(d, PARTIAL))
        # The budget is never exceeded, and ordinary calls still work.
        st = input_status(c)
        assert st["used_bytes"] <= budget and st["peak_bytes"] <= budget, st
    held, refused = [], []
    for s in socks:
        what, err = outcome(s)
        if what == "held":
            held.append(s)
        else:
            assert err is not None and err["id"] is None, err
            assert err["error"]["data"]["kind"] == "busy", err
            assert err["error"]["data"]["limit"] == "max_input_bytes", err
            assert err["error"]["data"]["max_bytes"] == budget, err
            refused.append(s)
    # 512 KiB lines, 4 MiB in all: a handful fit, the rest were refused.
    assert 4 <= len(held) <= 8 and len(held) + len(refused) == 24, len(held)
    st = input_status(c)
    assert st["refused"] == len(refused) and st["used_bytes"] >= len(held) * 512 * 1024
    assert st["used_bytes"] <= budget
    # With the budget full, a big line does not fit either.
    w = d.conn()
    ws = os.path.join(tmpdir_short, "ws")
    os.makedirs(ws)
    sid = w.call("session.create", {"workspace": ws})["result"]["id"]
    big = "y" * (900 * 1024)
    try:
        w.request("tool.call", {"session": sid, "tool": "write_file",
                                "args": {"path": "big.txt", "content": big}})
    except (BrokenPipeError, ConnectionResetError):
        pass        # refused while it was still sending
    what, err = outcome(w.sock, timeout=5)
    assert what == "closed" and err["error"]["data"]["kind"] == "busy", err
    # Once some of the slow clients leave, the same line is served.
    for s in held[:3]:
        s.close()
    wait_input(c, lambda st: st["used_bytes"] <= budget - 3 * 512 * 1024)
    w = d.conn()
    r = w.call("tool.call", {"session": sid, "tool": "write_file",
                             "args": {"path": "big.txt", "content": big}})
    assert r["result"]["result"]["bytes"] == len(big), r
    assert os.path.getsize(os.path.join(ws, "big.txt")) == len(big)
    assert input_status(c)["peak_bytes"] <= budget
    for s in socks:
        s.close()
    st = wait_input(c, lambda st: st["used_bytes"] == 0)
    assert st["used_bytes"] == 0, st
    # gbrctl status says it too.
    out = d.ctl_json("status")
    assert out["input"]["max_bytes"] == budget


def test_unfinished_lines_give_their_memory_back(make_daemon):
    """Two waves of 100 clients holding 1000 KiB unfinished lines: gbrd
    grows by about 100 MiB each time and comes back down once they left
    (before, the second wave's memory stayed: glibc's mmap threshold had
    risen after the first wave's frees)."""
    d = make_daemon(config="[daemon]\nmax_input_bytes = 256M\n",
                    env={"ASAN_OPTIONS": "detect_leaks=1:abort_on_error=0:"
                         "exitcode=99:quarantine_size_mb=8:"
                         "thread_local_quarantine_size_kb=256"})
    c = d.conn()
    for i in range(20):
        c.call("daemon.status")
    before = rss_kb(d.proc.pid)
    line = PARTIAL[:64] + b"x" * (1000 * 1024 - 64)
    for wave in range(2):
        socks = []
        for i in range(100):
            socks.append(raw_partial(d, line))
            if i % 10 == 0:
                # An ordinary client works meanwhile: what it allocates
                # lands between the slow clients' buffers.
                c.call("daemon.status")
        st = wait_input(c, lambda st: st["used_bytes"] >= 100 * len(line))
        assert st["used_bytes"] >= 100 * len(line) and st["refused"] == 0, st
        peak = rss_kb(d.proc.pid)
        assert peak > before + 64 * 1024, (before, peak)
        for s in socks:
            s.close()
        wait_input(c, lambda st: st["used_bytes"] == 0)
        deadline = time.time() + 10
        while rss_kb(d.proc.pid) >= before + 16 * 1024 and time.time() < deadline:
            time.sleep(0.05)
        after = rss_kb(d.proc.pid)
        assert after < before + 16 * 1024, (wave, before, peak, after)


def test_unfinished_line_times_out(make_daemon):
    """A line must be complete line_timeout_ms after its first byte: a
    client that stops in the middle gets timeout and is closed; one that
    streams lines back to back, each split across writes and finished in
    time, is never cut even though a partial line is always pending."""
    d = make_daemon(config="[daemon]\nline_timeout_ms = 800\n")
    c = d.conn()
    t0 = time.time()
    slow = raw_partial(d, b'{"jsonrpc":"2.0","id":1,"method":"daemon.ping"')
    what, err = outcome(slow, timeout=10)
    assert what == "closed" and err["id"] is None, err
    assert err["error"]["data"]["kind"] == "timeout", err
    assert err["error"]["data"]["limit"] == "line_timeout_ms"
    assert err["error"]["data"]["max_ms"] == 800
    assert time.time() - t0 >= 0.7
    st = input_status(c)
    assert st["timed_out"] == 1 and st["used_bytes"] == 0, st
    # Ten requests, each finished 150 ms after it began: 1.5 s in all.
    s = Conn(d.socket)
    req = b'{"jsonrpc":"2.0","id":%d,"method":"daemon.ping"}\n'
    s.send_raw((req % 100)[:20])
    for i in range(100, 110):
        time.sleep(0.15)
        s.send_raw((req % i)[20:] + (req % (i + 1))[:20])
    for i in range(100, 110):
        assert s.recv()["id"] == i
    assert input_status(c)["timed_out"] == 1
