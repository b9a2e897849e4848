"""The gbr REPL driven as a person would, in a real terminal: tmux on a
private server, keys sent with send-keys, the screen read with
capture-pane. Covers typing a message and seeing the outcome, the spinner,
Ctrl-C, Ctrl-D, a second terminal seeing the same session, closing the
terminal (SIGHUP), colours and NO_COLOR, and plain stdin for scripts."""
import json
import os
import re
import shutil
import subprocess
import time
import uuid

import pytest

from conftest import GBR, GBRCTL

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None,
                                reason="tmux is not installed (apt-get install tmux)")


class Term:
    """One tmux window running a shell on a private tmux server."""

    def __init__(self, server, name, env, cwd):
        self.server, self.name = server, name
        envfile = os.path.join(cwd, ".env-%s" % name)
        with open(envfile, "w") as f:
            for k, v in env.items():
                if k.startswith(("GBR", "XDG_", "ASAN", "UBSAN", "NO_COLOR", "PATH")):
                    f.write("export %s='%s'\n" % (k, v.replace("'", "'\\''")))
        self.tmux("new-session", "-d", "-s", name, "-x", "120", "-y", "40",
                  "-c", cwd, "env -i HOME=%s TERM=xterm-256color LANG=C.UTF-8 "
                  "bash --norc --noprofile" % cwd)
        self.keys("source %s; PS1='$ '; clear" % envfile, "Enter")
        time.sleep(0.2)

    def tmux(self, *args):
        return subprocess.run(["tmux", "-L", self.server, "-f", "/dev/null"] + list(args),
                              capture_output=True, text=True, timeout=10)

    def keys(self, *keys):
        self.tmux("send-keys", "-t", self.name, *keys)

    def type(self, text):
        self.tmux("send-keys", "-t", self.name, "-l", text)

    def screen(self, escapes=False):
        args = ["capture-pane", "-p", "-t", self.name, "-S", "-200"]
        if escapes:
            args.insert(2, "-e")
        return self.tmux(*args).stdout

    def wait(self, pattern, timeout=15.0, escapes=False):
        deadline = time.time() + timeout
        while time.time() < deadline:
            s = self.screen(escapes)
            if re.search(pattern, s, re.M):
                return s
            time.sleep(0.05)
        raise AssertionError("screen never matched %r:\n%s" % (pattern, self.screen()))

    def kill(self):
        self.tmux("kill-session", "-t", self.name)


@pytest.fixture
def terms(tmpdir_short):
    server = "gbrt-" + uuid.uuid4().hex[:8]
    made = []

    def make(name, env, cwd):
        t = Term(server, name, env, cwd)
        made.append(t)
        return t

    yield make
    subprocess.run(["tmux", "-L", server, "kill-server"], capture_output=True)


def gbr_pids(sock):
    out = subprocess.run(["pgrep", "-f", "^%s( |$)" % GBR], capture_output=True, text=True).stdout
    return [int(p) for p in out.split()]


def sessions(d):
    return d.ctl_json("sessions")["sessions"]


def wait_for(pred, timeout=10.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = pred()
        if v:
            return v
        time.sleep(0.05)
    raise AssertionError("condition never held")


@pytest.fixture
def ws(tmpdir_short):
    d = os.path.join(tmpdir_short, "proj")
    os.makedirs(d)
    return d


def test_message_ctrl_c_ctrl_d_and_a_second_terminal(make_daemon, terms, ws):
    d = make_daemon(env={"GBR_TEST_TURN_MS": "1500"})
    env = dict(d.env)
    env.pop("GBR_TEST_TURN_MS", None)
    t1 = terms("one", env, ws)
    t1.keys(GBR, "Enter")
    t1.wait(r"Ctrl-D detaches")
    t1.wait(r"^gbr:[0-9a-f]{12}>\s*$")
    sid = sessions(d)[0]["id"]

    # A message: the spinner with elapsed time, then the outcome.
    t1.type("hello from the repl")
    t1.keys("Enter")
    t1.wait(r"gbr:%s [|/\\-] \d+\.\ds>" % sid)
    t1.wait(r"no_provider: No LLM provider is configured yet")
    t1.wait(r"^gbr:%s>\s*$" % sid)

    # Ctrl-C cancels the running turn.
    t1.type("a slow question")
    t1.keys("Enter")
    t1.wait(r"\d+\.\ds>")
    t1.keys("C-c")
    t1.wait(r"\^C cancelling turn 2")
    t1.wait(r"turn 2 cancelled")
    assert wait_for(lambda: sessions(d)[0]["state"] == "idle")

    # Ctrl-C on a half-typed line clears it; nothing is sent.
    t1.type("never sent")
    t1.keys("C-c")
    t1.wait(r"never sent\^C")
    assert sessions(d)[0]["messages"] == 2

    # A second terminal attaches to the same session and sees the history.
    t2 = terms("two", env, ws)
    t2.keys("%s -s %s" % (GBR, sid), "Enter")
    t2.wait(r"> hello from the repl\n> a slow question")
    assert sessions(d)[0]["attached"] == 2
    # Input from either terminal reaches both.
    t2.type("typed in two")
    t2.keys("Enter")
    t1.wait(r"> typed in two")
    t1.wait(r"^gbr:%s>\s*$" % sid)
    t2.wait(r"no_provider")

    # Ctrl-D detaches; the session stays, with its history.
    t1.keys("C-d")
    t1.wait(r"detached from %s; it keeps running" % sid)
    # gbr exited cleanly (a sanitizer report would make this 99).
    t1.keys("echo EXIT=$?", "Enter")
    t1.wait(r"^EXIT=0")
    assert wait_for(lambda: sessions(d)[0]["attached"] == 1)
    t2.keys("C-d")
    t2.wait(r"detached from")
    assert wait_for(lambda: sessions(d)[0]["attached"] == 0)
    h = d.ctl_json("history", sid)
    assert [m["content"] for m in h["messages"]] == \
        ["hello from the repl", "a slow question", "typed in two"]

    # Re-attaching later shows the same history.
    t1.keys("clear; %s" % GBR, "Enter")
    t1.wait(r"attached to session %s" % sid)
    t1.wait(r"> hello from the repl\n> a slow question\n> typed in two")
    t1.type("/quit")
    t1.keys("Enter")
    t1.wait(r"detached from")
    t1.keys("echo EXIT=$?", "Enter")
    t1.wait(r"^EXIT=0")
    t2.keys("echo EXIT=$?", "Enter")
    t2.wait(r"^EXIT=0")


def test_closing_the_terminal_detaches_cleanly(make_daemon, terms, ws):
    d = make_daemon()
    t = terms("hup", d.env, ws)
    t.keys(GBR, "Enter")
    t.wait(r"Ctrl-D detaches")
    assert wait_for(lambda: sessions(d) and sessions(d)[0]["attached"] == 1)
    before = set(gbr_pids(d.socket))
    assert before
    t.kill()   # the terminal goes away: SIGHUP
    assert wait_for(lambda: sessions(d)[0]["attached"] == 0)
    assert wait_for(lambda: not (set(gbr_pids(d.socket)) & before))
    assert sessions(d)[0]["state"] == "idle"


def test_colours_only_on_a_terminal_and_never_with_no_color(make_daemon, terms, ws):
    d = make_daemon()
    t = terms("color", d.env, ws)
    t.keys(GBR, "Enter")
    t.wait(r"Ctrl-D detaches")
    t.type("x")
    t.keys("Enter")
    s = t.wait(r"no_provider", escapes=True)
    assert "\x1b[31m! no_provider" in s
    t.keys("C-d")
    t.wait(r"detached from")
    t.keys("clear; NO_COLOR=1 %s" % GBR, "Enter")
    t.wait(r"Ctrl-D detaches")
    t.type("y")
    t.keys("Enter")
    s = t.wait(r"! no_provider", escapes=True)
    assert "\x1b[31m" not in s.split("clear;")[-1]
    t.keys("C-d")
    # Not a terminal: plain text, no escapes at all.
    r = subprocess.run([GBR, ws], input="plain\n", env=d.env, capture_output=True,
                       text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout
    assert "> plain" in r.stdout and "! no_provider" in r.stdout


def test_plain_stdin_scripts_the_repl(make_daemon, ws):
    d = make_daemon(env={"GBR_TEST_TURN_MS": "300"})
    r = subprocess.run([GBR, ws], input="first\n/history\n", env=d.env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    # The line waits for its turn only when input ended: /history came first.
    assert r.stdout.count("> first") == 2 and "no_provider" in r.stdout
    r = subprocess.run([GBR, "--list"], env=d.env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and os.path.realpath(ws) in r.stdout
    sid = sessions(d)[0]["id"]
    r = subprocess.run([GBR, "-s", "nosuch"], input="", env=d.env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 1 and "session_not_found" in r.stdout + r.stderr
    r = subprocess.run([GBR, "-s", sid], input="/sessions\n/bogus\n/env\n", env=d.env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0
    assert sid in r.stdout and "unknown command /bogus" in r.stdout
    assert "environment: default" in r.stdout
