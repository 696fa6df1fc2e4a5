"""An MCP server that misbehaves on purpose, in raw JSON-RPC (the SDKs would refuse to send
most of this). Usage: `hostile_mcp_server.py MODE [ARG]`, MCP over stdio; or
`hostile_mcp_server.py echo-http PORT`, an HTTP endpoint.

- `broken-list`: tools with a string, an array or no `inputSchema`, a `{"type": "string"}`
  schema, and names that are empty, spaced, multi-line, markdown, overlong or listed twice;
  beside a good `echo`.
- `many N`: N tools.
- `big`: a tool `big {mb}` whose answer is one line of `mb` MiB.
- `silent COUNTFILE`: never answers `initialize`; each start appends a line to COUNTFILE.
- `flood`: a tool `flood {n}` that sends `n` progress notifications, then its result.
- `deep`: besides `echo`, a tool whose `inputSchema` nests 200 levels deep.
- `odd-discover LOGFILE`: a server of an earlier revision that answers the unknown
  `server/discover` with an empty result (as the `sse-retry` conformance server does);
  `deaf-discover LOGFILE`: one that never answers it. Both log each start and each
  `server/discover` to LOGFILE; their tool `quit` ends the process.
- `echo-http PORT`: answers every request with a JSON-RPC error that quotes the request's
  path and headers (a server that echoes what it got).
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE = sys.argv[1]
ARG = sys.argv[2] if len(sys.argv) > 2 else None

ECHO = {"name": "echo", "description": "Says it back",
        "inputSchema": {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}}


def tools():
    if MODE == "broken-list":
        return [
            {"name": "notobj", "description": "schema is a string", "inputSchema": "nope"},
            {"name": "arr", "description": "schema is an array", "inputSchema": [1, 2]},
            {"name": "typestr", "description": "schema of a string", "inputSchema": {"type": "string"}},
            {"name": "noschema", "description": "no schema"},
            {"name": "", "description": "empty name", "inputSchema": {"type": "object"}},
            {"name": "has space", "description": "spaced", "inputSchema": {"type": "object"}},
            {"name": "new\nline", "description": "multi-line", "inputSchema": {"type": "object"}},
            {"name": "`tick`|pipe", "description": "markdown", "inputSchema": {"type": "object"}},
            {"name": "x" * 500, "description": "overlong", "inputSchema": {"type": "object"}},
            {"name": "dup", "description": "first dup", "inputSchema": {"type": "object"}},
            {"name": "dup", "description": "second dup", "inputSchema": {"type": "object"}},
            ECHO,
        ]
    if MODE == "deep":
        schema = {"type": "object"}
        for _ in range(200):
            schema = {"type": "object", "properties": {"a": schema}}
        return [ECHO, {"name": "deep", "description": "too deep to parse", "inputSchema": schema}]
    if MODE == "many":
        return [{"name": f"tool_{i:05d}", "description": f"Tool number {i}\nSecond line",
                 "inputSchema": {"type": "object", "properties": {"a": {"type": "string"}}}}
                for i in range(int(ARG))]
    if MODE in ("odd-discover", "deaf-discover"):
        return [ECHO, {"name": "quit", "description": "Ends the server",
                       "inputSchema": {"type": "object"}}]
    return [ECHO, {"name": "big", "description": "A huge answer",
                   "inputSchema": {"type": "object", "properties": {"mb": {"type": "integer"}}}},
            {"name": "flood", "description": "Progress, and lots of it",
             "inputSchema": {"type": "object", "properties": {"n": {"type": "integer"}}}}]


def send(message):
    sys.stdout.buffer.write(json.dumps(message).encode() + b"\n")
    sys.stdout.buffer.flush()


def call(request):
    name, args = request["params"]["name"], request["params"].get("arguments") or {}
    if name == "big":
        text = "A" * (int(args.get("mb", 17)) * 1024 * 1024)
    else:
        text = f"{name}: {json.dumps(args, sort_keys=True)}"
    return {"content": [{"type": "text", "text": text}]}


def note(what):
    with open(ARG, "a") as f:
        f.write(what + "\n")


def stdio():
    if MODE in ("silent", "odd-discover", "deaf-discover"):
        note("started")
    for line in sys.stdin.buffer:
        request = json.loads(line)
        method, rid = request.get("method"), request.get("id")
        if rid is None:
            continue
        if method == "server/discover" and MODE in ("odd-discover", "deaf-discover"):
            note("discover")
            if MODE == "odd-discover":
                send({"jsonrpc": "2.0", "id": rid, "result": {}})
        elif method == "tools/call" and request["params"]["name"] == "quit":
            sys.exit(0)
        elif method == "initialize":
            if MODE == "silent":
                continue
            send({"jsonrpc": "2.0", "id": rid, "result": {
                "protocolVersion": request["params"]["protocolVersion"], "capabilities": {"tools": {}},
                "serverInfo": {"name": f"hostile-{MODE}", "version": "0"}}})
        elif method == "tools/list":
            send({"jsonrpc": "2.0", "id": rid, "result": {"tools": tools()}})
        elif method == "tools/call":
            token = (request["params"].get("_meta") or {}).get("progressToken")
            if request["params"]["name"] == "flood" and token is not None:
                n = int((request["params"].get("arguments") or {}).get("n", 1000))
                out = sys.stdout.buffer
                for i in range(n):
                    out.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/progress", "params": {
                        "progressToken": token, "progress": i + 1, "total": n,
                        "message": f"step {i + 1} of {n}"}}).encode() + b"\n")
                out.flush()
            send({"jsonrpc": "2.0", "id": rid, "result": call(request)})
        else:
            send({"jsonrpc": "2.0", "id": rid, "error": {"code": -32601, "message": f"no method {method}"}})


class Echo(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length") or 0)) or b"{}")
        said = {"jsonrpc": "2.0", "id": body.get("id"), "error": {
            "code": -32000, "message": f"refused {self.path} with headers {json.dumps(dict(self.headers))}"}}
        data = json.dumps(said).encode()
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_DELETE = do_POST


if MODE == "echo-http":
    ThreadingHTTPServer(("127.0.0.1", int(ARG)), Echo).serve_forever()
else:
    stdio()
