"""Input in the REPL as a person types it, in a real terminal (tmux): a
message of several lines (Alt-Enter, Ctrl-J), a bracketed paste taken as
one message however many lines it has, Ctrl-C dropping what was held, and
approvals answered with a single key."""
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from test_repl import (ENV_QUESTION, GBR, PROFILE, Term, answer_of, approval_id,
                       ask, quit_repl, repl, sessions, terms, ws, aws,
                       wait_for)

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None,
                                reason="tmux is not installed (apt-get install tmux)")

# Fixtures imported from test_repl are used by name.
__all__ = ["terms", "ws", "aws"]


def users(d, sid):
    return [m["content"] for m in d.ctl_json("history", sid)["messages"]
            if m["role"] == "user"]


def paste(t, text):
    """Pastes text as a terminal does: bracketed, since gbr asked for it."""
    buf = "p%d" % os.getpid()
    t.tmux("set-buffer", "-b", buf, "--", text)
    t.tmux("paste-buffer", "-p", "-d", "-b", buf, "-t", t.name)


def test_alt_enter_and_ctrl_j_make_one_message(make_daemon, terms, ws):
    d = make_daemon()
    t = terms("multi", d.env, ws)
    repl(t)
    sid = sessions(d)[0]["id"]
    t.type("first line")
    t.keys("M-Enter")
    t.wait(r"^ +\.\.\.>\s*$")
    t.type("second line")
    t.keys("C-j")
    t.type("/not a command")
    # Nothing is sent before Enter.
    time.sleep(0.5)
    assert users(d, sid) == []
    t.keys("Enter")
    assert wait_for(lambda: users(d, sid)) == [
        "first line\nsecond line\n/not a command"]
    # The prompt is the ordinary one again, and one line is one message.
    t.wait(r"^gbr:%s>\s*$" % sid, timeout=20)
    assert wait_for(lambda: sessions(d)[0]["state"] == "idle", timeout=20)
    t.type("just one")
    t.keys("Enter")
    assert wait_for(lambda: len(users(d, sid)) == 2)
    assert users(d, sid)[1] == "just one"
    quit_repl(t)


def test_a_paste_is_one_message_and_ctrl_c_drops_it(make_daemon, terms, ws):
    d = make_daemon()
    t = terms("paste", d.env, ws)
    repl(t)
    sid = sessions(d)[0]["id"]
    lines = ["Traceback (most recent call last):",
             '  File "x.py", line 3, in <module>',
             "    main()",
             "ZeroDivisionError: division by zero"]
    # tmux sends the newlines of a paste as CR, as terminals do.
    t.type("look at this: ")
    paste(t, "\n".join(lines) + "\nand the tail")
    t.wait(r"^ +\.\.\.> and the tail$")
    s = t.screen()
    assert "look at this: Traceback (most recent call last):" in s
    assert re.search(r"^ +\.\.\.> ZeroDivisionError: division by zero$", s, re.M), s
    time.sleep(0.5)
    assert users(d, sid) == [], "a paste is not sent line by line"
    t.type(" here")
    t.keys("Enter")
    want = "look at this: " + "\n".join(lines) + "\nand the tail here"
    assert wait_for(lambda: users(d, sid)) == [want]
    assert wait_for(lambda: sessions(d)[0]["state"] == "idle", timeout=20)
    t.wait(r"^gbr:%s>\s*$" % sid, timeout=20)

    # Escape sequences in a paste are left out; the text stays.
    paste(t, "red \x1b[31mtext\x1b[0m\nsecond")
    t.wait(r"^ +\.\.\.> second$")
    # Ctrl-C drops the held lines and the line being typed.
    t.keys("C-c")
    t.wait(r"\^C \(1 line not sent\)")
    t.wait(r"^gbr:%s>\s*$" % sid)
    t.type("after")
    t.keys("Enter")
    assert wait_for(lambda: len(users(d, sid)) == 2)
    assert users(d, sid)[1] == "after", users(d, sid)

    # A paste without a newline is typed in place; a long one is shown cut.
    assert wait_for(lambda: sessions(d)[0]["state"] == "idle", timeout=20)
    t.wait(r"^gbr:%s>\s*$" % sid, timeout=20)
    paste(t, "\n".join("row %d" % i for i in range(40)) + "\n")
    t.wait(r"\(27 more lines pasted\)")
    t.keys("Enter")
    assert wait_for(lambda: len(users(d, sid)) == 3)
    assert users(d, sid)[2] == "\n".join("row %d" % i for i in range(40))
    quit_repl(t)


def test_approvals_take_a_single_key(make_daemon, terms, aws):
    d = make_daemon()
    t = terms("onekey", d.env, aws)
    repl(t)
    sid = sessions(d)[0]["id"]
    c, rid = ask(d, sid, "write_file", {"path": ".gbr_envs/x.ini", "content": PROFILE})
    s = t.wait(ENV_QUESTION)
    aid = approval_id(s)
    target = os.path.join(aws, ".gbr_envs", "x.ini")
    # "a" alone, no Enter: applied.
    t.type("a")
    t.wait(r"\? approval %s applied" % aid)
    assert "result" in answer_of(c, rid)
    with open(target) as f:
        assert f.read() == PROFILE
    t.wait(r"^gbr:%s>\s*$" % sid)

    # "d" alone asks for the reason at once; the reason is typed whole.
    c, rid = ask(d, sid, "write_file", {"path": ".gbr_envs/y.ini", "content": PROFILE})
    s = t.wait(ENV_QUESTION)
    aid = approval_id(s)
    t.type("d")
    t.wait(r"reason for denying \(Enter for none\)>\s*$")
    t.type("does not fit")
    t.keys("Enter")
    t.wait(r"denied: write_file \.gbr_envs/y\.ini \(reason: does not fit\)")
    assert answer_of(c, rid)["error"]["data"]["kind"] == "denied"
    assert not os.path.exists(os.path.join(aws, ".gbr_envs", "y.ini"))

    # Another letter is not an answer: it is typed, and Enter explains.
    c, rid = ask(d, sid, "write_file", {"path": ".gbr_envs/z.ini", "content": PROFILE})
    t.wait(ENV_QUESTION)
    t.type("x")
    time.sleep(0.3)
    assert sessions(d)[0]["state"] == "awaiting_approval"
    t.keys("Enter")
    t.wait(r"answer a \(approve\), d \(deny\)")
    t.type("d")
    t.wait(r"reason for denying")
    # An Enter right after the key goes with it ("d Enter" as before);
    # a second one is the empty reason.
    t.keys("Enter")
    time.sleep(0.3)
    assert sessions(d)[0]["state"] == "awaiting_approval"
    t.keys("Enter")
    assert answer_of(c, rid)["error"]["data"]["kind"] == "denied"

    # "a Enter" with a line put aside: the Enter does not send that line.
    t.wait(r"^gbr:%s>\s*$" % sid)
    t.type("not yet")
    c, rid = ask(d, sid, "write_file", {"path": ".gbr_envs/w.ini", "content": PROFILE})
    t.wait(ENV_QUESTION)
    t.type("a")
    t.keys("Enter")
    assert "result" in answer_of(c, rid)
    t.wait(r"^gbr:%s> not yet\s*$" % sid)
    time.sleep(0.5)
    assert users(d, sid) == []
    t.keys("C-u")
    quit_repl(t)


def test_an_enter_typed_ahead_still_sends(make_daemon, terms, ws, tmpdir_short):
    """Keys typed while gbr is busy between two lines (here a pager that
    takes its time) reach the terminal before gbr reads them; an Enter
    among them still sends, it does not become a newline of the message."""
    d = make_daemon()
    t = terms("ahead", d.env, ws)
    repl(t, prefix="PAGER='sleep 1.5; cat >/dev/null' ")
    sid = sessions(d)[0]["id"]
    t.type("/run seq 1 150")
    t.keys("Enter")
    t.wait(r"/show 1 for all")
    t.type("/show 1")
    t.keys("Enter")
    time.sleep(0.3)
    t.type("typed ahead")
    t.keys("Enter")
    assert wait_for(lambda: users(d, sid)) == ["typed ahead"]
    t.wait(r"^gbr:%s>\s*$" % sid, timeout=20)
    quit_repl(t)


def test_an_enter_typed_before_the_first_prompt_sends(make_daemon, terms, ws):
    """Keys typed while gbr still waits for the daemon (stopped here, so
    the wait is certain) come before the editor is set up; an Enter among
    them sends the message, and the shell gets its terminal back as it
    was (Enter still maps to a newline for the next program)."""
    d = make_daemon()
    t = terms("early", d.env, ws)
    t.keys("stty -a | grep -o -- '-*icrnl' | head -1", "Enter")
    t.wait(r"^icrnl\s*$")
    os.kill(d.proc.pid, signal.SIGSTOP)
    try:
        t.keys("clear; %s" % GBR, "Enter")
        time.sleep(1.0)
        # gbr has started and waits for the daemon's greeting.
        assert "Ctrl-D detaches" not in t.screen()
        t.type("typed early")
        t.keys("Enter")
        time.sleep(0.2)
    finally:
        os.kill(d.proc.pid, signal.SIGCONT)
    t.wait(r"Ctrl-D detaches")
    sid = wait_for(lambda: sessions(d))[0]["id"]
    assert wait_for(lambda: users(d, sid)) == ["typed early"]
    t.wait(r"^gbr:%s>\s*$" % sid, timeout=20)
    quit_repl(t)
    t.keys("clear; stty -a | grep -o -- '-*icrnl' | head -1", "Enter")
    t.wait(r"^icrnl\s*$")
    assert "-icrnl" not in t.screen()
