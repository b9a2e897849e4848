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
    # Keys typed before the prompt is up reach a terminal gbr has not set
    # up yet (its Enter arrives as Ctrl-J): wait for the prompt, as a
    # person does.
    t.wait(r"^gbr:[0-9a-f]{12}>\s*$")
    t.type("x")
    t.keys("Enter")
    s = t.wait(r"no_provider", escapes=True)
    assert "\x1b[31m! no_provider" in s
    t.keys("C-d")
    t.wait(r"detached from")
    t.keys("clear; NO_COLOR=1 %s" % GBR, "Enter")
    t.wait(r"Ctrl-D detaches")
    t.wait(r"^gbr:[0-9a-f]{12}>\s*$")
    t.type("y")
    t.keys("Enter")
    s = t.wait(r"! no_provider", escapes=True)
    assert "\x1b[31m" not in s.split("clear;")[-1]
    t.keys("C-d")
    # The error comes just before the turn's end: let the turn end first.
    wait_for(lambda: all(x["state"] == "idle" for x in sessions(d)))
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
    r = subprocess.run([GBR, "-s", sid], input="/sessions\n/bogus\n/env\n/tools\n",
                       env=d.env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0
    assert sid in r.stdout and "unknown command /bogus" in r.stdout
    assert "environment: default" in r.stdout
    # /tools: one line per tool gbrd lists, name first.
    c = d.conn()
    names = [t["name"] for t in c.call("tool.list")["result"]["tools"]]
    assert "read_file" in names and "run_command" in names
    for n in names:
        assert re.search(r"^  %s +\S" % re.escape(n), r.stdout, re.M), n


def test_help_is_the_command_table_and_aliases_work(make_daemon, ws):
    """/help is made from the commands' table: every command with its
    arguments and aliases, help wrapped under its column; /list and /exit
    are /sessions and /detach."""
    d = make_daemon()
    r = subprocess.run([GBR, ws], input="/help\n/list\n", env=d.env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    for left in ["/help, /?", "/sessions, /list", "/attach NAME", "/history [N]",
                 "/run PROGRAM [ARGS...]", "/tool NAME [JSON]", "/approve ID [session]",
                 "/deny ID [REASON]", "/edit ID", "/detach, /quit, /exit",
                 "/call METHOD [JSON]"]:
        assert re.search(r"^  %s +\S" % re.escape(left), r.stdout, re.M), left
    assert all(len(l) <= 76 for l in r.stdout.splitlines() if l.startswith("  /"))
    assert re.search(r"^ {20}and rules\); words as in a shell", r.stdout, re.M)
    assert sessions(d)[0]["id"] in r.stdout, "/list lists the sessions"
    # /exit leaves while stdin is still open.
    p = subprocess.Popen([GBR, ws], stdin=subprocess.PIPE, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, env=d.env)
    try:
        p.stdin.write(b"/exit\n")
        p.stdin.flush()
        assert p.wait(timeout=15) == 0
    finally:
        p.stdin.close()
        if p.poll() is None:
            p.kill()
            p.wait()


def test_run_and_tool_without_a_model(make_daemon, ws):
    """/run and /tool use the session's tools with no LLM configured: the
    output whole (escaped), how the command ended, errors with their kind.
    Input ended right after them: gbr waits for their answers."""
    d = make_daemon()
    with open(os.path.join(ws, "notes.txt"), "w") as f:
        f.write("line one\n")
    script = "\n".join([
        "/run sh -c 'sleep 0.3; echo \"a  b\"; echo oops >&2; exit 3'",
        "/run printf '%s|%s\\n' \"x y\" it\\'s",
        "/run printf '\\033]0;evil\\007bell\\n'",
        "/run printf 'a\\342\\200\\256b\\n'",
        "/tool read_file {\"path\": \"notes.txt\"}",
        "/tool read_file {\"path\": \"../outside\"}",
        "/run no-such-program-here",
        "/run 'unclosed",
        "/tool read_file [1]",
        "/run",
    ]) + "\n"
    r = subprocess.run([GBR, ws], input=script, env=d.env, capture_output=True,
                       text=True, timeout=60)
    assert r.returncode == 4, r.stderr     # some of them failed
    out = r.stdout
    # The slow one answered last, yet was waited for; its words kept whole.
    assert re.search(r"^/run sh -c .*:\n  a  b\n  oops\n= exit 3 \(\d+ ms\)$", out, re.M), out
    # Quotes and backslashes as in a shell, nothing expanded.
    assert re.search(r"^  x y\|it's$", out, re.M), out
    # A terminal escape in the output never reaches the terminal as one.
    assert "\x1b" not in out and "\x07" not in out
    assert re.search(r"^  \(stdout: \d+ bytes, not text\)$", out, re.M), out
    # Nor does a character that would turn the line around (U+202E).
    assert "\u202e" not in out and re.search(r"^  a\\u\{202E\}b$", out, re.M), out
    # Another tool: its result as JSON, after the call's own line.
    assert re.search(r'^/tool read_file:\n\{\n  "path": "notes.txt"', out, re.M), out
    assert "line one" in out
    assert re.search(r"^/tool read_file: ! .*\(path_traversal\)$", out, re.M), out
    assert re.search(r"^/run no-such-program-here: ! .*\(command_not_found\)$", out, re.M), out
    assert "! /run: a ' quote is not closed" in out
    assert "! /tool: JSON-ARGS must be a JSON object" in out
    assert "usage: /run PROGRAM" in out
    # They ran in the session, as the agent's calls do: in its history.
    sid = sessions(d)[0]["id"]
    hist = d.ctl_json("history", sid)["messages"]
    assert len([m for m in hist if m["role"] == "tool"]) >= 4, hist


def test_scripted_run_failure_is_gbr_exit_status(make_daemon, ws):
    """Without a terminal, gbr exits 4 if any /run or /tool failed (exit
    status, signal, error, bad usage), else 0: so a script can use it."""
    d = make_daemon()
    with open(os.path.join(ws, "notes.txt"), "w") as f:
        f.write("line one\n")
    cases = [
        (["/run true", '/tool read_file {"path": "notes.txt"}'], 0),
        (["/run false"], 4),
        (["/run false", "/run true"], 4),          # a later success clears nothing
        (["/run sh -c 'kill -9 $$'"], 4),
        (['/tool read_file {"path": "../outside"}'], 4),
        (["/run 'unclosed"], 4),
        (["/tool read_file [1]"], 4),
        (["/run sh -c 'exit 0'", "/help"], 0),
    ]
    for lines, want in cases:
        r = subprocess.run([GBR, ws], input="\n".join(lines) + "\n",
                           env=d.env, capture_output=True, text=True, timeout=60)
        assert r.returncode == want, (lines, r.returncode, r.stdout, r.stderr)


def test_run_waits_for_an_approval_without_blocking_the_prompt(make_daemon, terms, aws):
    d = make_daemon()
    with open(os.path.join(aws, ".gbr_envs", "default.ini"), "w") as f:
        f.write("[env]\nask_commands = echo *\n")
    t = terms("rn", d.env, aws)
    repl(t)
    t.type("/run echo asked")
    t.keys("Enter")
    # The command waits for a human: the prompt asks, gbr is not stuck.
    s = t.wait(CMD_QUESTION)
    assert "echo asked" in s
    t.type("a")
    t.keys("Enter")
    t.wait(r"^  asked\s*$")
    t.wait(r"^= exit 0 \(\d+ ms\)")
    quit_repl(t)


# --- Human approvals at the prompt -------------------------------------------

# The question: files have [e]dit, .gbr_envs/ no [s]ession-approve (it is
# asked every time), commands no [e]dit.
FULL_QUESTION = r"\[a\]pprove / \[d\]eny / \[e\]dit / \[s\]ession-approve\?\s*$"
ENV_QUESTION = r"\[a\]pprove / \[d\]eny / \[e\]dit\?\s*$"
CMD_QUESTION = r"\[a\]pprove / \[d\]eny / \[s\]ession-approve\?\s*$"
QUESTION = r"\[a\]pprove / \[d\]eny( / \[e\]dit)?( / \[s\]ession-approve)?\?\s*$"
PROFILE = "[env]\nmax_fix_attempts = 5\n"


def repl(t, sid=None, prefix=""):
    """Starts gbr in a terminal and waits for its prompt."""
    t.keys("clear; %s%s" % (prefix, GBR), "Enter")
    t.wait(r"Ctrl-D detaches")
    t.wait(r"^gbr:[0-9a-f]{12}>\s*$")


def ask(d, sid, tool, args):
    """A tool call that needs a human, sent from a raw client; the reply waits."""
    c = d.conn(timeout=30)
    rid = c.request("tool.call", {"session": sid, "tool": tool, "args": args})
    return c, rid


def answer_of(c, rid):
    """The reply to request rid, reading past the notifications."""
    while True:
        m = c.recv()
        if m.get("id") == rid and "method" not in m:
            return m


def approval_id(screen):
    return re.findall(r"\? approval (a[0-9a-f]+) needs a decision", screen)[-1]


def quit_repl(t):
    t.keys("C-d")
    t.wait(r"detached from")
    t.keys("echo EXIT=$?", "Enter")
    t.wait(r"^EXIT=0")


@pytest.fixture
def aws(ws):
    """A workspace with a .gbr_envs folder (profiles live there)."""
    os.makedirs(os.path.join(ws, ".gbr_envs"))
    return ws


def test_approve_at_the_prompt_shows_the_diff_and_applies(make_daemon, terms, aws):
    d = make_daemon()
    t = terms("ap", d.env, aws)
    repl(t)
    sid = sessions(d)[0]["id"]
    # A message is being typed when the approval comes: it is put aside.
    t.type("half typed")
    c, rid = ask(d, sid, "write_file", {"path": ".gbr_envs/x.ini", "content": PROFILE})
    s = t.wait(ENV_QUESTION, escapes=True)
    plain = t.screen()
    assert "needs a decision: write_file .gbr_envs/x.ini" in plain
    assert "why: .gbr_envs/ holds the environment profiles" in plain
    # The diff, coloured: additions green, the hunk header cyan.
    assert "\x1b[32m  +[env]\n  +max_fix_attempts = 5" in s, repr(s)
    assert re.search(r"\x1b\[36m(\x1b\[49m)?  @@ ", s), repr(s)
    assert "half typed" not in plain.splitlines()[-1]
    target = os.path.join(aws, ".gbr_envs", "x.ini")
    assert not os.path.exists(target)
    assert sessions(d)[0]["state"] == "awaiting_approval"
    aid = approval_id(plain)
    # .gbr_envs/ is asked every time: no approval for the whole session.
    t.type("s")
    t.keys("Enter")
    t.wait(r"changes to \.gbr_envs/ are asked every time")
    assert not os.path.exists(target)

    t.type("a")
    t.keys("Enter")
    t.wait(r"\? approval %s applied: write_file \.gbr_envs/x\.ini" % aid)
    r = answer_of(c, rid)
    assert "result" in r, r
    with open(target) as f:
        assert f.read() == PROFILE
    # The line that was being typed is back, the question gone.
    t.wait(r"^gbr:%s> half typed\s*$" % sid)
    assert wait_for(lambda: sessions(d)[0]["state"] != "awaiting_approval")
    t.keys("C-u")
    t.type("/approvals")
    t.keys("Enter")
    t.wait(r"^no approvals pending")
    quit_repl(t)


def test_deny_with_a_reason_and_a_long_diff(make_daemon, terms, aws):
    d = make_daemon()
    t = terms("deny", d.env, aws)
    # The whole diff is taller than the terminal: paged, by cat here.
    repl(t, prefix="PAGER=cat ")
    sid = sessions(d)[0]["id"]
    content = PROFILE + "".join("; line %d\n" % i for i in range(100))
    c, rid = ask(d, sid, "write_file", {"path": ".gbr_envs/x.ini", "content": content})
    s = t.wait(QUESTION)
    aid = approval_id(s)
    # A long diff is bounded, and can be seen whole.
    m = re.search(r"\.\.\. (\d+) more lines \(/approval %s shows them all\)" % aid, s)
    assert m and int(m.group(1)) > 50, s
    assert "; line 99" not in s
    t.type("/approval %s" % aid)
    t.keys("Enter")
    t.wait(r"\+; line 99\n[\s\S]*" + QUESTION)
    t.type("nonsense")
    t.keys("Enter")
    t.wait(r"answer a \(approve\), d \(deny\)")
    t.type("d")
    t.keys("Enter")
    t.wait(r"reason for denying \(Enter for none\)>\s*$")
    t.type("not today")
    t.keys("Enter")
    t.wait(r"\? approval %s denied: write_file \.gbr_envs/x\.ini \(reason: not today\)"
           % aid)
    r = answer_of(c, rid)
    assert r["error"]["data"]["kind"] == "denied", r
    assert not os.path.exists(os.path.join(aws, ".gbr_envs", "x.ini"))
    t.wait(r"^gbr:%s>\s*$" % sid)
    # Answering it again from the REPL is refused nicely.
    t.type("/approve %s" % aid)
    t.keys("Enter")
    t.wait(r"approval %s was already answered \(denied\)" % aid)
    quit_repl(t)


EDITOR = """#!/bin/sh
# A person editing: keeps what was proposed and its mode, writes new text.
stat -c %%a "$1" > %(out)s/mode
cp "$1" %(out)s/proposed
%(change)s
"""


def editor(dirpath, change):
    path = os.path.join(dirpath, "editor.sh")
    with open(path, "w") as f:
        f.write(EDITOR % {"out": dirpath, "change": change})
    os.chmod(path, 0o755)
    return path


def test_edit_writes_what_the_person_saved(make_daemon, terms, aws, tmpdir_short):
    d = make_daemon()
    out = os.path.join(tmpdir_short, "ed")
    os.makedirs(out)
    ed = editor(out, "printf '[env]\\nmax_fix_attempts = 7\\n' > \"$1\"")
    t = terms("edit", d.env, aws)
    repl(t, prefix="TMPDIR=%s EDITOR=%s " % (out, ed))
    sid = sessions(d)[0]["id"]
    c, rid = ask(d, sid, "write_file", {"path": ".gbr_envs/x.ini", "content": PROFILE})
    t.wait(QUESTION)
    aid = approval_id(t.screen())
    t.type("e")
    t.keys("Enter")
    s = t.wait(r"\? approval %s applied: write_file \.gbr_envs/x\.ini" % aid)
    assert re.search(r"\? approval %s edited: write_file" % aid, s)
    tmp = re.search(r"\* editing (\S+)", s).group(1)
    assert tmp.startswith(out + "/gbr-approval-") and tmp.endswith(".ini")
    assert not os.path.exists(tmp), "the temporary file is removed once sent"
    r = answer_of(c, rid)
    assert "result" in r, r
    with open(os.path.join(aws, ".gbr_envs", "x.ini")) as f:
        assert f.read() == "[env]\nmax_fix_attempts = 7\n"
    with open(os.path.join(out, "proposed")) as f:
        assert f.read() == PROFILE
    with open(os.path.join(out, "mode")) as f:
        assert f.read().strip() == "600"
    t.wait(r"^gbr:%s>\s*$" % sid)
    quit_repl(t)


def test_answered_elsewhere_while_the_editor_runs(make_daemon, terms, aws, tmpdir_short):
    d = make_daemon()
    out = os.path.join(tmpdir_short, "ed")
    os.makedirs(out)
    ed = editor(out, "while [ ! -e %s/go ]; do sleep 0.05; done\n"
                "printf 'late edit\\n' > \"$1\"" % out)
    t = terms("edit3", d.env, aws)
    repl(t, prefix="TMPDIR=%s EDITOR=%s " % (out, ed))
    sid = sessions(d)[0]["id"]
    c, rid = ask(d, sid, "write_file", {"path": ".gbr_envs/x.ini", "content": PROFILE})
    t.wait(QUESTION)
    aid = approval_id(t.screen())
    t.type("e")
    t.keys("Enter")
    assert wait_for(lambda: os.path.exists(os.path.join(out, "proposed")))
    # While the editor has the terminal, another client approves.
    r = d.conn().call("approval.resolve", {"id": aid, "decision": "approve"})
    assert "result" in r, r
    assert "result" in answer_of(c, rid)
    open(os.path.join(out, "go"), "w").close()
    # What happened meanwhile is shown once the editor is done; nothing is sent.
    s = t.wait(r"was answered while you edited: your text was not sent and is kept")
    assert re.search(r"\? approval %s approved in another terminal" % aid, s)
    kept = re.search(r"\* editing (\S+)", s).group(1)
    with open(kept) as f:
        assert f.read() == "late edit\n"
    with open(os.path.join(aws, ".gbr_envs", "x.ini")) as f:
        assert f.read() == PROFILE
    t.wait(r"^gbr:%s>\s*$" % sid)
    quit_repl(t)


def test_edit_of_an_edit_file_starts_from_the_file_with_the_change(
        make_daemon, terms, aws, tmpdir_short):
    with open(os.path.join(aws, ".gbr_envs", "default.ini"), "w") as f:
        f.write("[env]\nprotected_files = gleam.toml\n")
    with open(os.path.join(aws, "gleam.toml"), "w") as f:
        f.write('name = "app"\nversion = "1"\n')
    d = make_daemon()
    out = os.path.join(tmpdir_short, "ed")
    os.makedirs(out)
    ed = editor(out, "sed -i 's/version = \"2\"/version = \"3\"/' \"$1\"")
    t = terms("edit2", d.env, aws)
    repl(t, prefix="TMPDIR=%s EDITOR=%s " % (out, ed))
    sid = sessions(d)[0]["id"]
    c, rid = ask(d, sid, "edit_file", {"path": "gleam.toml", "old_string": 'version = "1"',
                                       "new_string": 'version = "2"'})
    s = t.wait(FULL_QUESTION)
    assert "why: a protected file" in s
    assert '-version = "1"' in s and '+version = "2"' in s
    aid = approval_id(s)
    # /edit with a prefix of the id.
    t.type("/edit %s" % aid[:6])
    t.keys("Enter")
    t.wait(r"\? approval %s applied: edit_file gleam\.toml" % aid)
    with open(os.path.join(out, "proposed")) as f:
        assert f.read() == 'name = "app"\nversion = "2"\n'
    with open(os.path.join(aws, "gleam.toml")) as f:
        assert f.read() == 'name = "app"\nversion = "3"\n'
    assert "result" in answer_of(c, rid)

    # An editor that saves the proposal unchanged sends nothing.
    ed2 = editor(out, "true")
    t.keys("C-d")
    t.wait(r"detached from")
    repl(t, prefix="TMPDIR=%s EDITOR=%s " % (out, ed2))
    c, rid = ask(d, sid, "edit_file", {"path": "gleam.toml", "old_string": 'version = "3"',
                                       "new_string": 'version = "4"'})
    t.wait(QUESTION)
    aid = approval_id(t.screen())
    t.type("e")
    t.keys("Enter")
    t.wait(r"no change, so nothing was sent")
    t.wait(QUESTION)
    with open(os.path.join(aws, "gleam.toml")) as f:
        assert f.read() == 'name = "app"\nversion = "3"\n'
    t.type("a")
    t.keys("Enter")
    t.wait(r"\? approval %s applied" % aid)
    with open(os.path.join(aws, "gleam.toml")) as f:
        assert f.read() == 'name = "app"\nversion = "4"\n'
    assert "result" in answer_of(c, rid)
    quit_repl(t)


def test_edit_starts_from_what_gbrd_proposes_not_the_file_now(
        make_daemon, terms, aws, tmpdir_short):
    """The editor gets gbrd's proposal (approval.list's content), not the
    REPL's own guess from the file as it is now: a file changed since the
    ask is edited from what the person was shown, and gbrd refuses the
    write (its pin), so nothing reaches the file."""
    with open(os.path.join(aws, ".gbr_envs", "default.ini"), "w") as f:
        f.write("[env]\nprotected_files = gleam.toml\n")
    with open(os.path.join(aws, "gleam.toml"), "w") as f:
        f.write('name = "app"\nversion = "1"\n')
    d = make_daemon()
    out = os.path.join(tmpdir_short, "ed")
    os.makedirs(out)
    ed = editor(out, "sed -i 's/version = \"2\"/version = \"3\"/' \"$1\"")
    t = terms("edit4", d.env, aws)
    repl(t, prefix="TMPDIR=%s EDITOR=%s " % (out, ed))
    sid = sessions(d)[0]["id"]
    c, rid = ask(d, sid, "edit_file", {"path": "gleam.toml", "old_string": 'version = "1"',
                                       "new_string": 'version = "2"'})
    s = t.wait(FULL_QUESTION)
    aid = approval_id(s)
    # The file changes after the ask: old_string is no longer in it.
    with open(os.path.join(aws, "gleam.toml"), "w") as f:
        f.write('name = "app"\nversion = "9"\n')
    t.type("e")
    t.keys("Enter")
    t.wait(r"\* editing \S+ \(the whole new file, as gbrd proposes it\)")
    r = answer_of(c, rid)
    assert "error" in r and r["error"]["data"]["kind"] == "changed_since_approval", r
    with open(os.path.join(out, "proposed")) as f:
        assert f.read() == 'name = "app"\nversion = "2"\n'
    with open(os.path.join(aws, "gleam.toml")) as f:
        assert f.read() == 'name = "app"\nversion = "9"\n'
    t.wait(r"^gbr:%s>\s*$" % sid)
    quit_repl(t)


def test_session_approve_lets_the_same_file_through_afterwards(make_daemon, terms, aws):
    with open(os.path.join(aws, ".gbr_envs", "default.ini"), "w") as f:
        f.write("[env]\nprotected_files = gleam.toml\n")
    d = make_daemon()
    t = terms("sess", d.env, aws)
    repl(t)
    sid = sessions(d)[0]["id"]
    c, rid = ask(d, sid, "write_file", {"path": "gleam.toml", "content": "v1\n"})
    t.wait(FULL_QUESTION)
    aid = approval_id(t.screen())
    t.type("s")
    t.keys("Enter")
    t.wait(r"\? approval %s applied: write_file gleam\.toml" % aid)
    assert "result" in answer_of(c, rid)
    # The grant: the same tool on the same file asks no more.
    r = d.conn().call("tool.call", {"session": sid, "tool": "write_file",
                                    "args": {"path": "gleam.toml", "content": "v2\n"}})
    assert "result" in r, r
    with open(os.path.join(aws, "gleam.toml")) as f:
        assert f.read() == "v2\n"
    assert sessions(d)[0]["state"] != "awaiting_approval"
    quit_repl(t)


def test_interrupted_by_a_crash_is_asked_again_with_a_warning(make_daemon, terms, aws):
    d = make_daemon(env={"GBR_TEST_CRASH_AFTER_APPLYING": "1"})
    raw = d.conn()
    sid = raw.call("session.create", {"workspace": aws})["result"]["id"]
    c, rid = ask(d, sid, "write_file", {"path": ".gbr_envs/x.ini", "content": PROFILE})
    aid = wait_for(lambda: raw.call("approval.list", {"session": sid})
                   ["result"]["approvals"])[0]["id"]
    # Approved, then gbrd dies between "applying" and "applied".
    d.conn().request("approval.resolve", {"id": aid, "decision": "approve"})
    d.expect_exit(137)
    del d.env["GBR_TEST_CRASH_AFTER_APPLYING"]
    d.start()
    t = terms("intr", d.env, aws)
    t.keys("%s -s %s" % (GBR, sid), "Enter")
    s = t.wait(r"needs a decision: write_file \.gbr_envs/x\.ini[\s\S]*" + QUESTION)
    assert approval_id(s) == aid
    assert re.search(r"^  ! gbrd stopped while applying this change", s, re.M), s
    t.type("a")
    t.keys("Enter")
    t.wait(r"\? approval %s applied: write_file \.gbr_envs/x\.ini" % aid)
    with open(os.path.join(aws, ".gbr_envs", "x.ini")) as f:
        assert f.read() == PROFILE
    quit_repl(t)


def test_two_terminals_one_answers_the_other_sees_it(make_daemon, terms, aws):
    d = make_daemon()
    t1 = terms("one", d.env, aws)
    repl(t1)
    sid = sessions(d)[0]["id"]
    c, rid = ask(d, sid, "write_file", {"path": ".gbr_envs/x.ini", "content": PROFILE})
    t1.wait(QUESTION)
    aid = approval_id(t1.screen())
    # A terminal attaching later finds it pending and asks too.
    t2 = terms("two", d.env, aws)
    t2.keys("%s -s %s" % (GBR, sid), "Enter")
    t2.wait(r"needs a decision: write_file \.gbr_envs/x\.ini[\s\S]*" + QUESTION)
    assert approval_id(t2.screen()) == aid
    assert sessions(d)[0]["attached"] == 2
    # A second one waits its turn behind the first.
    c2, rid2 = ask(d, sid, "write_file", {"path": ".gbr_envs/y.ini", "content": PROFILE})
    t1.wait(r"\? approval a[0-9a-f]+ waits its turn: write_file \.gbr_envs/y\.ini")
    t1.wait(r"\(1 more\) " + QUESTION)
    # One terminal starts to deny; the other approves first.
    t1.type("d")
    t1.keys("Enter")
    t1.wait(r"reason for denying \(Enter for none\)>\s*$")
    t2.type("a")
    t2.keys("Enter")
    t2.wait(r"\? approval %s applied: write_file \.gbr_envs/x\.ini" % aid)
    t1.wait(r"\? approval %s approved in another terminal: write_file \.gbr_envs/x\.ini"
            % aid)
    assert "result" in answer_of(c, rid)
    # Both move on to the second one.
    s1 = t1.wait(r"needs a decision: write_file \.gbr_envs/y\.ini[\s\S]*" + QUESTION)
    t2.wait(r"needs a decision: write_file \.gbr_envs/y\.ini[\s\S]*" + QUESTION)
    aid2 = approval_id(s1)
    assert aid2 != aid
    # /deny from a slash command, with a reason; the other terminal sees it.
    t2.type("/deny %s nope, not this one" % aid2)
    t2.keys("Enter")
    t1.wait(r"\? approval %s denied in another terminal: write_file \.gbr_envs/y\.ini "
            r"\(reason: nope, not this one\)" % aid2)
    r = answer_of(c2, rid2)
    assert r["error"]["data"]["kind"] == "denied"
    t1.wait(r"^gbr:%s>\s*$" % sid)
    t2.wait(r"^gbr:%s>\s*$" % sid)
    assert not os.path.exists(os.path.join(aws, ".gbr_envs", "y.ini"))
    quit_repl(t1)
    quit_repl(t2)


def test_what_is_shown_cannot_lie(make_daemon, terms, aws):
    with open(os.path.join(aws, ".gbr_envs", "default.ini"), "w") as f:
        f.write("[env]\nask_commands = echo *\n")
    d = make_daemon()
    t = terms("esc", d.env, aws)
    repl(t)
    sid = sessions(d)[0]["id"]
    # A command with an ANSI escape and a right-to-left override in it.
    c, rid = ask(d, sid, "run_command", {"argv": ["echo", "\x1b[31mred\u202eevil"]})
    s = t.wait(CMD_QUESTION)
    assert "\\u{001B}[31mred\\u{202E}evil" in s
    assert "\u202e" not in s
    assert "\x1b[31mred" not in t.screen(escapes=True)
    assert "[e]dit" not in s.splitlines()[-1], "a command has nothing to edit"
    t.type("d")
    t.keys("Enter")
    t.wait(r"reason for denying")
    t.keys("Enter")
    t.wait(r"denied: run_command \$ echo")
    assert answer_of(c, rid)["error"]["data"]["kind"] == "denied"
    # A diff with terminal escapes and a right-to-left override. (A path
    # with invisible characters is refused before any human is asked:
    # test_tools.py's one-meaning cases.)
    c, rid = ask(d, sid, "write_file", {"path": ".gbr_envs/ab.ini",
                                        "content": "x\x1b]0;pwned\x07\n\u202egood\n\u200bz\n"})
    s = t.wait(QUESTION)
    assert "write_file .gbr_envs/ab.ini" in s
    assert "+x\\u{001B}]0;pwned\\u{0007}" in s
    assert "+\\u{202E}good" in s
    assert "+\\u{200B}z" in s
    assert "\u200b" not in s and "\u202e" not in s
    t.type("d no")
    t.keys("Enter")
    t.wait(r"denied: write_file")
    assert answer_of(c, rid)["error"]["data"]["kind"] == "denied"
    quit_repl(t)


def test_plain_stdin_lists_and_answers_approvals(make_daemon, aws):
    d = make_daemon()
    r = subprocess.run([GBR, aws], input="/approvals\n", env=d.env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "no approvals pending" in r.stdout, r.stdout + r.stderr
    sid = sessions(d)[0]["id"]
    c, rid = ask(d, sid, "write_file", {"path": ".gbr_envs/x.ini", "content": PROFILE})
    raw = d.conn()
    listed = wait_for(lambda: raw.call("approval.list", {"session": sid})
                      ["result"]["approvals"])
    aid = listed[0]["id"]
    r = subprocess.run([GBR, aws], input="/approvals\n/approve %s\n" % aid, env=d.env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert "\x1b" not in r.stdout
    # Found pending on attach: shown whole, with how to answer it.
    assert "needs a decision: write_file .gbr_envs/x.ini" in r.stdout
    assert "+max_fix_attempts = 5" in r.stdout
    assert "answer with /approve %s" % aid in r.stdout
    assert "%s  write_file .gbr_envs/x.ini" % aid in r.stdout
    assert "result" in answer_of(c, rid)
    with open(os.path.join(aws, ".gbr_envs", "x.ini")) as f:
        assert f.read() == PROFILE
    r = subprocess.run([GBR, aws], input="/deny %s\n/approve\n/approval nosuch\n" % aid,
                       env=d.env, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert "was already answered" in r.stdout
    assert "usage: /approve ID [session]" in r.stdout
    assert "no approval nosuch is pending" in r.stdout


def test_startup_line_says_what_keeps_commands_in(make_daemon, terms, ws):
    # On a terminal: one line naming the layers that hold here.
    d = make_daemon()
    st = d.ctl_json("status")["security"]["runner"]
    t = terms("layers", d.env, ws)
    t.keys(GBR, "Enter")
    t.wait(r"Ctrl-D detaches")
    want = "own namespaces" if st["namespaces"]["active"] else "no namespaces"
    t.wait(r"\* commands: %s.*Landlock %s, seccomp on" % (
        want, "on" if st["landlock"]["active"] else "off"))
    t.keys("C-d")
    # Where commands are refused, the REPL says why even without a
    # terminal, and a /run fails with the same reason.
    d2 = make_daemon(config="[exec]\nseccomp = off\n")
    r = subprocess.run([GBR, ws], input="/run true\n", env=d2.env,
                       capture_output=True, text=True, timeout=30)
    assert "commands are refused here" in r.stdout + r.stderr
    assert "accept_risks = control" in r.stdout + r.stderr
    assert r.returncode == 4


def test_the_answer_and_command_output_stream_as_they_come(make_daemon, terms, ws):
    """Partial text is on the screen before the message ends, and a
    command's output line by line while it runs (live events repeat the
    last seq; the REPL used to drop them)."""
    from fakellm import FakeLLM
    from test_agent import profile, start
    fake = FakeLLM()
    try:
        profile(ws, "[env]\nautonomy = full\n")
        d = start(make_daemon, fake, "openai")
        fake.push({"text": "AAAA BBBB CCCC DDDD", "chunks": 4, "delay": 1.5})
        t = terms("stream", d.env, ws)
        repl(t)
        # The model the turns will ask is said at start.
        t.wait(r"\* model: openai \S+ \(http://127\.0\.0\.1:\d+")
        t.type("stream please")
        t.keys("Enter")
        s = t.wait(r"AAAA")
        assert "DDDD" not in s
        t.wait(r"AAAA BBBB CCCC DDDD")
        t.wait(r"^gbr:[0-9a-f]{12}>\s*$")

        fake.push({"tool_calls": [{"name": "run_command", "args": {"argv": [
            "sh", "-c", "echo out-first; sleep 3; echo out-second >&2"]}}]},
            {"text": "the command ran"})
        t.type("run it")
        t.keys("Enter")
        s = t.wait(r"^  out-first$")
        assert not re.search(r"^  out-second$", s, re.M), s
        assert "the command ran" not in s
        s = t.wait(r"^  out-second$")
        t.wait(r"the command ran")
        # Shown live once, then the result as one summary line.
        s = t.wait(r"^gbr:[0-9a-f]{12}>\s*$")
        assert len(re.findall(r"^  out-first$", s, re.M)) == 1, s
        quit_repl(t)
    finally:
        fake.close()


def test_profile_reload_and_refusal_say_what_and_why(make_daemon, terms, aws):
    """env.reloaded names the keys that changed; env.invalid gives its
    reason (the event's error) and what stays in force."""
    prof = os.path.join(aws, ".gbr_envs", "default.ini")
    with open(prof, "w") as f:
        f.write("[env]\nprotected_files = a.txt\n")
    d = make_daemon()
    t = terms("env", d.env, aws)
    repl(t)
    with open(prof + ".tmp", "w") as f:
        f.write("[env]\nprotected_files = b.txt\n")
    os.rename(prof + ".tmp", prof)
    t.wait(r"\* profile default reloaded \(changed on disk\): "
           r"env\.protected_files", timeout=20)
    with open(prof + ".tmp", "w") as f:
        f.write("[env]\nallowed_root = ../..\n")
    os.rename(prof + ".tmp", prof)
    s = t.wait(r"! profile default not applied: .*default\.ini:2", timeout=20)
    assert "the rules in force stay (default)" in s
    quit_repl(t)


def test_attach_to_a_bad_name_and_new_keep_the_repl_attached(make_daemon, terms, ws):
    """/attach with a name that is no session, and /new, used to leave the
    REPL detached (session.history asked with limit 0) while the prompt
    showed a session: messages were sent and answered, and nothing shown."""
    d = make_daemon()
    t = terms("att", d.env, ws)
    repl(t)
    first = sessions(d)[0]["id"]
    t.type("/attach no-such-session")
    t.keys("Enter")
    t.wait(r"still on %s" % first)
    t.type("still here")
    t.keys("Enter")
    t.wait(r"> still here\n(.*\n)*.*no_provider")
    assert wait_for(lambda: [s["attached"] for s in sessions(d)] == [1])

    t.type("/new other")
    t.keys("Enter")
    t.wait(r"new session other")
    t.wait(r"^gbr:other>\s*$")
    t.type("hello other")
    t.keys("Enter")
    t.wait(r"> hello other\n(.*\n)*.*no_provider")
    by = {s.get("name") or s["id"]: s for s in sessions(d)}
    assert by["other"]["attached"] == 1 and by[first]["attached"] == 0, by
    assert by["other"]["messages"] >= 1

    t.type("/attach %s" % first)
    t.keys("Enter")
    t.wait(r"attached to %s" % first)
    t.type("back again")
    t.keys("Enter")
    t.wait(r"> back again\n(.*\n)*.*no_provider")
    quit_repl(t)


def test_run_shows_its_output_once(make_daemon, terms, ws):
    """/run's output is on the screen once: live as the command runs, then
    only how it ended (it used to print twice)."""
    d = make_daemon()
    t = terms("run1", d.env, ws)
    repl(t)
    t.type("/run sh -c 'echo once-only; sleep 1; echo second-line >&2'")
    t.keys("Enter")
    t.wait(r"^= exit 0 \(\d+ ms\)$")
    s = t.wait(r"^gbr:[0-9a-f]{12}>\s*$")
    assert len(re.findall(r"^  once-only$", s, re.M)) == 1, s
    assert len(re.findall(r"^  second-line$", s, re.M)) == 1, s
    quit_repl(t)


def test_a_daemon_stopped_on_purpose_stays_stopped(make_daemon, terms, ws):
    """gbrctl shutdown with a REPL open: the REPL used to start another
    gbrd at once, with the REPL's environment. It says the daemon was
    stopped and how to start it, starts none, and comes back once someone
    starts gbrd; a gbrd killed without a word is still started again."""
    d = make_daemon()
    t = terms("stop", d.env, ws)
    repl(t)
    sid = sessions(d)[0]["id"]
    r = d.ctl("shutdown")
    assert r.returncode == 0, r.stderr
    d.expect_exit(0)
    t.wait(r"gbrd was stopped \(requested by client pid \d+\) and is not "
           r"started again on its own")
    time.sleep(2.5)
    assert not os.path.exists(d.socket), "a gbrd was started again"
    t.type("hello while stopped")
    t.keys("Enter")
    t.wait(r"gbrd is stopped: not sent")
    d.start()
    t.wait(r"gbrd is back; reconnected", timeout=20)
    t.type("after the restart")
    t.keys("Enter")
    t.wait(r"> after the restart\n(.*\n)*.*no_provider")
    msgs = [m["content"] for m in d.ctl_json("history", sid)["messages"]
            if m["role"] == "user"]
    assert msgs == ["after the restart"], msgs
    # Killed without a word: the REPL starts gbrd again, as before.
    d.kill9()
    t.wait(r"gbrd restarted \(new epoch", timeout=20)
    assert os.path.exists(d.socket)
    quit_repl(t)
    assert d.ctl("shutdown").returncode == 0


def test_gbrctl_send_streams_on_a_terminal(make_daemon, terms, ws):
    """On a terminal (stdout line-buffered) gbrctl send printed the answer
    only once a whole line was in; it shows as it streams."""
    from fakellm import FakeLLM
    from test_agent import start
    fake = FakeLLM()
    try:
        d = start(make_daemon, fake, "openai")
        d.ctl("new", "--name", "tty", ws)
        fake.push({"text": "AAAA BBBB CCCC DDDD", "chunks": 4, "delay": 1.5})
        t = terms("ctl", d.env, ws)
        t.keys("clear; %s send tty 'stream please'; echo EXIT=$?" % GBRCTL, "Enter")
        s = t.wait(r"AAAA")
        assert "DDDD" not in s
        t.wait(r"AAAA BBBB CCCC DDDD")
        t.wait(r"^EXIT=0")
    finally:
        fake.close()


def test_non_ascii_text_is_shown_as_it_is(make_daemon, ws):
    """/tool's result showed 日本語 as \\u65E5...; text is printed as it is,
    while a character that turns the line around is still escaped."""
    d = make_daemon()
    with open(os.path.join(ws, "jp.txt"), "w", encoding="utf-8") as f:
        f.write("日本語 and caf\u00e9, evil \u202eright\n")
    r = subprocess.run([GBR, ws], input='/tool read_file {"path": "jp.txt"}\n',
                       env=d.env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "日本語 and café" in r.stdout, r.stdout
    assert "\\u65e5" not in r.stdout.lower()
    assert "\u202e" not in r.stdout and "\\u{202E}" in r.stdout, r.stdout


def test_status_is_for_a_person(make_daemon, ws):
    """/status printed daemon.status as JSON; it says which session, the
    model and provider the next turn asks, tokens, approvals and gbrd."""
    from fakellm import FakeLLM
    from test_agent import start
    fake = FakeLLM()
    try:
        d = start(make_daemon, fake, "anthropic", "model = claude-test-1\n")
        fake.push({"text": "hi there", "usage": {"input": 120, "output": 7}})
        r = subprocess.run([GBR, ws], input="hello\n", env=d.env,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        # Each turn says what it cost.
        assert re.search(r"^\* turn 1: 120 tokens in, 7 out$", r.stdout, re.M), r.stdout
        # The same folder's session, once its turn has ended.
        r = subprocess.run([GBR, ws], input="/status\n", env=d.env,
                           capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
        out = r.stdout
        assert re.search(r"^model +anthropic claude-test-1 \(http://127\.0\.0\.1:",
                         out, re.M), out
        assert re.search(r"^tokens +this session in 120, out 7", out, re.M), out
        assert re.search(r"^session +[0-9a-f]{12} on ", out, re.M), out
        assert re.search(r"^approvals +0 pending", out, re.M), out
        # Who is attached: this gbr (a gbrctl attach would be listed too).
        assert re.search(r"^attached +gbr/\S+, pid \d+ \(this one\)$", out, re.M), out
        assert re.search(r"^gbrd +\d+\.\d+\.\d+, pid \d+", out, re.M), out
        assert '"uptime_ms"' not in out
        # Without a provider it says why.
        d2 = make_daemon(config="[llm]\nollama_url = off\n")
        r = subprocess.run([GBR, ws], input="/status\n", env=d2.env,
                           capture_output=True, text=True, timeout=60)
        assert re.search(r"^model +none: ", r.stdout, re.M), r.stdout
    finally:
        fake.close()


def test_a_piped_gbr_prints_only_what_its_lines_produce(make_daemon, ws):
    """Piped, gbr printed the session's old history on attaching; a
    script sees only what its own lines produce, unless --history asks."""
    d = make_daemon()
    r = subprocess.run([GBR, ws], input="an old message\n", env=d.env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "> an old message" in r.stdout
    r = subprocess.run([GBR, ws], input="/run echo fresh-output\n", env=d.env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert "fresh-output" in r.stdout and "an old message" not in r.stdout, r.stdout
    r = subprocess.run([GBR, "--history", "5", ws], input="", env=d.env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 0 and "> an old message" in r.stdout, r.stdout
    r = subprocess.run([GBR, "--history", "lots", ws], input="", env=d.env,
                       capture_output=True, text=True, timeout=30)
    assert r.returncode == 2 and "--history takes 0 to 1000" in r.stderr


def test_messages_typed_during_a_turn_are_queued(make_daemon, terms, ws):
    """A message typed while a turn ran was refused ("a turn is running");
    it is queued, shown as queued, and sent when the turn ends. Ctrl-C
    clears the queue with the turn."""
    d = make_daemon(env={"GBR_TEST_TURN_MS": "3000"})
    env = dict(d.env)
    env.pop("GBR_TEST_TURN_MS", None)
    t = terms("queue", env, ws)
    repl(t)
    sid = sessions(d)[0]["id"]
    t.type("first one")
    t.keys("Enter")
    t.wait(r"\d+\.\ds>")
    t.type("second one")
    t.keys("Enter")
    t.wait(r"queued \(1 waiting\)")
    t.type("third one")
    t.keys("Enter")
    t.wait(r"queued \(2 waiting\)")
    assert wait_for(lambda: [m["content"] for m in d.ctl_json("history", sid)[
        "messages"] if m["role"] == "user"] == ["first one", "second one",
                                                "third one"], timeout=40)
    assert wait_for(lambda: sessions(d)[0]["state"] == "idle", timeout=40)
    t.wait(r"> third one\n(.*\n)*.*no_provider", timeout=40)
    # Ctrl-C cancels the turn and clears what waits. The turn lasts 3 s so
    # that a loaded machine still presses it before the turn ends (seen in
    # CI with 1.5 s: the turn ended first and sent the queued message).
    t.type("fourth one")
    t.keys("Enter")
    t.wait(r"\d+\.\ds>")
    t.type("never sent")
    t.keys("Enter")
    t.wait(r"queued \(1 waiting\)")
    t.keys("C-c")
    t.wait(r"1 queued message cleared")
    t.wait(r"^gbr:%s>\s*$" % sid, timeout=40)
    time.sleep(2)
    users = [m["content"] for m in d.ctl_json("history", sid)["messages"]
             if m["role"] == "user"]
    assert users[-1] == "fourth one" and "never sent" not in users, users
    quit_repl(t)


def test_the_start_names_the_project_and_its_check(make_daemon, terms, ws):
    """A Rust folder: the REPL says so at start, with the check that runs
    after each change; a folder of no known kind gets no such line."""
    with open(os.path.join(ws, "Cargo.toml"), "w") as f:
        f.write('[package]\nname = "app"\nversion = "0.1.0"\n')
    d = make_daemon()
    t = terms("eco", d.env, ws)
    repl(t)
    s = t.wait(r"\* project: rust; after a change: cargo check")
    assert s.index("* project:") < s.index("Ctrl-D detaches")
    plain = os.path.join(os.path.dirname(ws), "plain")
    os.makedirs(plain)
    t2 = terms("plain", d.env, plain)
    repl(t2)
    assert "* project:" not in t2.screen()
