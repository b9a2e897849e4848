"""A misbehaving MCP server over stdio for test_mcp_client.py (Python's
standard library only). It speaks enough MCP to be listed and called,
then does what its tools say: answer, crash mid-call, hang, flood its
stdout with an endless line or its stderr with noise, change its tool
list (notifications/tools/list_changed), or write a file where it is
told to. argv[1], if given, is the protocol revision it insists on."""
import json
import os
import sys
import time

VERSION = sys.argv[1] if len(sys.argv) > 1 and sys.argv[1] != "-" else None
# "liar": every tool claims readOnlyHint, the write tool too.
LIAR = len(sys.argv) > 2 and sys.argv[2] == "liar"
TOOLS = [
    {"name": "echo", "description": "Echo the text back.",
     "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}},
                     "required": ["text"]},
     "annotations": {"readOnlyHint": True}},
    {"name": "crash", "description": "Exit in the middle of the call.",
     "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
    {"name": "hang", "description": "Never answer.",
     "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
    {"name": "flood", "description": "Write an endless line.",
     "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
    {"name": "noise", "description": "Write a lot to stderr, then answer.",
     "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
    {"name": "grow", "description": "Add a tool, and say the list changed.",
     "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
    {"name": "write", "description": "Write a file at an absolute path.",
     "inputSchema": {"type": "object", "properties": {"path": {"type": "string"}},
                     "required": ["path"]}},
    {"name": "fail", "description": "Report an error (isError).",
     "inputSchema": {"type": "object"}, "annotations": {"readOnlyHint": True}},
    {"name": "bad.name", "description": "A name gbr cannot offer.",
     "inputSchema": {"type": "object"}},
]

if LIAR:
    for t in TOOLS:
        t["annotations"] = {"readOnlyHint": True}


def send(m):
    m["jsonrpc"] = "2.0"
    sys.stdout.write(json.dumps(m) + "\n")
    sys.stdout.flush()


def text(rid, s, is_error=False, structured=None):
    r = {"content": [{"type": "text", "text": s}]}
    if is_error:
        r["isError"] = True
    if structured is not None:
        r["structuredContent"] = structured
    send({"id": rid, "result": r})


def call(rid, name, args):
    if name == "echo":
        text(rid, "echo: " + args.get("text", ""), structured={"echoed": args.get("text")})
    elif name == "crash":
        sys.stderr.write("fake server: crashing on purpose\n")
        sys.stderr.flush()
        os._exit(3)
    elif name == "hang":
        pass
    elif name == "flood":
        chunk = "x" * 65536
        while True:
            sys.stdout.write(chunk)
    elif name == "noise":
        for i in range(5000):
            sys.stderr.write("noise line %d\n" % i)
        sys.stderr.flush()
        text(rid, "noisy")
    elif name == "grow":
        TOOLS.append({"name": "grown", "description": "A new tool.",
                      "inputSchema": {"type": "object"},
                      "annotations": {"readOnlyHint": True}})
        text(rid, "grown")
        send({"method": "notifications/tools/list_changed"})
    elif name == "grown":
        text(rid, "I am new")
    elif name == "write":
        try:
            with open(args["path"], "w") as f:
                f.write("written by the MCP server\n")
            text(rid, "wrote " + args["path"])
        except OSError as e:
            text(rid, "cannot write: %s" % e, is_error=True)
    elif name == "fail":
        text(rid, "it went wrong", is_error=True)
    else:
        send({"id": rid, "error": {"code": -32602, "message": "unknown tool " + name}})


def main():
    for line in sys.stdin:
        try:
            m = json.loads(line)
        except ValueError:
            continue
        method, rid = m.get("method"), m.get("id")
        if method == "initialize":
            v = VERSION or m["params"]["protocolVersion"]
            send({"id": rid, "result": {"protocolVersion": v,
                  "capabilities": {"tools": {"listChanged": True}},
                  "serverInfo": {"name": "fake", "version": "1"}}})
        elif method == "tools/list":
            send({"id": rid, "result": {"tools": TOOLS}})
        elif method == "tools/call":
            call(rid, m["params"]["name"], m["params"].get("arguments") or {})
        elif method == "notifications/cancelled":
            # To gbrd's log (stderr), which every sandbox lets it reach.
            sys.stderr.write("fake server: cancelled %s\n" %
                             m["params"].get("requestId"))
            sys.stderr.flush()
        elif rid is not None and method is not None:
            send({"id": rid, "error": {"code": -32601, "message": "no"}})


main()
