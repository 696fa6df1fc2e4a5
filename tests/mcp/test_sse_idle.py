"""A downstream HTTP+SSE server (2024-11-05) that streams comments without end: once no
request waits on its stream (a call answered, or one timed out and cancelled), the
gateway closes the stream, and the next call opens a new one (exec/mcp/sse.rs).

Run: python3 -m pytest tests/mcp/test_sse_idle.py -q
"""
import subprocess
import sys
import time

import pytest

from test_downstream import exec_, mcp_app, stop
from test_http import free_port, wait_port

anyio = pytest.importorskip("anyio")
MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio

# Answers `initialize`, `tools/list` and `tools/call` of `echo` on the event stream; never
# answers `hang`. Between messages it sends a 1 KB comment every millisecond (about 1 MB
# a second), and records each stream that the client hung up.
COMMENTING = r"""
import http.server, json, queue, sys, threading, time
port, marks = int(sys.argv[1]), sys.argv[2]
streams = {}
class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    def do_GET(self):
        sid = str(len(streams) + 1)
        q = streams[sid] = queue.Queue()
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.end_headers()
        comment = (": " + "c" * 1000 + "\n").encode()
        try:
            self.wfile.write(f"event: endpoint\ndata: /message?session={sid}\n\n".encode())
            while True:
                try:
                    msg = q.get(timeout=0.001)
                    self.wfile.write(f"event: message\ndata: {json.dumps(msg)}\n\n".encode())
                except queue.Empty:
                    self.wfile.write(comment)
                self.wfile.flush()
        except OSError:
            open(marks, "a").write(f"closed {sid}\n")
    def do_POST(self):
        sid = self.path.split("session=")[-1]
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.send_response(202); self.send_header("Content-Length", "0"); self.end_headers()
        method, rid = body.get("method"), body.get("id")
        if rid is None or method is None:
            return
        if method == "initialize":
            result = {"protocolVersion": "2024-11-05", "capabilities": {"tools": {}},
                      "serverInfo": {"name": "commenting", "version": "1.0.0"}}
        elif method == "tools/list":
            result = {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in ("echo", "hang")]}
        elif method == "tools/call" and body["params"]["name"] == "echo":
            result = {"content": [{"type": "text", "text": "echoed"}]}
        else:
            return
        streams[sid].put({"jsonrpc": "2.0", "id": rid, "result": result})
    def log_message(self, *a): pass
http.server.ThreadingHTTPServer(("127.0.0.1", port), H).serve_forever()
"""


def closed(marks):
    return marks.read_text().splitlines() if marks.exists() else []


async def wait_closed(marks, count, within=15):
    deadline = time.monotonic() + within
    while len(closed(marks)) < count and time.monotonic() < deadline:
        await anyio.sleep(0.1)
    return closed(marks)


async def test_a_stream_of_comments_is_closed_once_no_call_needs_it(gw, tmp_path):
    port, marks = free_port(), tmp_path / "closed"
    server = subprocess.Popen([sys.executable, "-c", COMMENTING, str(port), str(marks)],
                              start_new_session=True, stderr=subprocess.DEVNULL)
    try:
        wait_port(port, server)
        mcp_app(gw, "dev.mcp.commenting",
                {"url": f"http://127.0.0.1:{port}/sse", "transport": "sse", "timeout": 5000})
        async with gw.session() as s:
            r = await exec_(s, "dev.mcp.commenting", "echo")
            assert r.content[0].text == "echoed"
            assert await wait_closed(marks, 1) == ["closed 1"], "the idle stream was closed"
            # The next call opens a new stream.
            r = await exec_(s, "dev.mcp.commenting", "echo")
            assert r.content[0].text == "echoed"
            assert await wait_closed(marks, 2) == ["closed 1", "closed 2"]
            # A call the server never answers times out; cancelled, it no longer needs the
            # stream.
            with pytest.raises(MCPError) as e:
                await exec_(s, "dev.mcp.commenting", "hang")
            assert e.value.error.data["type"] == "TIMEOUT", e.value.error.data
            assert await wait_closed(marks, 3) == ["closed 1", "closed 2", "closed 3"]
    finally:
        stop(server)
