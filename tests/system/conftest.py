"""Fixtures for the system tests: a real gbrd on a private socket and state
folder, gbrctl runs, and raw socket clients. Every daemon's stderr is kept,
and a test fails if the daemon reported a sanitizer error or crashed."""
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time

import pytest

TOP = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.environ.get("GBR_BUILD_DIR", os.path.join(TOP, "build"))
GBRD = os.path.join(BUILD, "gbrd")
GBRCTL = os.path.join(BUILD, "gbrctl")
GBR = os.path.join(BUILD, "gbr")


def _built_with_sanitizers():
    """True for an --enable-asan build: its allocator keeps freed memory in
    a quarantine on purpose, so resident-memory figures mean nothing."""
    try:
        with open(os.path.join(BUILD, "gbr-config.h")) as f:
            return "#define GBR_ASAN 1" in f.read()
    except OSError:
        return False


SANITIZED = _built_with_sanitizers()

SERVICE_MANAGER_VARS = ("NOTIFY_SOCKET", "LISTEN_PID", "LISTEN_FDS",
                        "LISTEN_FDNAMES", "WATCHDOG_USEC", "WATCHDOG_PID",
                        "INVOCATION_ID", "JOURNAL_STREAM")

LLM_VARS = ("GEMINI_API_KEY", "OPENAI_API_KEY", "OPENAI_BASE_URL",
            "ANTHROPIC_API_KEY")



def _local_ollama_listening():
    """True if something answers on Ollama's port (a developer's machine)."""
    try:
        with socket.create_connection(("127.0.0.1", 11434), timeout=0.3):
            return True
    except OSError:
        return False


# gbrd's built-in defaults probe a local Ollama on 127.0.0.1:11434. Where
# one runs, a test daemon would send its prompts to that model and tests
# that expect no provider would see its answers: then every daemon whose
# config does not set ollama_url itself gets "ollama_url = off". Where
# nothing listens (CI), the built-in defaults stay as they are.
LOCAL_OLLAMA = _local_ollama_listening()

SANITIZER_MARKS = ("ERROR: AddressSanitizer", "ERROR: LeakSanitizer",
                   "runtime error:", "SUMMARY: UndefinedBehaviorSanitizer")


class Conn:
    """A raw protocol client over the Unix socket."""

    def __init__(self, path, hello=True, timeout=10.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)
        self.buf = b""
        self.next_id = 1
        self.events = []
        if hello:
            r = self.call("hello", {"protocol": 1, "client": "pytest/1"})
            assert "result" in r, r
            self.hello = r["result"]

    def send_raw(self, data):
        self.sock.sendall(data)

    def send(self, obj):
        self.send_raw(json.dumps(obj).encode() + b"\n")

    def recv_line(self):
        while b"\n" not in self.buf:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise EOFError("connection closed")
            self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return line

    def recv(self):
        return json.loads(self.recv_line())

    def request(self, method, params=None):
        rid = self.next_id
        self.next_id += 1
        msg = {"jsonrpc": "2.0", "id": rid, "method": method}
        if params is not None:
            msg["params"] = params
        self.send(msg)
        return rid

    def call(self, method, params=None):
        rid = self.request(method, params)
        while True:
            m = self.recv()
            if m.get("id") == rid and "method" not in m:
                return m
            self.events.append(m)

    def closed(self, timeout=5.0):
        """True once the daemon has closed the connection (reads the rest)."""
        self.sock.settimeout(timeout)
        try:
            while True:
                chunk = self.sock.recv(65536)
                if not chunk:
                    return True
                self.buf += chunk
        except socket.timeout:
            return False
        except ConnectionResetError:
            return True

    def close(self):
        self.sock.close()


class Daemon:
    """One gbrd run in the foreground on private paths."""

    def __init__(self, root, extra_env=None, config=None):
        self.root = root
        self.sockdir = os.path.join(root, "run")
        self.socket = os.path.join(self.sockdir, "gbrd.sock")
        self.state = os.path.join(root, "state")
        self.config = None
        if LOCAL_OLLAMA and "ollama_url" not in (config or ""):
            config = (config or "") + "\n[llm]\nollama_url = off\n"
        if config is not None:
            self.config = os.path.join(root, "gbrd.conf")
            with open(self.config, "w") as f:
                f.write(config)
        self.env = dict(os.environ)
        for k in list(self.env):
            if k.startswith(("GBR_", "XDG_")) and k != "GBR_BUILD_DIR":
                del self.env[k]
        # A test run under a service manager (CI) must not pass its
        # variables on: gbrd would talk to that manager or stay in the
        # foreground. Tests that want them set them again.
        for k in SERVICE_MANAGER_VARS:
            self.env.pop(k, None)
        # No test may reach a real LLM with the developer's key: tests that
        # want a provider give a key of their own and a local fake server.
        for k in LLM_VARS:
            self.env.pop(k, None)
        self.env.update(GBR_SOCKET=self.socket, GBR_STATE_DIR=self.state,
                        GBR_CONFIG=self.config or os.path.join(root, "no-such.conf"),
                        ASAN_OPTIONS="detect_leaks=1:abort_on_error=0:exitcode=99",
                        UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:exitcode=99")
        # The agent's package caches (agentcache.h) go with the test.
        self.env["XDG_CACHE_HOME"] = os.path.join(root, "xdg-cache")
        if config is None:
            # No config file: the built-in defaults.
            self.env.pop("GBR_CONFIG")
            self.env["XDG_CONFIG_HOME"] = os.path.join(root, "xdg-config")
        if extra_env:
            self.env.update(extra_env)
        self.proc = None
        self.logs = []
        self.exit_codes = []

    def start(self, args=(), wait=True):
        log = os.path.join(self.root, "gbrd-%d.log" % len(self.logs))
        self.logs.append(log)
        self.stderr = open(log, "wb")
        self.proc = subprocess.Popen([GBRD, "-f", "-l", "debug"] + list(args),
                                     env=self.env, stdin=subprocess.DEVNULL,
                                     stdout=self.stderr, stderr=self.stderr)
        if wait:
            self.wait_ready()
        return self.proc

    def wait_ready(self, timeout=15.0):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("gbrd exited with %s:\n%s" % (self.proc.returncode, self.log()))
            # Ready means this gbrd answers: a socket that accepts may be
            # a killed daemon's, held for a moment by a child it was
            # starting (its exec closes it), and never answers.
            try:
                with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                    s.settimeout(1.0)
                    s.connect(self.socket)
                    s.sendall(b'{"jsonrpc":"2.0","id":0,"method":"hello",'
                              b'"params":{"protocol":1,"client":"pytest-ready/1"}}\n')
                    buf = b""
                    while not buf.endswith(b"\n"):
                        chunk = s.recv(65536)
                        if not chunk:
                            break
                        buf += chunk
                r = json.loads(buf) if buf.endswith(b"\n") else {}
                if r.get("result", {}).get("pid") == self.proc.pid:
                    return
            except (OSError, ValueError):
                pass
            time.sleep(0.01)
        raise RuntimeError("gbrd did not listen in time:\n" + self.log())

    def log(self):
        out = ""
        for p in self.logs:
            try:
                out += open(p, errors="replace").read()
            except OSError:
                pass
        return out

    def stop(self, sig=signal.SIGTERM, timeout=20.0):
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(sig)
        try:
            rc = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            rc = self.proc.wait()
            raise RuntimeError("gbrd did not stop on %s" % sig)
        self.exit_codes.append(rc)
        return rc

    def expect_exit(self, code, timeout=10.0):
        """Waits for a daemon that must exit on its own with code."""
        rc = self.proc.wait(timeout)
        assert rc == code, "gbrd exited with %r, expected %r:\n%s" % (rc, code, self.log())
        self.proc = None
        return rc

    def kill9(self):
        self.proc.kill()
        self.proc.wait()
        self.exit_codes.append("killed")

    def conn(self, hello=True, timeout=10.0):
        return Conn(self.socket, hello=hello, timeout=timeout)

    def ctl(self, *args, input=None, timeout=60):
        return subprocess.run([GBRCTL] + list(args), env=self.env, input=input,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True, timeout=timeout)

    def ctl_json(self, *args):
        r = self.ctl("--json", *args)
        assert r.returncode == 0, (r.returncode, r.stdout, r.stderr)
        return json.loads(r.stdout)

    def check_clean(self):
        text = self.log()
        for mark in SANITIZER_MARKS:
            assert mark not in text, "sanitizer report in gbrd output:\n" + text[-8000:]
        for rc in self.exit_codes:
            assert rc in (0, "killed", -signal.SIGKILL), \
                "gbrd exited with %r:\n%s" % (rc, text[-8000:])


@pytest.fixture
def tmpdir_short():
    """A short private folder (socket paths must fit in 108 bytes)."""
    d = tempfile.mkdtemp(prefix="gbrt-", dir="/tmp")
    os.chmod(d, 0o700)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def make_daemon(tmpdir_short):
    """A factory: make_daemon(config=None, env=None, start=True) -> Daemon."""
    made = []

    def make(config=None, env=None, start=True, args=()):
        root = os.path.join(tmpdir_short, "d%d" % len(made))
        os.makedirs(root, mode=0o700)
        d = Daemon(root, extra_env=env, config=config)
        made.append(d)
        if start:
            d.start(args)
        return d

    yield make
    for d in made:
        if d.proc is not None and d.proc.poll() is None:
            d.stop()
        elif d.proc is not None and d.proc.returncode not in (None,) and \
                d.proc.returncode not in d.exit_codes and d.proc.returncode != -signal.SIGKILL:
            d.exit_codes.append(d.proc.returncode)
        d.check_clean()


@pytest.fixture
def daemon(make_daemon):
    """A running gbrd with built-in defaults."""
    return make_daemon()
