"""The Windows system tests' harness: gbrd.exe, gbrctl.exe and a raw pipe
client (tests/windows/pipecat.exe) run under Wine, on a private named pipe
and a private state folder. The Windows build folder is GBR_WIN_BUILD_DIR
(configure --host=x86_64-w64-mingw32); without it, or without wine64, the
tests that use this module skip and say why.

Wine maps the Unix root to drive Z:, so a Unix path /tmp/x is Z:/tmp/x to
the Windows programs. Every Windows process is one Unix process here, so
SIGKILL ends gbrd.exe as abruptly as TerminateProcess would."""
import json
import os
import queue
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import uuid

WIN_BUILD = os.environ.get("GBR_WIN_BUILD_DIR", "")
WINE = os.environ.get("GBR_WINE") or shutil.which("wine64") or "/usr/lib/wine/wine64"
GBRD_EXE = os.path.join(WIN_BUILD, "gbrd.exe")
GBRCTL_EXE = os.path.join(WIN_BUILD, "gbrctl.exe")
PIPECAT_EXE = os.path.join(WIN_BUILD, "tests", "windows", "pipecat.exe")


def why_not():
    """Why the Windows tests cannot run here, or None."""
    if not WIN_BUILD:
        return "GBR_WIN_BUILD_DIR is not set (a configure --host=x86_64-w64-mingw32 build)"
    for p in (GBRD_EXE, GBRCTL_EXE, PIPECAT_EXE):
        if not os.path.exists(p):
            return "%s is not built" % p
    if not os.access(WINE, os.X_OK):
        return "wine64 is not installed (apt-get install wine64)"
    return None


WINESERVER = os.environ.get("GBR_WINESERVER") or shutil.which("wineserver") or \
    "/usr/lib/wine/wineserver"
_booted = False


def boot():
    """Makes the Wine prefix ready once, and keeps its server running.

    A Wine program that starts a wineserver may first boot or update the
    prefix (wineboot), which can take tens of seconds on a loaded machine:
    done once here, with a persistent server, every later start takes
    milliseconds and the tests' own timeouts measure gbr, not Wine."""
    global _booted
    if _booted:
        return
    env = wine_env()
    # Its output goes nowhere: a server that stays would hold a pipe open.
    subprocess.run([WINESERVER, "-p"], env=env, stdin=subprocess.DEVNULL,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   timeout=60)
    subprocess.run([WINE, "cmd.exe", "/c", "exit", "0"], env=env,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL, timeout=600)
    _booted = True


def winpath(p):
    """A Unix path as the Windows programs see it under Wine."""
    return "Z:" + os.path.abspath(p)


def wine_env(extra=None):
    env = dict(os.environ)
    for k in list(env):
        if k.startswith(("GBR_", "XDG_")) or k.endswith("_API_KEY"):
            del env[k]
    env["WINEDEBUG"] = "-all"
    # Windows text mode would end lines with CR LF: the programs must not.
    env.update(extra or {})
    return env


class WinConn:
    """A raw protocol client: pipecat.exe relays its stdin and stdout."""

    def __init__(self, pipe, env, hello=True, timeout=20.0):
        self.proc = subprocess.Popen([WINE, PIPECAT_EXE, pipe], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE)
        self.timeout = timeout
        self.reading = threading.Event()
        self.reading.set()
        self.lines = queue.Queue()
        self.partial = b""
        self.eof = False
        self.next_id = 1
        self.events = []
        threading.Thread(target=self._reader, daemon=True).start()
        if hello:
            r = self.call("hello", {"protocol": 1, "client": "pytest-wine/1"})
            assert "result" in r, r
            self.hello = r["result"]

    def _reader(self):
        buf = b""
        while True:
            # A paused client reads nothing: pipecat's output, the pipe
            # and gbrd's queue for it fill up, as for a stuck client.
            self.reading.wait()
            chunk = self.proc.stdout.read1(65536)
            if not chunk:
                if buf:
                    self.lines.put(buf)
                self.lines.put(None)
                return
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                self.lines.put(line)

    def pause(self):
        self.reading.clear()

    def resume(self):
        self.reading.set()

    def send_raw(self, data):
        self.proc.stdin.write(data)
        self.proc.stdin.flush()

    def send(self, obj):
        self.send_raw(json.dumps(obj).encode() + b"\n")

    def recv_line(self, timeout=None):
        try:
            line = self.lines.get(timeout=timeout or self.timeout)
        except queue.Empty:
            raise TimeoutError("no line from gbrd.exe in time")
        if line is None:
            self.eof = True
            raise EOFError("connection closed")
        return line

    def recv(self, timeout=None):
        return json.loads(self.recv_line(timeout))

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

    def wait_event(self, pred, timeout=None):
        """The first event (already read or coming) for which pred holds."""
        for m in self.events:
            if pred(m):
                return m
        deadline = time.time() + (timeout or self.timeout)
        while time.time() < deadline:
            m = self.recv(max(0.1, deadline - time.time()))
            self.events.append(m)
            if pred(m):
                return m
        raise TimeoutError("no such event")

    def closed(self, timeout=10.0):
        """True once gbrd.exe has closed the pipe; what came before the
        end is kept in self.events."""
        deadline = time.time() + timeout
        while time.time() < deadline:
            try:
                line = self.recv_line(max(0.1, deadline - time.time()))
                if line:
                    self.events.append(json.loads(line))
            except EOFError:
                return True
            except TimeoutError:
                return False
        return False

    def close(self):
        """Ends the connection: pipecat keeps reading the pipe after its
        input ends (to read the answers), so it is ended itself, which
        closes its end of the pipe."""
        try:
            self.proc.stdin.close()
        except OSError:
            pass
        try:
            self.proc.wait(1)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class WinDaemon:
    """One gbrd.exe in the foreground on a private pipe and state folder."""

    def __init__(self, root, config=None):
        self.root = root
        self.pipe = "\\\\.\\pipe\\gbr-test-" + uuid.uuid4().hex[:12]
        self.state = os.path.join(root, "state")
        self.config = None
        if config is not None:
            self.config = os.path.join(root, "gbrd.conf")
            with open(self.config, "w") as f:
                f.write(config)
        self.env = wine_env({"GBR_SOCKET": self.pipe,
                             "GBR_STATE_DIR": winpath(self.state)})
        if self.config:
            self.env["GBR_CONFIG"] = winpath(self.config)
        else:
            # No config file: the built-in defaults, whatever the Wine
            # prefix's own AppData or ProgramData hold.
            self.env["APPDATA"] = winpath(os.path.join(root, "appdata"))
            self.env["PROGRAMDATA"] = winpath(os.path.join(root, "programdata"))

        self.proc = None
        self.logs = []

    def start(self, args=(), wait=True):
        log = os.path.join(self.root, "gbrd-%d.log" % len(self.logs))
        self.logs.append(log)
        out = open(log, "wb")
        self.proc = subprocess.Popen([WINE, GBRD_EXE, "-f", "-l", "debug"] + list(args),
                                     env=self.env, stdin=subprocess.DEVNULL,
                                     stdout=out, stderr=out)
        if wait:
            self.wait_ready()
        return self.proc

    def wait_ready(self, timeout=60.0):
        deadline = time.time() + timeout
        while time.time() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError("gbrd.exe exited with %s:\n%s" %
                                   (self.proc.returncode, self.log()))
            try:
                r = subprocess.run([WINE, GBRCTL_EXE, "--json", "--timeout", "3000",
                                    "ping"], env=self.env, capture_output=True,
                                   timeout=max(1.0, min(30.0, deadline - time.time())))
            except subprocess.TimeoutExpired:
                # Seen once in CI under load: one Wine process start stalled.
                # Readiness is what is asked here, so try again until the
                # deadline rather than fail on the first stall.
                continue
            if r.returncode == 0:
                return
            time.sleep(0.1)
        raise RuntimeError("gbrd.exe did not answer in time:\n" + self.log())

    def log(self):
        out = ""
        for p in self.logs:
            try:
                out += open(p, errors="replace").read()
            except OSError:
                pass
        return out

    def conn(self, hello=True):
        return WinConn(self.pipe, self.env, hello=hello)

    def ctl(self, *args, input=None, timeout=60):
        """Runs gbrctl.exe. Its output goes through files, not pipes: a
        gbrd.exe it starts inherits Wine's Unix descriptors 0-2 whatever
        the Windows handles say (real Windows gives it none), and would
        hold a pipe open long after gbrctl.exe exited."""
        with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
            p = subprocess.run([WINE, GBRCTL_EXE] + list(args), env=self.env,
                               input=input.encode() if input is not None else None,
                               stdin=None if input is not None else subprocess.DEVNULL,
                               stdout=out, stderr=err, timeout=timeout)
            out.seek(0)
            err.seek(0)
            return subprocess.CompletedProcess(
                p.args, p.returncode, out.read().decode("utf-8", "replace"),
                err.read().decode("utf-8", "replace"))

    def ctl_json(self, *args):
        r = self.ctl("--json", *args)
        assert r.returncode == 0, (r.returncode, r.stdout, r.stderr, self.log()[-4000:])
        return json.loads(r.stdout)

    def shutdown(self, timeout=30.0):
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.ctl("shutdown")
        return self.proc.wait(timeout)

    def taskkill(self, winpid):
        """Ends gbrd.exe with Windows' own taskkill /F (TerminateProcess)."""
        r = subprocess.run([WINE, "taskkill.exe", "/F", "/PID", str(winpid)],
                           env=self.env, capture_output=True, text=True, timeout=60)
        self.proc.wait(30)
        return r

    def kill9(self):
        """Ends gbrd.exe at once, as TerminateProcess would."""
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        if self.proc is not None and self.proc.poll() is None:
            try:
                self.shutdown()
            except subprocess.TimeoutExpired:
                self.kill9()
