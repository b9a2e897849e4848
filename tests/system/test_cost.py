"""What a turn costs: gbrd.conf [prices] times the tokens the provider
reports. The fake model server (fakellm.py) speaks each provider's wire
format and reports the usage a test asks for, so the expected cost is
known to the token. Totals live in the session and come back from the log
after kill -9 or a clean restart; a model without a price is counted, not
guessed at."""
import re
import signal
import subprocess
import time

import pytest

from conftest import GBR
from test_agent import PROVIDERS, fake, run_turn, session, start, ws  # noqa: F401

MODELS = {"openai": "gpt-test:mini", "anthropic": "claude-test-1",
          "gemini": "gemini-test-flash"}
IN, OUT = 3.0, 15.0     # USD per million input and output tokens


def priced(provider, prices=None):
    """[llm] model and a [prices] section (default: the model at IN/OUT)."""
    if prices is None:
        prices = "model = %s %g %g\n" % (MODELS[provider], IN, OUT)
    return "model = %s\n\n[prices]\n%s" % (MODELS[provider], prices)


def usd(i, o, pin=IN, pout=OUT):
    return i * pin / 1e6 + o * pout / 1e6


def usage_of(d, sid):
    for s in d.conn().call("session.list")["result"]["sessions"]:
        if s["id"] == sid:
            return s["usage"]
    raise AssertionError("no session %s" % sid)


@pytest.mark.parametrize("provider", PROVIDERS)
def test_turn_cost_from_prices_survives_restarts(make_daemon, fake, ws, provider):
    fake.push({"text": "one", "usage": {"input": 1200, "output": 340}},
              {"text": "two", "usage": {"input": 2500, "output": 80}})
    d = start(make_daemon, fake, provider, priced(provider))
    c, sid = session(d, ws)
    _, end = run_turn(c, sid, "first")
    assert end["outcome"] == "completed", end
    u = end["usage"]
    assert u["input_tokens"] == 1200 and u["output_tokens"] == 340, u
    assert u["cost_usd"] == pytest.approx(usd(1200, 340)), u
    assert "unpriced" not in u
    _, end = run_turn(c, sid, "second")
    assert end["usage"]["cost_usd"] == pytest.approx(usd(2500, 80))
    total = usage_of(d, sid)
    assert total["cost_usd"] == pytest.approx(usd(3700, 420)), total
    assert total["unpriced_turns"] == 0
    assert total["last_turn"]["cost_usd"] == pytest.approx(usd(2500, 80))
    # The log is replayed: the total is the same after kill -9 ...
    d.kill9()
    d.start()
    assert usage_of(d, sid) == total
    # ... and after a clean stop.
    d.stop()
    d.start()
    assert usage_of(d, sid) == total


def test_every_step_of_a_turn_is_priced(make_daemon, fake, ws):
    fake.push({"tool_calls": [{"name": "read_file", "args": {"path": "hello.txt"}}],
               "usage": {"input": 1000, "output": 100}},
              {"text": "It says hello.", "usage": {"input": 3000, "output": 50}})
    d = start(make_daemon, fake, "openai", priced("openai"))
    c, sid = session(d, ws)
    _, end = run_turn(c, sid, "read hello.txt")
    assert end["outcome"] == "completed", end
    assert end["usage"]["input_tokens"] == 4000
    assert end["usage"]["cost_usd"] == pytest.approx(usd(4000, 150))


def test_no_price_no_cost(make_daemon, fake, ws):
    """A model [prices] does not name gets no cost_usd (a sum that left it
    out would read as the whole); the session counts such turns."""
    fake.push({"text": "one", "usage": {"input": 100, "output": 10}},
              {"text": "two", "usage": {"input": 200, "output": 20}})
    d = start(make_daemon, fake, "openai",
              priced("openai", "model = some-other:model 1 2\n"))
    c, sid = session(d, ws)
    for text in ("first", "second"):
        _, end = run_turn(c, sid, text)
        assert end["outcome"] == "completed", end
        assert "cost_usd" not in end["usage"] and end["usage"]["unpriced"] is True
    total = usage_of(d, sid)
    assert total["unpriced_turns"] == 2 and total["cost_usd"] == 0, total
    assert "cost_usd" not in total["last_turn"]
    assert total["input_tokens"] == 300
    d.kill9()
    d.start()
    assert usage_of(d, sid) == total


def test_prices_follow_a_reload(make_daemon, fake, ws):
    """SIGHUP swaps the whole config: the next turn is priced at the new
    prices; the turns before keep what they cost when they ended."""
    fake.push({"text": "one", "usage": {"input": 1000, "output": 1000}},
              {"text": "two", "usage": {"input": 1000, "output": 1000}},
              {"text": "three", "usage": {"input": 1000, "output": 1000}})
    d = start(make_daemon, fake, "openai", "model = %s\n" % MODELS["openai"])
    c, sid = session(d, ws)
    _, end = run_turn(c, sid, "first")
    assert end["usage"]["unpriced"] is True
    with open(d.config) as f:
        text = f.read()
    with open(d.config, "w") as f:
        f.write(text + "\n[prices]\nmodel = %s 1 2\n" % MODELS["openai"])
    d.proc.send_signal(signal.SIGHUP)
    deadline = time.time() + 10
    while "SIGHUP: reloaded" not in d.log() and time.time() < deadline:
        time.sleep(0.05)
    _, end = run_turn(c, sid, "second")
    assert end["usage"]["cost_usd"] == pytest.approx(usd(1000, 1000, 1, 2))
    # A broken [prices] is refused whole: the prices in force stay.
    with open(d.config, "w") as f:
        f.write(text + "\n[prices]\nmodel = %s 5 6\nmodel = %s 7 8\n"
                % (MODELS["openai"], MODELS["openai"]))
    d.proc.send_signal(signal.SIGHUP)
    deadline = time.time() + 10
    while "keeping the previous config" not in d.log() and time.time() < deadline:
        time.sleep(0.05)
    assert "priced twice" in d.log()
    _, end = run_turn(c, sid, "third")
    assert end["usage"]["cost_usd"] == pytest.approx(usd(1000, 1000, 1, 2))
    total = usage_of(d, sid)
    assert total["unpriced_turns"] == 1
    assert total["cost_usd"] == pytest.approx(2 * usd(1000, 1000, 1, 2))


def test_bad_prices_refuse_start(make_daemon):
    d = make_daemon(config="[prices]\nmodel = gpt-4o 2.5\n", start=False)
    d.start(wait=False)
    d.expect_exit(1)
    assert "gbrd.conf:2: prices.model = 'gpt-4o 2.5': expected" in d.log()



def test_repl_shows_the_cost(make_daemon, fake, ws):
    fake.push({"text": "hi there", "usage": {"input": 1200, "output": 100}})
    d = start(make_daemon, fake, "anthropic", priced("anthropic"))
    r = subprocess.run([GBR, ws], input="hello\n", env=d.env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    # 1200 * 3 / 1e6 + 100 * 15 / 1e6 = 0.0051
    assert re.search(r"^\* turn 1: 1200 tokens in, 100 out, about \$0\.0051$",
                     r.stdout, re.M), r.stdout
    r = subprocess.run([GBR, ws], input="/status\n", env=d.env,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert re.search(r"^cost +this session about \$0\.0051; last turn about "
                     r"\$0\.0051$", r.stdout, re.M), r.stdout


def test_gbrctl_status_shows_the_session_cost(make_daemon, fake, ws):
    fake.push({"text": "one", "usage": {"input": 1200, "output": 100}})
    d = start(make_daemon, fake, "openai", priced("openai"))
    c, sid = session(d, ws, name="costly")
    run_turn(c, sid, "first")
    r = d.ctl("status", "costly")
    assert r.returncode == 0, r.stderr
    assert re.search(r"^tokens +in 1200, out 100; last turn in 1200, out 100$",
                     r.stdout, re.M), r.stdout
    assert re.search(r"^cost +about \$0\.0051; last turn about \$0\.0051$",
                     r.stdout, re.M), r.stdout
    assert "unpriced" not in r.stdout
    # gbrctl's options may come after the session, as after other commands.
    u = d.ctl_json("status", sid)["usage"]
    assert u["cost_usd"] == pytest.approx(usd(1200, 100)) and u["unpriced_turns"] == 0
    r = d.ctl("status", sid, "--json")
    assert r.returncode == 0 and '"cost_usd"' in r.stdout, r.stderr
    r = d.ctl("status", "nosuch")
    assert r.returncode == 1 and "no open session is called nosuch" in r.stderr


def test_gbrctl_status_counts_unpriced_turns(make_daemon, fake, ws):
    fake.push({"text": "one", "usage": {"input": 10, "output": 5}})
    d = start(make_daemon, fake, "openai", "model = %s\n" % MODELS["openai"])
    c, sid = session(d, ws)
    run_turn(c, sid, "first")
    r = d.ctl("status", sid)
    assert r.returncode == 0, r.stderr
    assert not re.search(r"^cost ", r.stdout, re.M), r.stdout
    assert re.search(r"^unpriced +1 turn \(no gbrd.conf \[prices\]", r.stdout,
                     re.M), r.stdout


def test_cost_comes_back_from_a_snapshot(make_daemon, fake, ws):
    """A small disk log budget forces a snapshot: the totals it keeps (the
    seven-item usage) plus the turns replayed on top of it are the same
    after a restart."""
    extra = priced("openai") + "\n[log]\nmax_bytes = 1M\nsegment_bytes = 64K\n"
    d = start(make_daemon, fake, "openai", extra)
    c, sid = session(d, ws)
    big = "z" * 150000
    n, snap = 0, None
    while n < 30:
        fake.push({"text": "ok", "usage": {"input": 1000 + n, "output": 10}})
        n += 1
        _, end = run_turn(c, sid, "%d %s" % (n, big) if not snap else "after %d" % n)
        assert end["outcome"] == "completed", end
        c.events.clear()
        if snap:
            break
        snap = c.call("daemon.status")["result"]["disklog"].get("snapshot")
    assert snap, "no snapshot was written"
    total = usage_of(d, sid)
    want = sum(usd(1000 + i, 10) for i in range(n))
    assert total["cost_usd"] == pytest.approx(want), total
    d.stop()
    d.start()
    assert usage_of(d, sid) == total
    d.kill9()
    d.start()
    assert usage_of(d, sid) == total
