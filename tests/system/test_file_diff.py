"""The diff in write_file's and edit_file's results, against a real gbrd:
exactly the removed and added lines, a new file as only '+' lines, no
diff for a binary or a huge file (diff_omitted), a long one cut
(diff_truncated), an approved write of a protected file carrying one too,
the history keeping it, and gbrctl history showing it under the result."""
import os
import subprocess

import test_agent as agent
from conftest import GBRCTL
from test_agent import fake  # noqa: F401 (a fixture)
from test_tools import call, world  # noqa: F401 (world is a fixture)
from test_approvals import (GLEAM_NEW, answer, ask, new_session, resolve,
                            tool_results, ws)  # noqa: F401 (ws: a fixture)


def result(world, tool, **args):
    r = call(world, tool, **args)
    assert "result" in r, r
    return r["result"]["result"]


def hunks(diff):
    """The lines of a diff after its two header lines."""
    lines = diff.split("\n")
    assert lines[0].startswith("--- a/") and lines[1].startswith("+++ b/")
    return [l for l in lines[2:] if l]


def test_write_over_a_file_shows_what_changed(world):
    with open(os.path.join(world["ws"], "f.txt"), "w") as f:
        f.write("one\ntwo\nthree\n")
    r = result(world, "write_file", path="f.txt", content="one\n2\nthree\n")
    assert r["created"] is False
    assert r["diff"].startswith("--- a/f.txt\n+++ b/f.txt\n")
    assert hunks(r["diff"]) == ["@@ -1,3 +1,3 @@", " one", "-two", "+2",
                                " three"]
    assert "diff_truncated" not in r and "diff_omitted" not in r


def test_new_file_is_all_additions(world):
    r = result(world, "write_file", path="sub/new.txt", content="a\nb\n")
    assert r["created"] is True
    assert r["diff"] == "--- a/sub/new.txt\n+++ b/sub/new.txt\n" \
        "@@ -0,0 +1,2 @@\n+a\n+b\n"


def test_emptying_a_file_is_all_removals(world):
    r = result(world, "write_file", path="hello.txt", content="")
    assert hunks(r["diff"]) == ["@@ -1 +0,0 @@", "-hello"]


def test_edit_shows_the_replaced_lines(world):
    text = "".join("line %d\n" % i for i in range(1, 21))
    with open(os.path.join(world["ws"], "e.txt"), "w") as f:
        f.write(text)
    r = result(world, "edit_file", path="e.txt", old_string="line 10\n",
               new_string="ten\nand more\n")
    assert r["replacements"] == 1
    h = hunks(r["diff"])
    assert h[0] == "@@ -7,7 +7,8 @@"
    assert [l for l in h if l[0] in "+-"] == ["-line 10", "+ten", "+and more"]
    assert len([l for l in h if l[0] == " "]) == 6


def test_binary_has_no_diff(world):
    with open(os.path.join(world["ws"], "b.bin"), "wb") as f:
        f.write(b"\x00\x01\x02")
    r = result(world, "write_file", path="b.bin", content="text now\n")
    assert r["diff_omitted"] == "binary" and "diff" not in r
    # (New content cannot hold a NUL: gbrd's JSON refuses \u0000.)


def test_huge_old_file_has_no_diff(world):
    with open(os.path.join(world["ws"], "huge.txt"), "w") as f:
        f.write(("x" * 99 + "\n") * 50000)          # 5,000,000 bytes
    r = result(world, "write_file", path="huge.txt", content="small\n")
    assert r["diff_omitted"] == "too large" and "diff" not in r
    with open(os.path.join(world["ws"], "huge.txt")) as f:
        assert f.read() == "small\n"


def test_long_diff_is_cut(world):
    content = "".join("a new line number %d\n" % i for i in range(6000))
    r = result(world, "write_file", path="long.txt", content=content)
    assert r["diff_truncated"] is True
    assert len(r["diff"].encode()) <= 64 * 1024 + 200
    h = hunks(r["diff"])
    assert h[0] == "@@ -0,0 +1,6000 @@"
    # Cut after a whole line: every line is one the file has.
    assert all(l.startswith("+a new line number ") for l in h[1:])
    assert h[-1] == "+a new line number %d" % (len(h) - 2)
    assert r["diff"].endswith("\n")


def test_history_keeps_the_diff_and_gbrctl_shows_it(world):
    r = result(world, "write_file", path="hello.txt", content="hi there\n")
    h = world["c"].call("session.history",
                        {"session": world["sid"]})["result"]["messages"]
    assert h[-1]["role"] == "tool" and h[-1]["result"]["diff"] == r["diff"]
    out = world["d"].ctl("history", world["sid"])
    assert out.returncode == 0, out.stderr
    lines = out.stdout.split("\n")
    i = [n for n, l in enumerate(lines) if "write_file" in l and "replaced"
         in l][-1]
    assert lines[i + 1:i + 6] == ["    --- a/hello.txt", "    +++ b/hello.txt",
                                  "    @@ -1 +1 @@", "    -hello",
                                  "    +hi there"]


def test_gbrctl_caps_the_diff_on_screen(world):
    content = "".join("row %d\n" % i for i in range(100))
    result(world, "write_file", path="rows.txt", content=content)
    out = world["d"].ctl("history", world["sid"])
    assert out.returncode == 0, out.stderr
    assert "    +row 16\n    ... 83 more lines\n" in out.stdout
    assert "+row 17" not in out.stdout


def test_approved_protected_write_has_a_diff(daemon, ws):
    c, sid = new_session(daemon, ws)
    rid, a = ask(c, sid, "write_file", {"path": "gleam.toml",
                                        "content": GLEAM_NEW})
    assert "result" in resolve(daemon, a["id"], "approve")
    reply = answer(c, rid)
    d = reply["result"]["result"]["diff"]
    assert hunks(d) == ["@@ -1,2 +1,2 @@", ' name = "app"',
                        '-version = "1.0.0"', '+version = "2.0.0"']
    res = tool_results(daemon, sid, a["call_id"])
    assert res[0]["result"]["diff"] == d


def test_the_model_is_not_sent_the_diff(make_daemon, fake, tmpdir_short):
    """The model wrote the change and knows it: its copy of the result has
    no diff (it would crowd its context); the history and gbrctl send,
    which share the renderer with attach and the REPL, show it."""
    d = os.path.join(tmpdir_short, "ws")
    os.makedirs(d)
    with open(os.path.join(d, "hello.txt"), "w") as f:
        f.write("hello from the workspace\n")
    agent.profile(d, "[env]\nautonomy = full\n")
    fake.push({"tool_calls": [{"name": "write_file", "args": {
        "path": "hello.txt", "content": "bye from the workspace\n"}}]},
        {"tool_calls": [{"name": "edit_file", "args": {
            "path": "hello.txt", "old_string": "bye", "new_string": "ciao"}}]},
        {"text": "Both written."})
    dm = agent.start(make_daemon, fake, "openai")
    c, sid = agent.session(dm, d, name="ctl")
    p = subprocess.run([GBRCTL, "send", "ctl", "change hello"], env=dm.env,
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, (p.stdout, p.stderr)
    assert "    -hello from the workspace\n    +bye from the workspace\n" \
        in p.stdout, p.stdout
    assert "    -bye from the workspace\n    +ciao from the workspace\n" \
        in p.stdout, p.stdout
    got = [t[2] for t in fake.wait_requests(3)[2].tool_results()]
    assert len(got) == 2 and all('"bytes"' in t for t in got), got
    assert not any("diff" in t or "+bye" in t for t in got), got
    res = [m["result"] for m in agent.history(c, sid) if m["role"] == "tool"]
    assert [hunks(r["diff"])[1:] for r in res] == [
        ["-hello from the workspace", "+bye from the workspace"],
        ["-bye from the workspace", "+ciao from the workspace"]]
