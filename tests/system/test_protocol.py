"""The line protocol against a real gbrd: handshake, every class of bad
input, limits, disconnects at awkward moments, many clients at once."""
import json
import os
import resource
import socket
import threading
import time

import pytest

from conftest import Conn, SANITIZED


def rss_kib(pid):
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def test_hello_answers_identity(daemon):
    c = daemon.conn(hello=False)
    r = c.call("hello", {"protocol": 1, "client": "pytest/1"})
    res = r["result"]
    assert res["protocol"] == 1
    assert res["server"] == "gbrd"
    assert res["pid"] == daemon.proc.pid
    assert isinstance(res["epoch"], str) and len(res["epoch"]) >= 16
    assert "daemon.status" in res["capabilities"]
    assert res["limits"]["max_line_bytes"] == 1024 * 1024


def test_epoch_changes_on_restart(daemon):
    e1 = daemon.conn().hello["epoch"]
    daemon.stop()
    daemon.start()
    e2 = daemon.conn().hello["epoch"]
    assert e1 != e2


def test_first_call_must_be_hello(daemon):
    c = daemon.conn(hello=False)
    r = c.call("daemon.status")
    assert r["error"]["data"]["kind"] == "hello_required"
    # The connection stays usable: hello now works.
    assert "result" in c.call("hello", {"protocol": 1})
    assert "result" in c.call("daemon.status")


def test_unsupported_protocol_errors_then_closes(daemon):
    c = daemon.conn(hello=False)
    r = c.call("hello", {"protocol": 99})
    assert r["error"]["data"]["kind"] == "unsupported_protocol"
    assert r["error"]["data"]["supported"] == [1]
    assert c.closed()


def test_malformed_json_keeps_connection(daemon):
    c = daemon.conn()
    c.send_raw(b'{"jsonrpc":"2.0","id":1,"method":\n')
    r = c.recv()
    assert r["id"] is None
    assert r["error"]["code"] == -32700
    assert r["error"]["data"]["kind"] == "parse_error"
    assert "result" in c.call("daemon.ping")


@pytest.mark.parametrize("line,code", [
    (b'[]', -32600),
    (b'[{"jsonrpc":"2.0","id":1,"method":"daemon.ping"}]', -32600),
    (b'42', -32600),
    (b'"hello"', -32600),
    (b'null', -32600),
    (b'{}', -32600),
    (b'{"jsonrpc":"1.0","id":1,"method":"daemon.ping"}', -32600),
    (b'{"jsonrpc":"2.0","id":1,"method":7}', -32600),
    (b'{"jsonrpc":"2.0","id":[1],"method":"daemon.ping"}', -32600),
    (b'{"jsonrpc":"2.0","id":1,"method":"daemon.ping","params":"x"}', -32600),
    (b'{"jsonrpc":"2.0","id":1,"result":{}}', -32600),
    (b'{"jsonrpc":"2.0","id":1,"method":"no.such.method"}', -32601),
    (b'{"jsonrpc":"2.0","id":1,"method":"daemon.ping","params":{"x":1}}', -32602),
    (b'{"jsonrpc":"2.0","id":1,"method":"daemon.ping","params":[1]}', -32602),
    (b'{"jsonrpc":"2.0","id":1,"method":"a\xff"}', -32700),
    (b'{"jsonrpc":"2.0","id":1,"method":"a\x00b"}', -32700),
    (b'{"jsonrpc":"2.0","jsonrpc":"2.0","id":1,"method":"daemon.ping"}', -32700),
    (b'{"jsonrpc":"2.0","id":99999999999999999999999,"method":"daemon.ping"}', -32700),
    (b'{"jsonrpc":"2.0","id":1,"method":"m","params":' + b'[' * 100000 + b']' * 100000 + b'}', -32700),
    # 64 levels in all are taken (and reach the method), 65 are not.
    (b'{"jsonrpc":"2.0","id":1,"method":"daemon.ping","params":' + b'[' * 63 + b']' * 63 + b'}', -32602),
    (b'{"jsonrpc":"2.0","id":1,"method":"daemon.ping","params":' + b'[' * 64 + b']' * 64 + b'}', -32700),
], ids=lambda v: v.decode("latin-1")[:40] if isinstance(v, bytes) else str(v))
def test_bad_input_gets_the_right_error(daemon, line, code):
    c = daemon.conn()
    c.send_raw(line + b"\n")
    r = c.recv()
    assert r["error"]["code"] == code, r
    kinds = {-32700: "parse_error", -32600: "invalid_request",
             -32601: "method_not_found", -32602: "invalid_params"}
    assert r["error"]["data"]["kind"] == kinds[code]
    # Still usable afterwards.
    assert "result" in c.call("daemon.ping")


def test_invalid_params_names_the_field(daemon):
    c = daemon.conn(hello=False)
    r = c.call("hello", {"protocol": "one"})
    assert r["error"]["code"] == -32602
    assert r["error"]["data"] == {"kind": "invalid_params", "field": "protocol"}
    r = c.call("hello", {"client": "x"})
    assert r["error"]["data"]["field"] == "protocol"
    r = c.call("hello", {"protocol": 1, "bogus": True})
    assert r["error"]["data"]["field"] == "bogus"


def test_notifications_get_no_reply(daemon):
    c = daemon.conn()
    c.send({"jsonrpc": "2.0", "method": "daemon.ping"})
    c.send({"jsonrpc": "2.0", "method": "no.such.method"})
    r = c.call("daemon.ping")
    assert r["id"] == c.next_id - 1 and "result" in r
    assert c.events == []


def test_pipelined_requests_answered_in_order(daemon):
    c = daemon.conn()
    n = 2000
    c.send_raw(b"".join(
        json.dumps({"jsonrpc": "2.0", "id": i, "method": "daemon.ping"}).encode() + b"\n"
        for i in range(n)))
    ids = [c.recv()["id"] for _ in range(n)]
    assert ids == list(range(n))


def test_split_and_joined_lines(daemon):
    c = daemon.conn()
    line = json.dumps({"jsonrpc": "2.0", "id": "split", "method": "daemon.ping"}).encode() + b"\n"
    for b in line:
        c.send_raw(bytes([b]))
    assert c.recv()["id"] == "split"
    c.send_raw(b"\n\r\n" + line.replace(b"split", b"a") + line.replace(b"split", b"b"))
    assert c.recv()["id"] == "a"
    assert c.recv()["id"] == "b"


def test_crlf_lines(daemon):
    c = daemon.conn()
    c.send_raw(b'{"jsonrpc":"2.0","id":5,"method":"daemon.ping"}\r\n')
    assert c.recv()["id"] == 5


def test_oversize_line_too_large_then_closed(daemon):
    c = daemon.conn()
    before = rss_kib(daemon.proc.pid)
    # 8 MiB with no newline: the daemon must answer and close after the
    # first MiB, without gathering the rest.
    chunk = b"x" * 65536
    sent = 0
    try:
        for _ in range(128):
            c.sock.sendall(chunk)
            sent += len(chunk)
    except (BrokenPipeError, ConnectionResetError):
        pass
    r = c.recv()
    assert r["id"] is None
    assert r["error"]["data"]["kind"] == "too_large"
    assert r["error"]["data"]["max_bytes"] == 1024 * 1024
    assert c.closed()
    if not SANITIZED:       # ASan's quarantine keeps what was freed
        assert rss_kib(daemon.proc.pid) - before < 4 * 1024
    # Others are unaffected.
    assert "result" in daemon.conn().call("daemon.ping")


def test_line_exactly_at_limit_is_accepted(make_daemon):
    d = make_daemon(config="[daemon]\nmax_line_bytes = 4K\n")
    c = d.conn()
    base = {"jsonrpc": "2.0", "id": 1, "method": "daemon.ping", "pad": ""}
    pad = 4096 - len(json.dumps(base, separators=(",", ":")))
    base["pad"] = "p" * pad
    line = json.dumps(base, separators=(",", ":")).encode()
    assert len(line) == 4096
    c.send_raw(line + b"\n")
    assert c.recv()["id"] == 1
    base["pad"] += "p"
    c.send_raw(json.dumps(base, separators=(",", ":")).encode() + b"\n")
    r = c.recv()
    assert r["error"]["data"]["kind"] == "too_large"
    assert r["error"]["data"]["max_bytes"] == 4096
    assert c.closed()


def test_disconnects_at_awkward_moments(daemon):
    req = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "daemon.status"}).encode() + b"\n"
    for i in range(50):
        c = daemon.conn(hello=(i % 2 == 0))
        mode = i % 5
        if mode == 0:
            c.send_raw(req[:len(req) // 2])          # mid-line
        elif mode == 1:
            c.send_raw(b'{"jsonrpc":"2.0","id":1,"met')  # mid-request
        elif mode == 2:
            c.send_raw(req * 500)                     # replies queued, never read
        elif mode == 3:
            c.sock.shutdown(socket.SHUT_WR)           # half-close right away
        else:
            c.send_raw(b"\x00\xff\xfe" * 100)         # garbage, no newline
        c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
        c.close()
    st = daemon.conn().call("daemon.status")["result"]
    assert st["clients"]["connected"] == 1


def test_half_closed_client_still_gets_its_replies(daemon):
    c = daemon.conn()
    c.send_raw(b"".join(
        json.dumps({"jsonrpc": "2.0", "id": i, "method": "daemon.ping"}).encode() + b"\n"
        for i in range(100)))
    c.sock.shutdown(socket.SHUT_WR)
    ids = [c.recv()["id"] for _ in range(100)]
    assert ids == list(range(100))
    assert c.closed()


def test_client_that_never_reads_is_bounded(make_daemon):
    d = make_daemon(config="[daemon]\nclient_queue_bytes = 256K\n")
    c = d.conn()
    before = rss_kib(d.proc.pid)
    req = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "daemon.status"}).encode() + b"\n"
    c.sock.setblocking(False)
    sent = 0
    deadline = time.time() + 5
    # Keep writing requests while never reading replies: the daemon stops
    # reading from us (backpressure) once our queue is large.
    while time.time() < deadline:
        try:
            sent += c.sock.send(req * 64)
        except BlockingIOError:
            time.sleep(0.01)
    grown = rss_kib(d.proc.pid) - before
    assert sent > 0
    assert grown < 16 * 1024, "daemon grew by %d KiB" % grown
    # Other clients are served meanwhile.
    assert "result" in d.conn().call("daemon.ping")
    # Nothing was lost: reading now yields one reply per complete request.
    c.sock.setblocking(True)
    c.sock.settimeout(20)
    rest = len(req) - sent % len(req)
    if rest != len(req):
        c.send_raw(req[-rest:])
    want = (sent + len(req) - 1) // len(req)
    for _ in range(want):
        assert "result" in c.recv()
    assert "result" in c.call("daemon.ping")


def test_thousand_clients_at_once(daemon):
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < 2200:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, 4096), hard))
    conns = []
    try:
        for _ in range(1000):
            c = Conn(daemon.socket, hello=False, timeout=30)
            conns.append(c)
        for c in conns:
            c.request("hello", {"protocol": 1})
        for c in conns:
            assert "result" in c.recv()
        for c in conns:
            c.request("daemon.ping")
        for c in conns:
            assert "result" in c.recv()
        st = conns[0].call("daemon.status")["result"]
        assert st["clients"]["connected"] == 1000
    finally:
        for c in conns:
            c.close()


def test_max_clients_answers_busy(make_daemon):
    d = make_daemon(config="[daemon]\nmax_clients = 3\n")
    conns = [d.conn() for _ in range(3)]
    extra = Conn(d.socket, hello=False)
    r = extra.recv()
    assert r["error"]["data"]["kind"] == "busy"
    assert extra.closed()
    conns[0].close()
    time.sleep(0.2)
    assert "result" in d.conn().call("daemon.ping")


def test_other_uid_is_refused(daemon):
    """Layer 3 alone: even with the folder and socket opened up to everyone,
    a peer of another uid gets permission_denied and is closed."""
    if os.getuid() != 0:
        pytest.skip("needs root to connect as another uid")
    os.chmod(daemon.sockdir, 0o755)
    os.chmod(daemon.root, 0o755)
    os.chmod(os.path.dirname(daemon.root), 0o755)
    os.chmod(daemon.socket, 0o666)
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        code = 1
        try:
            os.setgid(65534)
            os.setuid(65534)
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            s.settimeout(5)
            s.connect(daemon.socket)
            try:
                # The daemon may refuse and close before this arrives.
                s.sendall(b'{"jsonrpc":"2.0","id":1,"method":"hello","params":{"protocol":1}}\n')
            except (BrokenPipeError, ConnectionResetError):
                pass
            data = b""
            while True:
                try:
                    chunk = s.recv(4096)
                except ConnectionResetError:
                    break
                if not chunk:
                    break
                data += chunk
            os.write(w, data)
            code = 0
        except BaseException as e:
            os.write(2, ("child: %r\n" % e).encode())
        finally:
            os._exit(code)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 4096)
        if not chunk:
            break
        data += chunk
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    lines = data.strip().split(b"\n")
    assert len(lines) == 1, data          # one error, no hello reply
    msg = json.loads(lines[0])
    assert msg["error"]["data"]["kind"] == "permission_denied"
    st = daemon.conn().call("daemon.status")["result"]
    assert st["listener"]["refused_uid"] == 1
    assert "refused a client of uid 65534" in daemon.log()


def test_protocol_doc_lists_every_error_kind():
    """doc/PROTOCOL.md's error table names every code protocol/errors.c
    can send, with the same kind."""
    top = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import re
    src = open(os.path.join(top, "protocol", "errors.c")).read()
    kinds = re.findall(r'\{\s*(-32\d\d\d),\s*"([a-z_]+)"\s*\}', src)
    assert len(kinds) > 20
    doc = open(os.path.join(top, "doc", "PROTOCOL.md")).read()
    missing = [(c, k) for c, k in kinds
               if not re.search(r"^\| %s \| `%s` \|" % (c, k), doc, re.M)]
    assert missing == []
