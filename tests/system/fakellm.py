"""A fake LLM server for the tests: a real HTTP/1.1 server on 127.0.0.1
(Python's standard library only) that speaks the wire formats gbrd talks
to: OpenAI-compatible chat completions, Anthropic messages and Gemini
streamGenerateContent, all streamed as server-sent events, plus Ollama's
/api/tags for the local-server probe.

A test gives it a script of answers (FakeLLM.push); each request takes
the first answer whose "match" (if any) occurs in its body, or the
default answer when none is left. An answer is a dict:

    text         the answer's text, streamed in pieces ("chunks" of them)
    tool_calls   [{"name", "args", "id"?}]: arguments are streamed in
                 fragments (OpenAI: interleaved across calls by index;
                 Anthropic: input_json_delta; Gemini: functionCall parts);
                 "args_json" instead of "args" gives their text as it is
                 (OpenAI and Anthropic)
    usage        {"input": N, "output": M}
    status       an HTTP error status instead (429, 500, 401...), with
                 "retry_after" (a Retry-After header) and "body"
    delay        seconds between events (slow chunks)
    cut_after    close the connection abruptly after this many events
    hang_after   stop sending (without closing) after this many events
    framing      "chunked" (default) or "close" (close-delimited body)
    match        a substring the request body must contain
    signature    Gemini: a thoughtSignature on the first functionCall
    hold         a threading.Event the server waits on before answering
    raw          a list of event texts sent as they are (malformed streams)

Every request is recorded (method, path, headers, raw body, parsed JSON)
so a test can assert on what gbrd sent: the system prompt, the tool
results, that the key is only in its header.
"""
import json
import select
import socket
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Request:
    """One request as received."""

    def __init__(self, method, path, headers, body):
        self.method = method
        self.path = path
        self.headers = headers          # {lower-case name: value}
        self.raw = body                 # bytes
        try:
            self.json = json.loads(body) if body else None
        except ValueError:
            self.json = None
        self.provider = provider_of(method, path)

    # Provider-neutral views of what gbrd sent.
    def system(self):
        j = self.json or {}
        if self.provider == "openai":
            for m in j.get("messages", []):
                if m.get("role") == "system":
                    return m.get("content")
            return None
        if self.provider == "anthropic":
            return j.get("system")
        if self.provider == "gemini":
            si = j.get("systemInstruction")
            return si["parts"][0]["text"] if si else None
        return None

    def tool_results(self):
        """[(call_id or None, name or None, output text, ok)] in order."""
        j = self.json or {}
        out = []
        if self.provider == "openai":
            for m in j.get("messages", []):
                if m.get("role") == "tool":
                    out.append((m.get("tool_call_id"), None, m.get("content"), None))
        elif self.provider == "anthropic":
            for m in j.get("messages", []):
                if m["role"] != "user" or isinstance(m["content"], str):
                    continue
                for b in m["content"]:
                    if b.get("type") == "tool_result":
                        out.append((b.get("tool_use_id"), None, b.get("content"),
                                    not b.get("is_error")))
        elif self.provider == "gemini":
            for c in j.get("contents", []):
                for p in c.get("parts", []):
                    fr = p.get("functionResponse")
                    if fr:
                        r = fr.get("response", {})
                        ok = "output" in r
                        out.append((fr.get("id"), fr.get("name"),
                                    r.get("output", r.get("error")), ok))
        return out

    def tool_calls(self):
        """The assistant tool calls gbrd sent back: [(id, name, args)]."""
        j = self.json or {}
        out = []
        if self.provider == "openai":
            for m in j.get("messages", []):
                for tc in m.get("tool_calls") or []:
                    out.append((tc["id"], tc["function"]["name"],
                                json.loads(tc["function"]["arguments"])))
        elif self.provider == "anthropic":
            for m in j.get("messages", []):
                if m["role"] == "assistant":
                    for b in m["content"]:
                        if b.get("type") == "tool_use":
                            out.append((b["id"], b["name"], b["input"]))
        elif self.provider == "gemini":
            for c in j.get("contents", []):
                if c.get("role") == "model":
                    for p in c.get("parts", []):
                        if "functionCall" in p:
                            fc = p["functionCall"]
                            out.append((fc.get("id"), fc["name"], fc.get("args")))
        return out

    def user_texts(self):
        j = self.json or {}
        out = []
        if self.provider == "openai":
            out = [m["content"] for m in j.get("messages", []) if m["role"] == "user"]
        elif self.provider == "anthropic":
            for m in j.get("messages", []):
                if m["role"] == "user":
                    for b in m["content"]:
                        if b.get("type") == "text":
                            out.append(b["text"])
        elif self.provider == "gemini":
            for c in j.get("contents", []):
                if c.get("role") == "user":
                    for p in c.get("parts", []):
                        if "text" in p:
                            out.append(p["text"])
        return out

    def assistant_texts(self):
        """The text of each assistant message gbrd sent back, in order."""
        j = self.json or {}
        out = []
        if self.provider == "openai":
            out = [m.get("content") or "" for m in j.get("messages", [])
                   if m["role"] == "assistant"]
        elif self.provider in ("anthropic", "gemini"):
            key, role = (("messages", "assistant") if self.provider == "anthropic"
                         else ("contents", "model"))
            for m in j.get(key, []):
                if m.get("role") != role:
                    continue
                parts = m.get("content") if key == "messages" else m.get("parts")
                if isinstance(parts, str):
                    out.append(parts)
                    continue
                out.append("".join(b.get("text", "") for b in parts or []
                                   if b.get("type", "text") == "text"))
        return out

    def tool_names(self):
        j = self.json or {}
        if self.provider == "openai":
            return [t["function"]["name"] for t in j.get("tools", [])]
        if self.provider == "anthropic":
            return [t["name"] for t in j.get("tools", [])]
        if self.provider == "gemini":
            return [d["name"] for t in j.get("tools", [])
                    for d in t.get("functionDeclarations", [])]
        return []


def provider_of(method, path):
    p = path.split("?", 1)[0]
    if method == "GET" and p.endswith("/api/tags"):
        return "ollama"
    if p.endswith("/chat/completions"):
        return "openai"
    if p.endswith("/v1/messages"):
        return "anthropic"
    if ":streamGenerateContent" in p:
        return "gemini"
    return None


def split_text(text, n):
    if not text:
        return []
    n = max(1, min(n, len(text)))
    size = -(-len(text) // n)
    return [text[i:i + size] for i in range(0, len(text), size)]


def args_text(call):
    """A tool call's arguments as the model writes them."""
    if call.get("args_json") is not None:
        return call["args_json"]
    return json.dumps(call.get("args", {}))


def split_json(s, size=7):
    return [s[i:i + size] for i in range(0, len(s), size)] or [""]


def events_openai(ans, model):
    """The SSE events of an OpenAI-compatible answer."""
    cid = "chatcmpl-" + uuid.uuid4().hex[:12]
    created = int(time.time())

    def chunk(delta, finish=None):
        return "data: " + json.dumps({
            "id": cid, "object": "chat.completion.chunk", "created": created,
            "model": model, "choices": [{"index": 0, "delta": delta,
                                         "finish_reason": finish}]}) + "\n\n"
    ev = [chunk({"role": "assistant", "content": ""})]
    for piece in split_text(ans.get("text", ""), ans.get("chunks", 4)):
        ev.append(chunk({"content": piece}))
    calls = ans.get("tool_calls") or []
    frags = []
    for i, c in enumerate(calls):
        cid_i = c.get("id") or ("call_" + uuid.uuid4().hex[:16])
        ev.append(chunk({"tool_calls": [{"index": i, "id": cid_i, "type": "function",
                                         "function": {"name": c["name"], "arguments": ""}}]}))
        frags.append(split_json(args_text(c), c.get("fragment", 7)))
    # Interleave the fragments of every call, keyed by index.
    k = 0
    while any(frags):
        for i, f in enumerate(frags):
            if f:
                ev.append(chunk({"tool_calls": [{"index": i, "function": {
                    "arguments": f.pop(0)}}]}))
        k += 1
    ev.append(chunk({}, ans.get("stop_reason") or ("tool_calls" if calls else "stop")))
    u = ans.get("usage", {"input": 10, "output": 5})
    ev.append("data: " + json.dumps({
        "id": cid, "object": "chat.completion.chunk", "created": created,
        "model": model, "choices": [], "usage": {
            "prompt_tokens": u["input"], "completion_tokens": u["output"],
            "total_tokens": u["input"] + u["output"]}}) + "\n\n")
    ev.append("data: [DONE]\n\n")
    return ev


def events_anthropic(ans, model):
    u = ans.get("usage", {"input": 10, "output": 5})

    def ev(name, obj):
        return "event: %s\ndata: %s\n\n" % (name, json.dumps(obj))
    out = [ev("message_start", {"type": "message_start", "message": {
        "id": "msg_" + uuid.uuid4().hex[:12], "type": "message", "role": "assistant",
        "content": [], "model": model, "stop_reason": None, "stop_sequence": None,
        "usage": {"input_tokens": u["input"], "output_tokens": 1}}})]
    idx = 0
    text = ans.get("text", "")
    if text:
        out.append(ev("content_block_start", {"type": "content_block_start", "index": idx,
                                              "content_block": {"type": "text", "text": ""}}))
        out.append(ev("ping", {"type": "ping"}))
        for piece in split_text(text, ans.get("chunks", 4)):
            out.append(ev("content_block_delta", {"type": "content_block_delta", "index": idx,
                                                  "delta": {"type": "text_delta", "text": piece}}))
        out.append(ev("content_block_stop", {"type": "content_block_stop", "index": idx}))
        idx += 1
    calls = ans.get("tool_calls") or []
    for c in calls:
        out.append(ev("content_block_start", {"type": "content_block_start", "index": idx,
                                              "content_block": {"type": "tool_use",
                                                                "id": c.get("id") or "toolu_" + uuid.uuid4().hex[:20],
                                                                "name": c["name"], "input": {}}}))
        for f in split_json(args_text(c), c.get("fragment", 7)):
            out.append(ev("content_block_delta", {"type": "content_block_delta", "index": idx,
                                                  "delta": {"type": "input_json_delta",
                                                            "partial_json": f}}))
        out.append(ev("content_block_stop", {"type": "content_block_stop", "index": idx}))
        idx += 1
    out.append(ev("message_delta", {"type": "message_delta", "delta": {
        "stop_reason": ans.get("stop_reason") or ("tool_use" if calls else "end_turn"),
        "stop_sequence": None}, "usage": {"output_tokens": u["output"]}}))
    out.append(ev("message_stop", {"type": "message_stop"}))
    return out


def events_gemini(ans, model):
    u = ans.get("usage", {"input": 10, "output": 5})

    def ev(parts, finish=None, usage=False):
        cand = {"content": {"parts": parts, "role": "model"}, "index": 0}
        if finish:
            cand["finishReason"] = finish
        obj = {"candidates": [cand], "modelVersion": model}
        if usage:
            obj["usageMetadata"] = {"promptTokenCount": u["input"],
                                    "candidatesTokenCount": u["output"],
                                    "totalTokenCount": u["input"] + u["output"]}
        return "data: " + json.dumps(obj) + "\r\n\r\n"
    out = []
    pieces = split_text(ans.get("text", ""), ans.get("chunks", 4))
    calls = ans.get("tool_calls") or []
    for i, piece in enumerate(pieces):
        last = i == len(pieces) - 1 and not calls
        out.append(ev([{"text": piece}], (ans.get("stop_reason") or "STOP")
                      if last else None, last))
    if calls:
        parts = []
        for i, c in enumerate(calls):
            fc = {"name": c["name"], "args": c.get("args", {})}
            if c.get("id"):
                fc["id"] = c["id"]
            p = {"functionCall": fc}
            if i == 0 and ans.get("signature"):
                p["thoughtSignature"] = ans["signature"]
            parts.append(p)
        out.append(ev(parts, "STOP", True))
    if not out:
        out.append(ev([{"text": ""}], ans.get("stop_reason") or "STOP", True))
    return out


class _Server(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address):
        # A client that went away mid-stream is part of the tests.
        pass


class FakeLLM:
    """The server, its script and its record."""

    def __init__(self):
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.script = []
        self.default = {"text": "ok"}
        self.requests = []
        self.ollama_models = None       # a list of names to answer /api/tags
        self.context_limit = None       # bytes: a longer request is refused
        self.overflows = 0              # requests refused for it
        self.expect_key = None          # (header name, value) every call must carry
        self.open_streams = 0
        self.aborted = 0                # hanging streams the client closed
        self.sent_events = 0
        self.closing = False
        handler = self._handler()
        self.server = _Server(("127.0.0.1", 0), handler)
        self.port = self.server.server_address[1]
        self.url = "http://127.0.0.1:%d" % self.port
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def base_url(self, provider):
        return {"openai": self.url + "/v1", "anthropic": self.url,
                "gemini": self.url + "/v1beta"}[provider]

    def push(self, *answers):
        with self.lock:
            self.script.extend(answers)

    def wait_requests(self, n, timeout=30.0, provider=None):
        deadline = time.time() + timeout
        with self.cond:
            while True:
                got = [r for r in self.requests
                       if provider is None or r.provider == provider]
                if len(got) >= n:
                    return got
                left = deadline - time.time()
                assert left > 0, "fake LLM: %d of %d requests" % (len(got), n)
                self.cond.wait(left)

    def llm_requests(self):
        with self.lock:
            return [r for r in self.requests if r.provider in ("openai", "anthropic", "gemini")]

    def close(self):
        self.closing = True
        self.server.shutdown()
        self.server.server_close()

    def _take(self, body):
        with self.lock:
            for i, a in enumerate(self.script):
                m = a.get("match")
                if m is None or m.encode() in body:
                    return self.script.pop(i)
            return dict(self.default)

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, fmt, *args):
                pass

            def do_GET(self):
                req = Request("GET", self.path, {k.lower(): v for k, v in self.headers.items()}, b"")
                with fake.cond:
                    fake.requests.append(req)
                    fake.cond.notify_all()
                if req.provider == "ollama" and fake.ollama_models is not None:
                    self._json(200, {"models": [{"name": n, "model": n} for n in fake.ollama_models]})
                else:
                    self._json(404, {"error": "not found"})

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(n) if n else b""
                req = Request("POST", self.path, {k.lower(): v for k, v in self.headers.items()}, body)
                with fake.cond:
                    fake.requests.append(req)
                    fake.cond.notify_all()
                if req.provider is None:
                    self._json(404, {"error": {"message": "no such endpoint"}})
                    return
                if fake.expect_key is not None:
                    name, value = fake.expect_key
                    if req.headers.get(name.lower()) != value:
                        self._json(401, {"error": {"message": "invalid api key"}})
                        return
                if fake.context_limit is not None and len(body) > fake.context_limit:
                    # As each provider says it (tokens: about 4 bytes each).
                    have, most = len(body) // 4, fake.context_limit // 4
                    with fake.lock:
                        fake.overflows += 1
                    self._json(400, {
                        "openai": {"error": {
                            "message": "This model's maximum context length is "
                            "%d tokens. However, your messages resulted in %d "
                            "tokens. Please reduce the length of the messages."
                            % (most, have), "type": "invalid_request_error",
                            "code": "context_length_exceeded"}},
                        "anthropic": {"type": "error", "error": {
                            "type": "invalid_request_error",
                            "message": "prompt is too long: %d tokens > %d maximum"
                            % (have, most)}},
                        "gemini": {"error": {"code": 400, "message":
                            "The input token count (%d) exceeds the maximum "
                            "number of tokens allowed (%d)." % (have, most),
                            "status": "INVALID_ARGUMENT"}},
                    }[req.provider])
                    return
                ans = fake._take(body)
                if ans.get("hold") is not None:
                    ans["hold"].wait(60)
                if ans.get("status"):
                    extra = {}
                    if ans.get("retry_after") is not None:
                        extra["Retry-After"] = str(ans["retry_after"])
                    self._json(ans["status"], ans.get("body") or {"error": {
                        "message": "scripted status %d" % ans["status"]}}, extra)
                    return
                model = (req.json or {}).get("model", "fake-model")
                if ans.get("raw") is not None:
                    evs = list(ans["raw"])
                elif req.provider == "openai":
                    evs = events_openai(ans, model)
                elif req.provider == "anthropic":
                    evs = events_anthropic(ans, model)
                else:
                    evs = events_gemini(ans, "fake-gemini")
                self._stream(evs, ans)

            def _json(self, status, obj, extra=None):
                data = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in (extra or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _stream(self, evs, ans):
                chunked = ans.get("framing", "chunked") == "chunked"
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Cache-Control", "no-cache")
                if chunked:
                    self.send_header("Transfer-Encoding", "chunked")
                else:
                    self.send_header("Connection", "close")
                    self.close_connection = True
                self.end_headers()
                self.wfile.flush()
                with fake.lock:
                    fake.open_streams += 1
                try:
                    for i, e in enumerate(evs):
                        if ans.get("cut_after") is not None and i >= ans["cut_after"]:
                            # Abrupt: no terminating chunk, the socket just goes.
                            self.wfile.flush()
                            self.connection.shutdown(socket.SHUT_RDWR)
                            self.close_connection = True
                            return
                        if ans.get("hang_after") is not None and i >= ans["hang_after"]:
                            # Silent, but watching for the client to go.
                            deadline = time.time() + 120
                            while not fake.closing and time.time() < deadline:
                                r, _, _ = select.select([self.connection], [], [], 0.05)
                                if r and not self.connection.recv(1, socket.MSG_PEEK):
                                    with fake.lock:
                                        fake.aborted += 1
                                    break
                            self.close_connection = True
                            return
                        data = e.encode()
                        if chunked:
                            data = b"%x\r\n%s\r\n" % (len(data), data)
                        self.wfile.write(data)
                        self.wfile.flush()
                        with fake.lock:
                            fake.sent_events += 1
                        if ans.get("delay"):
                            time.sleep(ans["delay"])
                    if chunked:
                        self.wfile.write(b"0\r\n\r\n")
                        self.wfile.flush()
                except (BrokenPipeError, ConnectionResetError, OSError):
                    self.close_connection = True
                finally:
                    with fake.lock:
                        fake.open_streams -= 1

        return Handler


if __name__ == "__main__":
    import argparse
    ap = argparse.ArgumentParser(description="a fake LLM server (tests)")
    ap.add_argument("--script", help="a JSON list of answers")
    args = ap.parse_args()
    f = FakeLLM()
    if args.script:
        with open(args.script) as fh:
            f.push(*json.load(fh))
    print(f.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        f.close()
