"""The HTTP layer and the providers over a real socket: tests/llm-driver
streams one call (http.c on libcurl's multi interface, sse.c, llm*.c)
against tests/system/fakellm.py on 127.0.0.1. Each provider's text and
fragmented tool calls, usage, the HTTP errors and their classification
(429 with Retry-After, 5xx, 401), cut streams (chunked and
close-delimited), an idle stream, slow chunks, cancellation, a size cap,
20 calls at once, the Ollama probe, and the key: only in its header,
never in a URL, a body, a message or the debug log."""
import json
import os
import socket
import subprocess
import time

import pytest

from conftest import BUILD
from fakellm import FakeLLM

DRIVER = os.path.join(BUILD, "tests", "llm-driver")
KEY = "sk-TESTKEY-0123456789abcdef"
PROVIDERS = ("openai", "anthropic", "gemini")
AUTH = {"openai": ("authorization", "Bearer " + KEY),
        "anthropic": ("x-api-key", KEY),
        "gemini": ("x-goog-api-key", KEY)}


@pytest.fixture
def fake():
    f = FakeLLM()
    yield f
    f.close()


def drive(fake, provider, *args, key=KEY, timeout=30):
    cmd = [DRIVER, "--provider", provider, "--base", fake.base_url(provider)]
    if key:
        cmd += ["--key", key]
    cmd += list(args)
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    assert r.returncode == 0, r.stderr
    lines = [json.loads(x) for x in r.stdout.splitlines()]
    assert KEY not in r.stderr, "the key reached the debug log"
    return lines, r.stderr


def outcome(lines, call=0):
    got = [x["outcome"] for x in lines if "outcome" in x and x["call"] == call]
    assert len(got) == 1, lines
    return got[0]


@pytest.mark.parametrize("provider", PROVIDERS)
def test_stream_text_and_tool_calls(fake, provider):
    fake.push({"text": "Reading the files now.", "chunks": 5,
               "tool_calls": [{"name": "read_file", "args": {"path": "src/main.c"}},
                              {"name": "run_command", "args": {"argv": ["make", "-C", "build"]}}],
               "usage": {"input": 321, "output": 54}})
    lines, _ = drive(fake, provider)
    deltas = [x["delta"] for x in lines if "delta" in x]
    assert len(deltas) >= 3 and "".join(deltas) == "Reading the files now."
    o = outcome(lines)
    assert o["ok"] and o["text"] == "Reading the files now."
    calls = o["tool_calls"]
    assert [c["name"] for c in calls] == ["read_file", "run_command"]
    assert calls[0]["args"] == {"path": "src/main.c"}
    assert calls[1]["args"] == {"argv": ["make", "-C", "build"]}
    assert len({c["id"] for c in calls}) == 2
    assert o["input_tokens"] == 321 and o["output_tokens"] == 54
    req = fake.llm_requests()[0]
    name, value = AUTH[provider]
    assert req.headers.get(name) == value
    assert KEY.encode() not in req.raw and KEY not in req.path
    assert req.system() == "sys"


@pytest.mark.parametrize("provider", PROVIDERS)
def test_429_with_retry_after(fake, provider):
    fake.push({"status": 429, "retry_after": 2,
               "body": {"error": {"message": "slow down"}}})
    lines, _ = drive(fake, provider)
    o = outcome(lines)
    assert not o["ok"] and o["retryable"] and o["kind"] == "rate_limited"
    assert o["status"] == 429 and o["retry_after_ms"] == 2000
    assert "slow down" in o["message"]


def test_5xx_and_auth_errors(fake):
    fake.push({"status": 503, "body": {"error": {"message": "overloaded"}}})
    o = outcome(drive(fake, "openai")[0])
    assert o["retryable"] and o["kind"] == "llm_unavailable" and o["status"] == 503
    # A server that echoes the key in its error: the message is scrubbed.
    fake.push({"status": 401, "body": {"error": {"message": "bad key " + KEY}}})
    o = outcome(drive(fake, "openai")[0])
    assert not o["retryable"] and o["kind"] == "auth"
    assert KEY not in o["message"] and "REDACTED" in o["message"]
    fake.push({"status": 400, "body": "<html>nope</html>"})
    o = outcome(drive(fake, "anthropic")[0])
    assert not o["retryable"] and o["kind"] == "llm_error" and "400" in o["message"]


@pytest.mark.parametrize("provider", PROVIDERS)
@pytest.mark.parametrize("framing", ("chunked", "close"))
def test_cut_stream_is_retryable(fake, provider, framing):
    fake.push({"text": "a b c d e f g h", "chunks": 8, "framing": framing,
               "tool_calls": [{"name": "read_file", "args": {"path": "x"}}],
               "cut_after": 3})
    o = outcome(drive(fake, provider)[0])
    assert not o["ok"] and o["retryable"] and o["kind"] == "stream_cut", o


def test_idle_stream_times_out(fake):
    fake.push({"text": "one two three four", "chunks": 4, "hang_after": 2})
    o = outcome(drive(fake, "openai", "--idle-ms", "600")[0])
    assert not o["ok"] and o["retryable"] and o["kind"] == "stream_cut"
    assert "nothing arrived" in o["message"]


def test_slow_chunks_keep_the_stream_alive(fake):
    # Each event comes 0.25 s after the last: longer in total than the idle
    # timeout, never silent that long.
    fake.push({"text": "s l o w", "chunks": 4, "delay": 0.25})
    o = outcome(drive(fake, "anthropic", "--idle-ms", "1500")[0])
    assert o["ok"] and o["text"] == "s l o w"


def test_cancel_mid_stream(fake):
    fake.push({"text": "never ending", "chunks": 4, "hang_after": 2})
    lines, _ = drive(fake, "gemini", "--cancel-ms", "700")
    assert {"call": 0, "cancelled": True} in lines
    assert not any("outcome" in x for x in lines), "a callback after cancel"
    deadline = time.time() + 10
    while fake.open_streams and time.time() < deadline:
        time.sleep(0.05)
    assert fake.open_streams == 0 and fake.aborted == 1


def test_connect_refused_is_retryable(fake):
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    r = subprocess.run([DRIVER, "--provider", "openai", "--base",
                        "http://127.0.0.1:%d/v1" % port], capture_output=True,
                       text=True, timeout=30)
    o = outcome([json.loads(x) for x in r.stdout.splitlines()])
    assert not o["ok"] and o["retryable"] and o["kind"] == "llm_unavailable"


def test_response_size_cap(fake):
    fake.push({"text": "x" * 200000, "chunks": 50})
    o = outcome(drive(fake, "openai", "--max-bytes", "65536")[0])
    assert not o["ok"] and not o["retryable"] and o["kind"] == "too_large"


def test_twenty_calls_at_once(fake):
    fake.default = {"text": "parallel answer", "chunks": 3, "delay": 0.05}
    lines, _ = drive(fake, "openai", "--parallel", "20")
    for i in range(20):
        o = outcome(lines, i)
        assert o["ok"] and o["text"] == "parallel answer"
    assert len(fake.llm_requests()) == 20


def test_malformed_stream_is_an_error(fake):
    fake.push({"raw": ["data: {\"choices\":[]}\n\n", "data: {oops\n\n"]})
    o = outcome(drive(fake, "openai")[0])
    assert not o["ok"] and not o["retryable"] and o["kind"] == "llm_error"
    assert "not JSON" in o["message"]
    # A line longer than the SSE bound (8 MiB) stops the stream.
    fake.push({"raw": ["data: " + "x" * (9 << 20)]})
    o = outcome(drive(fake, "openai")[0])
    assert not o["ok"] and "malformed" in o["message"]


def test_ollama_probe(fake):
    fake.ollama_models = ["qwen2.5-coder:7b", "llama3.2:latest"]
    r = subprocess.run([DRIVER, "--probe", fake.url], capture_output=True,
                       text=True, timeout=30)
    assert json.loads(r.stdout.splitlines()[-1]) == {"probe": "qwen2.5-coder:7b"}
    fake.ollama_models = None
    r = subprocess.run([DRIVER, "--probe", fake.url], capture_output=True,
                       text=True, timeout=30)
    assert json.loads(r.stdout.splitlines()[-1]) == {"probe": None}
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    r = subprocess.run([DRIVER, "--probe", "http://127.0.0.1:%d" % port],
                       capture_output=True, text=True, timeout=30)
    assert json.loads(r.stdout.splitlines()[-1]) == {"probe": None}
