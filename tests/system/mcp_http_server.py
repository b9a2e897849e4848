"""A fake MCP server over Streamable HTTP for the tests (Python's standard
library only, on 127.0.0.1): what gbrd's url servers ([mcp.NAME] url =)
must cope with, done on purpose.

One endpoint, /mcp. A POST carries one JSON-RPC message; a request is
answered as one JSON body (mode "json") or as an SSE stream (mode "sse":
a progress notification and a ping request of the server's go first,
then the answer); a notification or an answer of the client's gets 202.
initialize assigns an Mcp-Session-Id that every later request must carry
(400 without it, 404 once expire() forgot it), with MCP-Protocol-Version.
GET opens the server's own SSE stream (405 with get_stream=False); DELETE
ends a session.

Tools: echo (read-only), write (not), hang (never answers; the stream
stays open until notifications/cancelled or close), fail (isError),
garbage (a body that is not JSON), wrongtype (text/html), big (a JSON
body over 4 MiB), grow (adds the tool "grown" and says list_changed on
the GET stream, or in its own SSE answer when there is none).

Each answer is one write (headers and body together) on a socket with
TCP_NODELAY, so no answer waits for a delayed ACK. Everything received is
recorded (FakeMCPHTTP.requests) for the tests to check what gbrd sent.
"""
import json
import queue
import socket
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PROTOCOLS = ("2025-11-25", "2025-06-18", "2025-03-26")


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True

    def handle_error(self, request, client_address):
        pass


class FakeMCPHTTP:
    def __init__(self, port=0, mode="json", get_stream=True, sessions=True,
                 protocol=None):
        self.lock = threading.Lock()
        self.cond = threading.Condition(self.lock)
        self.mode = mode
        self.get_stream = get_stream
        self.use_sessions = sessions
        self.protocol = protocol        # force this revision
        self.sessions = set()
        self.requests = []              # (method, headers, json or None)
        self.tools_extra = []
        self.streams = []               # queues of the open GET streams
        self.cancelled = []             # requestIds of notifications/cancelled
        self.hang_release = threading.Event()
        self.closing = False
        self.conns = set()              # open connections (stop ends them)
        self.port = port
        self.server = None
        self.start()

    # Life.
    def start(self):
        self.closing = False
        self.hang_release.clear()
        self.server = _Server(("127.0.0.1", self.port), self._handler())
        self.port = self.server.server_address[1]
        self.url = "http://127.0.0.1:%d/mcp" % self.port
        self.thread = threading.Thread(target=self.server.serve_forever,
                                       kwargs={"poll_interval": 0.05},
                                       daemon=True)
        self.thread.start()

    def stop(self):
        """Goes down: the listener closes and open streams end."""
        self.closing = True
        self.hang_release.set()
        with self.lock:
            for q in self.streams:
                q.put(None)
        self.server.shutdown()
        self.server.server_close()
        # Kept-alive connections would go on answering: they end too.
        with self.lock:
            conns, self.conns = list(self.conns), set()
        for c in conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def close(self):
        self.stop()

    def expire(self):
        with self.lock:
            self.sessions.clear()
            for q in self.streams:
                q.put(None)

    def notify(self, method):
        """A notification on every open GET stream; False if none is open."""
        with self.lock:
            for q in self.streams:
                q.put({"jsonrpc": "2.0", "method": method})
            return bool(self.streams)

    # What gbrd sent.
    def sent(self, method=None, http=None):
        with self.lock:
            return [r for r in self.requests
                    if (http is None or r[0] == http) and
                    (method is None or (r[2] or {}).get("method") == method)]

    def wait(self, pred, timeout=15.0, what="a request"):
        deadline = time.time() + timeout
        with self.cond:
            while True:
                got = [r for r in self.requests if pred(r)]
                if got:
                    return got
                left = deadline - time.time()
                assert left > 0, "fake MCP HTTP server: no %s in %r" % (
                    what, self.requests[-20:])
                self.cond.wait(left)

    def tools(self):
        t = [{"name": "echo", "description": "Echoes its text.",
              "inputSchema": {"type": "object", "properties": {
                  "text": {"type": "string"}}, "required": ["text"]},
              "annotations": {"readOnlyHint": True}},
             {"name": "write", "description": "Pretends to write.",
              "inputSchema": {"type": "object"}}]
        for n in ("hang", "fail", "garbage", "wrongtype", "big", "grow"):
            t.append({"name": n, "inputSchema": {"type": "object"},
                      "annotations": {"readOnlyHint": True}})
        return t + list(self.tools_extra)

    def _handler(self):
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def setup(self):
                super().setup()
                self.connection.setsockopt(socket.IPPROTO_TCP,
                                           socket.TCP_NODELAY, 1)
                with fake.lock:
                    fake.conns.add(self.connection)

            def finish(self):
                with fake.lock:
                    fake.conns.discard(self.connection)
                super().finish()

            def log_message(self, fmt, *args):
                pass

            def _hdrs(self):
                return {k.lower(): v for k, v in self.headers.items()}

            def _record(self, method, body):
                with fake.cond:
                    fake.requests.append((method, self._hdrs(), body))
                    fake.cond.notify_all()

            def _send(self, status, body=b"", ctype=None, extra=None):
                """The whole answer in one write."""
                head = ["HTTP/1.1 %d %s" % (status, self.responses.get(
                    status, ("X",))[0])]
                if ctype:
                    head.append("Content-Type: " + ctype)
                head.append("Content-Length: %d" % len(body))
                for k, v in (extra or {}).items():
                    head.append("%s: %s" % (k, v))
                data = ("\r\n".join(head) + "\r\n\r\n").encode() + body
                try:
                    self.connection.sendall(data)
                except OSError:
                    self.close_connection = True

            def _session_ok(self, h):
                """Checks the session of a request that is not initialize."""
                if not fake.use_sessions:
                    return True
                sid = h.get("mcp-session-id")
                if sid is None:
                    self._send(400, b'{"error":"no session"}',
                               "application/json")
                    return False
                with fake.lock:
                    known = sid in fake.sessions
                if not known:
                    self._send(404, b'{"error":"session expired"}',
                               "application/json")
                    return False
                return True

            def do_DELETE(self):
                h = self._hdrs()
                self._record("DELETE", None)
                with fake.lock:
                    fake.sessions.discard(h.get("mcp-session-id"))
                self._send(200)

            def do_GET(self):
                h = self._hdrs()
                self._record("GET", None)
                if not fake.get_stream:
                    self._send(405, b"", None, {"Allow": "POST, DELETE"})
                    return
                if not self._session_ok(h):
                    return
                q = queue.Queue()
                with fake.lock:
                    fake.streams.append(q)
                try:
                    self.connection.sendall(
                        b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream"
                        b"\r\nCache-Control: no-cache\r\n"
                        b"Transfer-Encoding: chunked\r\n\r\n")
                    while not fake.closing:
                        try:
                            m = q.get(timeout=0.1)
                        except queue.Empty:
                            continue
                        if m is None:
                            break
                        ev = ("event: message\ndata: %s\n\n"
                              % json.dumps(m)).encode()
                        self.connection.sendall(b"%x\r\n%s\r\n"
                                                % (len(ev), ev))
                    self.connection.sendall(b"0\r\n\r\n")
                except OSError:
                    pass
                finally:
                    with fake.lock:
                        fake.streams.remove(q)
                self.close_connection = True

            def do_POST(self):
                n = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(n) if n else b""
                try:
                    m = json.loads(raw)
                except ValueError:
                    m = None
                self._record("POST", m)
                h = self._hdrs()
                if not isinstance(m, dict):
                    self._send(400, b'{"error":"not JSON"}', "application/json")
                    return
                method = m.get("method")
                if method == "initialize":
                    want = m["params"]["protocolVersion"]
                    ver = fake.protocol or (want if want in PROTOCOLS
                                            else PROTOCOLS[0])
                    extra = {}
                    if fake.use_sessions:
                        sid = uuid.uuid4().hex
                        with fake.lock:
                            fake.sessions.add(sid)
                        extra["Mcp-Session-Id"] = sid
                    self._answer(m, {"protocolVersion": ver, "capabilities": {
                        "tools": {"listChanged": True}}, "serverInfo": {
                        "name": "fake-http", "version": "1"}}, extra)
                    return
                if not self._session_ok(h):
                    return
                if "id" not in m or method is None:
                    # A notification, or an answer to our ping.
                    if method == "notifications/cancelled":
                        with fake.lock:
                            fake.cancelled.append(m["params"]["requestId"])
                        fake.hang_release.set()
                    self._send(202)
                    return
                if method == "tools/list":
                    self._answer(m, {"tools": fake.tools()})
                elif method == "ping":
                    self._answer(m, {})
                elif method == "tools/call":
                    self._call(m)
                else:
                    self._answer(m, None, error={"code": -32601,
                                                 "message": "no such method"})

            def _answer(self, m, result, extra=None, error=None, before=()):
                msg = {"jsonrpc": "2.0", "id": m["id"]}
                if error is not None:
                    msg["error"] = error
                else:
                    msg["result"] = result
                if fake.mode == "sse":
                    evs = list(before) + [msg]
                    body = b"".join(("event: message\nid: %d\ndata: %s\n\n"
                                     % (i, json.dumps(e))).encode()
                                    for i, e in enumerate(evs))
                    self._send(200, body, "text/event-stream", extra)
                else:
                    self._send(200, json.dumps(msg).encode(),
                               "application/json", extra)

            def _call(self, m):
                name = m["params"]["name"]
                args = m["params"].get("arguments") or {}
                text = lambda s: {"content": [{"type": "text", "text": s}]}
                before = ({"jsonrpc": "2.0", "method": "notifications/progress",
                           "params": {"progressToken": 1, "progress": 1}},
                          {"jsonrpc": "2.0", "id": "srv-ping-1",
                           "method": "ping"})
                if name == "echo":
                    r = text("echo: %s" % args.get("text"))
                    r["structuredContent"] = {"echoed": args.get("text")}
                    self._answer(m, r, before=before)
                elif name == "write":
                    self._answer(m, text("written"))
                elif name == "fail":
                    r = text("it went wrong")
                    r["isError"] = True
                    self._answer(m, r)
                elif name == "garbage":
                    self._send(200, b"{this is not json", "application/json")
                elif name == "wrongtype":
                    self._send(200, b"<html>hello</html>", "text/html")
                elif name == "big":
                    s = "x" * (5 * 1024 * 1024)
                    self._answer(m, text(s))
                elif name == "grow":
                    with fake.lock:
                        if not any(t["name"] == "grown"
                                   for t in fake.tools_extra):
                            fake.tools_extra.append(
                                {"name": "grown",
                                 "inputSchema": {"type": "object"},
                                 "annotations": {"readOnlyHint": True}})
                    if not fake.notify("notifications/tools/list_changed"):
                        # No GET stream: say it in this answer's stream.
                        self._answer(m, text("grown"), before=(
                            {"jsonrpc": "2.0", "method":
                             "notifications/tools/list_changed"},))
                        return
                    self._answer(m, text("grown"))
                elif name == "grown":
                    self._answer(m, text("I am new"))
                elif name == "hang":
                    # Headers now, the answer never: the stream stays open.
                    try:
                        self.connection.sendall(
                            b"HTTP/1.1 200 OK\r\nContent-Type: "
                            b"text/event-stream\r\nTransfer-Encoding: "
                            b"chunked\r\n\r\n")
                    except OSError:
                        return
                    fake.hang_release.wait(60)
                    fake.hang_release.clear()
                    self.close_connection = True
                else:
                    self._answer(m, None, error={"code": -32602,
                                                 "message": "unknown tool"})

        return Handler


if __name__ == "__main__":
    import sys
    f = FakeMCPHTTP(port=int(sys.argv[1]) if len(sys.argv) > 1 else 0,
                    mode=sys.argv[2] if len(sys.argv) > 2 else "json")
    print(f.url, flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        f.close()
