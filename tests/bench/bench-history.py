#!/usr/bin/env python3
# bench-history: what gbrd's cost is with a long history (issue 26), on
# real-shaped records: tool.call read_file of 1-8 KiB files in 25
# sessions (two records a call), plus one session of 4,000 messages.
# `make bench` copies this script to BUILD_DIR/tests/bench/bench-history;
# tests/bench/run runs it as `bench-history BUILD_DIR`.
#
# Figures, each beside its floor:
#   restart to first hello after SIGKILL   beside cat > /dev/null of the log
#   RSS after that restart                 beside gbrd idle on an empty log
#   first session.history of the 4,000-message session after the restart
#                                          beside the second one
#   the agent's first model request in a resumed conversation of -t turns
#   (a fake OpenAI-compatible server, tests/system/fakellm.py)
#                                          beside its next one
# usage: bench-history BUILD_DIR [-n calls] [-b max_bytes] [-t turns]
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time


class Conn:
    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.connect(path)
        self.buf = b""
        self.id = 0
        self.call("hello", {"protocol": 1, "client": "bench-history/1"})

    def call(self, method, params=None):
        r = json.loads(self.call_raw(method, params))
        if "error" in r:
            raise RuntimeError("%s: %s" % (method, r["error"]))
        return r["result"]

    def call_raw(self, method, params=None):
        """Sends a request; returns its reply line unparsed (the time
        gbrd takes, without the client's own JSON parsing). A reply starts
        with its jsonrpc and id members (daemon/ipc/dispatch.c)."""
        self.id += 1
        self.s.sendall(json.dumps({"jsonrpc": "2.0", "id": self.id,
                                   "method": method,
                                   "params": params or {}}).encode() + b"\n")
        mine = b'{"jsonrpc":"2.0","id":%d,' % self.id
        while True:
            while b"\n" not in self.buf:
                chunk = self.s.recv(1 << 22)
                if not chunk:
                    raise RuntimeError("gbrd closed the connection")
                self.buf += chunk
            line, self.buf = self.buf.split(b"\n", 1)
            if line.startswith(mine):
                return line

    def close(self):
        self.s.close()


class Gbrd:
    def __init__(self, build, root, config):
        self.bin = os.path.join(build, "gbrd")
        self.root = root
        os.makedirs(root, mode=0o700, exist_ok=True)
        self.sock = os.path.join(root, "sock")
        self.state = os.path.join(root, "state")
        conf = os.path.join(root, "gbrd.conf")
        with open(conf, "w") as f:
            f.write(config)
        self.env = dict(os.environ, GBR_SOCKET=self.sock,
                        GBR_STATE_DIR=self.state, GBR_CONFIG=conf,
                        XDG_CACHE_HOME=os.path.join(root, "cache"))
        for k in ("NOTIFY_SOCKET", "LISTEN_FDS", "LISTEN_PID",
                  "ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
            self.env.pop(k, None)
        self.proc = None

    def start(self):
        """Spawns gbrd; returns the seconds to its first hello reply."""
        t0 = time.monotonic()
        log = open(os.path.join(self.root, "gbrd.log"), "ab")
        self.proc = subprocess.Popen([self.bin, "-f"], env=self.env,
                                     stdin=subprocess.DEVNULL, stdout=log,
                                     stderr=log)
        while True:
            if self.proc.poll() is not None:
                raise RuntimeError("gbrd exited")
            try:
                c = Conn(self.sock)
                if c.call("daemon.status")["pid"] == self.proc.pid:
                    t = time.monotonic() - t0
                    c.close()
                    return t
                c.close()
            except (OSError, RuntimeError, KeyError):
                pass
            time.sleep(0.001)

    def rss_kb(self):
        with open("/proc/%d/status" % self.proc.pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        return 0

    def kill9(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait()

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def fake_llm(build):
    """tests/system/fakellm.py of the source tree the build came from."""
    src = os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))
    try:
        with open(os.path.join(build, "Makefile")) as f:
            for line in f:
                if line.startswith("abs_top_srcdir = "):
                    src = line.split("=", 1)[1].strip()
                    break
    except OSError:
        pass
    sys.path.insert(0, os.path.join(src, "tests", "system"))
    import fakellm
    return fakellm.FakeLLM()


def wait_idle(c, sid):
    while True:
        for s in c.call("session.list")["sessions"]:
            if s["id"] == sid and s["state"] == "idle":
                return
        time.sleep(0.002)


def agent_turn(c, fake, sid, k):
    """A turn of the agent: read a file, then answer; returns the seconds
    from session.send to the model's first request arriving."""
    fake.push({"tool_calls": [{"name": "read_file", "args": {
        "path": "f%02d.c" % (k % 64)}}]},
        {"text": "Read f%02d.c: " % (k % 64) + "it looks fine. " * 20})
    n = len(fake.llm_requests())
    t0 = time.monotonic()
    c.call("session.send", {"session": sid, "text": "look at file %d" % k})
    while len(fake.llm_requests()) == n:
        time.sleep(0.0002)
    t = time.monotonic() - t0
    wait_idle(c, sid)
    return t


def cat_seconds(d):
    t0 = time.monotonic()
    for f in sorted(os.listdir(d)):
        p = os.path.join(d, f)
        if os.path.isfile(p):
            subprocess.run(["cat", p], stdout=subprocess.DEVNULL, check=True)
    return time.monotonic() - t0


def main():
    args = sys.argv[1:]
    if not args:
        print("usage: bench-history BUILD_DIR [-n calls] [-b max_bytes] "
              "[-t agent_turns]", file=sys.stderr)
        return 2
    build, calls, budget, turns = args[0], 100000, "1G", 250
    i = 1
    while i < len(args):
        if args[i] == "-n":
            calls = int(args[i + 1])
        elif args[i] == "-b":
            budget = args[i + 1]
        elif args[i] == "-t":
            turns = int(args[i + 1])
        i += 2
    root = tempfile.mkdtemp(prefix="bench-history.",
                            dir=os.environ.get("TMPDIR", "/var/tmp"))
    try:
        return run(build, root, calls, budget, turns)
    finally:
        if os.environ.get("BENCH_KEEP") is None:
            shutil.rmtree(root, ignore_errors=True)


def run(build, root, calls, budget, turns):
    ws = os.path.join(root, "ws")
    os.makedirs(ws)
    rnd = random.Random(26)
    for k in range(64):
        with open(os.path.join(ws, "f%02d.c" % k), "w") as f:
            n = rnd.randint(1024, 8192)
            f.write("".join(rnd.choice("abcdefghij klmnop;\n(){}=+")
                            for _ in range(n)))
    os.makedirs(os.path.join(ws, ".gbr_envs"))
    with open(os.path.join(ws, ".gbr_envs", "default.ini"), "w") as f:
        f.write("[env]\nautonomy = full\n")
    fake = fake_llm(build)
    conf = ("[log]\nmax_bytes = %s\nfsync = no\n[session]\n"
            "history_messages = 1000000\nhistory_bytes = 1G\n"
            "[llm]\nprovider = openai\nbase_url = %s\nollama_url = off\n"
            % (budget, fake.base_url("openai")))
    try:
        return measure(build, root, ws, conf, fake, calls, turns)
    finally:
        fake.close()


def measure(build, root, ws, conf, fake, calls, turns):

    empty = Gbrd(build, os.path.join(root, "empty"), conf)
    empty.start()
    time.sleep(0.2)
    idle_rss = empty.rss_kb()
    empty.stop()

    g = Gbrd(build, os.path.join(root, "full"), conf)
    g.env["OPENAI_API_KEY"] = "bench-key"
    g.start()
    c = Conn(g.sock)
    # An agent's conversation: turns of a model that reads a 1-8 KiB file
    # and answers (four messages a turn), first, so a snapshot covers it.
    agent = c.call("session.create", {"workspace": ws})["id"]
    for k in range(turns):
        agent_turn(c, fake, agent, k)
    sids = [c.call("session.create", {"workspace": ws})["id"]
            for _ in range(25)]
    t0 = time.monotonic()
    # One long conversation first (the snapshot covers it, if there is
    # one): 2,000 tool calls, 4,000 messages.
    big = c.call("session.create", {"workspace": ws})["id"]
    for j in range(2000):
        c.call("tool.call", {"session": big, "tool": "read_file",
                             "args": {"path": "f%02d.c" % (j % 64)}})

    def worker(k):
        w = Conn(g.sock)
        for j in range(k, calls, len(sids)):
            w.call("tool.call", {"session": sids[k], "tool": "read_file",
                                 "args": {"path": "f%02d.c" % (j % 64)}})
        w.close()

    th = [threading.Thread(target=worker, args=(k,)) for k in range(25)]
    for t in th:
        t.start()
    for t in th:
        t.join()
    fill = time.monotonic() - t0
    st = c.call("daemon.status")
    dl = st["disklog"]
    c.close()
    logdir = os.path.join(g.state, "log")
    nbytes = sum(os.path.getsize(os.path.join(logdir, f))
                 for f in os.listdir(logdir))
    print("log: %d records, %.0f MiB on disk (%d segments, snapshot %s), "
          "written in %.1f s" % (dl["last_seq"], nbytes / 1048576.0,
                                 dl["segments"], dl["snapshot"], fill))

    g.kill9()
    restart = g.start()
    rss = g.rss_kb()
    c = Conn(g.sock)
    st = c.call("daemon.status")
    t0 = time.monotonic()
    raw = c.call_raw("session.history", {"session": big, "limit": 100000})
    first = time.monotonic() - t0
    t0 = time.monotonic()
    h1 = json.loads(raw)["result"]
    parse = time.monotonic() - t0
    t0 = time.monotonic()
    t0 = time.monotonic()
    raw = c.call_raw("session.history", {"session": big, "limit": 100000})
    second = time.monotonic() - t0
    h2 = json.loads(raw)["result"]
    # The agent's first request of its resumed conversation (its history
    # read back), beside the next one.
    resumed = agent_turn(c, fake, agent, turns)
    warm = agent_turn(c, fake, agent, turns + 1)
    body = len(fake.llm_requests()[-2].raw)
    t0 = time.monotonic()
    page = c.call_raw("session.history", {"session": big})
    newest = time.monotonic() - t0
    assert len(json.loads(page)["result"]["messages"]) == 1000
    assert h1 == h2 and h1["total"] == 4000, h1["total"]
    c.close()
    g.stop()
    floor = cat_seconds(logdir)
    print("%-44s %12s %16s" % ("", "gbrd", "floor"))
    print("%-44s %9.0f ms %13.0f ms" % (
        "restart to first hello (%d records)" % st["disklog"]["replay"]["records"],
        restart * 1000, floor * 1000) + "   (cat > /dev/null of the log)")
    print("%-44s %9.1f MiB %12.1f MiB" % (
        "RSS after restart", rss / 1024.0, idle_rss / 1024.0) +
        "   (gbrd idle, empty log)")
    print("%-44s %9.1f ms %13.1f ms" % (
        "first session.history (%d of 4,000 messages)" % len(
            h1["messages"]), first * 1000, second * 1000) +
        "   (the second one; %.1f MiB, until its last byte)" % (
            len(raw) / 1048576.0))
    print("%-44s %9.1f ms" % ("  then the newest 1,000 (the default page)",
                              newest * 1000))
    print("%-44s %9.1f ms" % ("  the client parsing the 4,000 (Python)",
                              parse * 1000))
    print("%-44s %9.1f ms %13.1f ms" % (
        "agent's first request, resumed (%d turns)" % turns, resumed * 1000,
        warm * 1000) + "   (its next one; %.0f KiB sent)" % (body / 1024.0))
    print("histories after restart: %s" % json.dumps(
        st["sessions"].get("histories")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
