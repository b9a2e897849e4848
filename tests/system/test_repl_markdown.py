"""The model's markdown as the REPL shows it: a fake model streams an answer
in slow chunks cut at awkward places, and the real gbr, in tmux, must show
it rendered (no '#', '**' or fences; code text as it is, set apart) while
still streaming (the first lines are on the screen before the answer
ends), with colours on a terminal and as plain text with NO_COLOR, and
the same way again in /history."""
import re

from test_repl import Term, repl, quit_repl, terms, ws  # noqa: F401

# Cut into 5 even chunks: inside "**item**", inside the fence, inside the code.
ANSWER = ("# Plan\n\nSome prose first.\n- first **item**\n1. numbered\n\n"
          "```sh\ncode *stays* raw\n```\n%s\n")


def rendered(s):
    """The answer's lines as the screen shows them, markers gone."""
    assert re.search(r"^Plan$", s, re.M), s
    assert re.search(r"^\u2022 first item$", s, re.M), s
    assert re.search(r"^1\. numbered$", s, re.M), s
    assert re.search(r"^    code \*stays\* raw$", s, re.M), s
    assert "# Plan" not in s and "**" not in s and "```" not in s, s


def test_the_answer_is_rendered_markdown_as_it_streams(make_daemon, terms, ws):
    from fakellm import FakeLLM
    from test_agent import profile, start
    fake = FakeLLM()
    try:
        profile(ws, "[env]\nautonomy = full\n")
        d = start(make_daemon, fake, "openai")
        fake.push({"text": ANSWER % "THE-END", "chunks": 5, "delay": 1.5})
        t = terms("md", d.env, ws)
        repl(t)
        t.type("plan please")
        t.keys("Enter")
        # Streaming is kept: the heading is there long before the end,
        # and prose even before its line ends.
        s = t.wait(r"^Some prose")
        assert re.search(r"^Plan$", s, re.M), s
        assert "first." not in s and "THE-END" not in s, s
        s = t.wait(r"^THE-END$")
        t.wait(r"^gbr:[0-9a-f]{12}>\s*$")
        s = t.screen()
        rendered(s)
        # Colours on a terminal: the heading and **item** bold, code cyan.
        e = t.screen(escapes=True)
        line = [l for l in e.splitlines() if "item" in l][0]
        assert re.search(r"\x1b\[[0-9;]*1m[^\n]*item", line), repr(line)
        line = [l for l in e.splitlines() if "stays" in l][0]
        assert "\x1b[36m" in line, repr(line)

        # /history renders the stored answer the same way.
        t.type("/history")
        t.keys("Enter")
        s = t.wait(r"^THE-END$[\s\S]*^THE-END$")
        s = s[s.rindex("/history"):]
        rendered(s)
        quit_repl(t)

        # Without colours: the same text, no escapes at all.
        fake.push({"text": ANSWER % "FIN-TWO", "chunks": 5})
        repl(t, prefix="NO_COLOR=1 ")
        t.type("again")
        t.keys("Enter")
        t.wait(r"^FIN-TWO$")
        t.wait(r"^gbr:[0-9a-f]{12}>\s*$")
        s = t.screen()
        rendered(s[s.rindex("again"):])
        e = t.screen(escapes=True)
        for l in e[e.rindex("again"):].splitlines():
            if "first" in l or "stays" in l or "Plan" in l:
                assert "\x1b[" not in l, repr(l)
        quit_repl(t)
    finally:
        fake.close()
