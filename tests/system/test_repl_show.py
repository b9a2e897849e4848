"""Tool results in the REPL as numbered summary lines, and /show N for all
of one: a long command output is one line on the screen, the rest one
command away; output taller than the terminal goes through $PAGER on a
terminal, and never for a piped gbr."""
import os
import re
import shutil
import stat
import subprocess

import pytest

from conftest import GBR
from test_repl import (PROFILE, QUESTION, Term, answer_of, approval_id,  # noqa: F401
                       ask, aws, quit_repl, repl, sessions, terms, wait_for, ws)

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None,
                                reason="tmux is not installed (apt-get install tmux)")


def pager_script(d, out):
    """A pager that appends what it reads to out, then a separator."""
    path = os.path.join(d, "pager.sh")
    with open(path, "w") as f:
        f.write("#!/bin/sh\ncat >> '%s'\necho '-- end --' >> '%s'\n" % (out, out))
    os.chmod(path, stat.S_IRWXU)
    return path


def pages(out):
    if not os.path.exists(out):
        return []
    # Colours are for the pager too (less -R): what is read is without them.
    with open(out) as f:
        return re.sub(r"\x1b\[[0-9;]*m", "", f.read()).split("-- end --\n")[:-1]


def piped(d, ws, lines, args=(), env=None):
    e = dict(d.env)
    e.update(env or {})
    r = subprocess.run([GBR] + list(args) + [ws], input="\n".join(lines) + "\n",
                       env=e, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, (r.stdout, r.stderr)
    return r.stdout


def test_long_output_is_one_line_and_show_pages_all_of_it(make_daemon, terms, ws,
                                                          tmpdir_short):
    d = make_daemon()
    with open(os.path.join(ws, "notes.txt"), "w") as f:
        f.write("line one\nline two\n")
    # Results made before the REPL attaches: it shows them from the history.
    # (One gbr each: a script's calls run at once, and finish in any order.)
    piped(d, ws, ["/run seq 1 412"])
    piped(d, ws, ['/tool read_file {"path": "notes.txt"}'])
    out = os.path.join(tmpdir_short, "paged.txt")
    pager = pager_script(tmpdir_short, out)

    t = terms("show", d.env, ws)
    repl(t, prefix="PAGER=%s " % pager)
    s = t.wait(r"^  = \[1\] run_command exit 0 in \d+ ms: 1 "
               r"\(\+411 lines, /show 1 for all\)$")
    assert re.search(r"^  = \[2\] read_file notes\.txt: 2 lines of 2", s, re.M), s
    assert not re.search(r"^  412$", s, re.M), s

    # Taller than the terminal (40 rows): through the pager, every line.
    t.type("/show 1")
    t.keys("Enter")
    assert wait_for(lambda: len(pages(out)) == 1)
    page = pages(out)[0].splitlines()
    assert page[0] == "[1] run_command:", page[:3]
    assert page[1:413] == ["  %d" % i for i in range(1, 413)], page[:3]
    assert re.match(r"= exit 0 \(\d+ ms\)$", page[413]), page[413:]
    t.wait(r"^gbr:[0-9a-f]{12}>\s*$")

    # Short: written on the screen, no pager. /show alone is the last one.
    t.type("/show")
    t.keys("Enter")
    t.wait(r"^\[2\] read_file:\n  line one\n  line two$")
    t.type("/show 999")
    t.keys("Enter")
    t.wait(r"there is no tool result \[999\] \(the last is \[2\]\)")
    t.type("/show x")
    t.keys("Enter")
    t.wait(r"usage: /show \[N\]")
    assert len(pages(out)) == 1

    # A result seen live (another client's) is numbered the same way.
    piped(d, ws, ["/run seq 1 60"])
    t.wait(r"^  = \[3\] run_command exit 0 in \d+ ms: 1 "
           r"\(\+59 lines, /show 3 for all\)$")
    t.type("/show 3")
    t.keys("Enter")
    assert wait_for(lambda: len(pages(out)) == 2)
    assert pages(out)[1].splitlines()[1:61] == ["  %d" % i for i in range(1, 61)]

    # /history shows the same results with the same numbers (short: no pager).
    t.type("/history")
    t.keys("Enter")
    t.wait(r"(^  = \[1\] run_command exit 0.*\n(.*\n)*){2}")
    s = t.wait(r"^gbr:[0-9a-f]{12}>\s*$")
    assert "[4]" not in s and len(pages(out)) == 2, s

    # Live output is cut on the screen after 100 lines; all of it is in
    # the result, one /show away: another client's run ...
    t.keys("clear", "Enter")
    piped(d, ws, ["/run seq 1 150"])
    s = t.wait(r"^  = \[4\] run_command exit 0 in \d+ ms: 1 "
               r"\(\+149 lines, /show 4 for all\)$")
    assert re.search(r"^  100\n  \.\.\. more output, cut here after 100 lines",
                     s, re.M), s
    assert not re.search(r"^  101$", s, re.M), s
    # ... and this one's own /run.
    t.keys("clear", "Enter")
    t.type("/run seq 1 130")
    t.keys("Enter")
    s = t.wait(r"^= exit 0 \(\d+ ms\)\n  \[5\]: /show 5 for all of its output$")
    assert re.search(r"^  100\n  \.\.\. more output, cut here", s, re.M), s
    assert not re.search(r"^  101$", s, re.M), s
    t.type("/show 5")
    t.keys("Enter")
    assert wait_for(lambda: len(pages(out)) == 3)
    assert pages(out)[2].splitlines()[1:131] == ["  %d" % i for i in range(1, 131)]
    t.wait(r"^gbr:[0-9a-f]{12}>\s*$")
    quit_repl(t)

    # A pager that cannot run: the text is written on the screen instead.
    repl(t, prefix="PAGER=/no/such/pager ")
    t.wait(r"^  = \[1\] run_command exit 0")
    t.type("/show 1")
    t.keys("Enter")
    t.wait(r"^  411\n  412\n= exit 0 \(\d+ ms\)$")
    t.wait(r"^gbr:[0-9a-f]{12}>\s*$")
    quit_repl(t)


def test_a_piped_gbr_shows_without_a_pager(make_daemon, ws, tmpdir_short):
    d = make_daemon()
    piped(d, ws, ["/run seq 1 300"])
    out = os.path.join(tmpdir_short, "paged.txt")
    pager = pager_script(tmpdir_short, out)
    text = piped(d, ws, ["/show", "/show 7", "/history 2"], args=["--history", "5"],
                 env={"PAGER": pager})
    assert re.search(r"^  = \[1\] run_command exit 0 in \d+ ms: 1 "
                     r"\(\+299 lines, /show 1 for all\)$", text, re.M), text
    assert re.search(r"^\[1\] run_command:\n(  \d+\n){300}= exit 0 \(\d+ ms\)$",
                     text, re.M), text
    assert "there is no tool result [7] (the last is [1])" in text
    assert not os.path.exists(out), "a piped gbr never pages"
    # Nothing shown yet: /show says so.
    text = piped(d, ws, ["/show"])
    assert "no tool result has been shown yet" in text
    text = piped(d, ws, ["/help"])
    assert re.search(r"^  /show \[N\] +all of tool result", text, re.M), text


def test_a_whole_diff_taller_than_the_terminal_is_paged(make_daemon, terms, aws,
                                                       tmpdir_short):
    d = make_daemon()
    out = os.path.join(tmpdir_short, "paged.txt")
    t = terms("diff", d.env, aws)
    repl(t, prefix="PAGER=%s " % pager_script(tmpdir_short, out))
    sid = sessions(d)[0]["id"]
    content = PROFILE + "".join("; line %d\n" % i for i in range(100))
    c, rid = ask(d, sid, "write_file", {"path": ".gbr_envs/x.ini", "content": content})
    aid = approval_id(t.wait(QUESTION))
    t.type("/approval %s" % aid)
    t.keys("Enter")
    assert wait_for(lambda: len(pages(out)) == 1)
    assert "+; line 0\n" in pages(out)[0] and "+; line 99\n" in pages(out)[0]
    # Back at the question, which is answered as ever.
    t.wait(QUESTION)
    t.type("d")
    t.keys("Enter")
    t.wait(r"reason for denying \(Enter for none\)>\s*$")
    t.keys("Enter")
    assert answer_of(c, rid)["error"]["data"]["kind"] == "denied"
    quit_repl(t)
