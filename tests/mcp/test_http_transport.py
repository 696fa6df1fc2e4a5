"""`aai-gateway --web`: MCP over Streamable HTTP at /mcp, driven by the Python SDK's
HTTP client and the Inspector CLI; DNS-rebinding checks (Host, Origin); the bearer token
that off-loopback listening requires.

Run: python3 -m pytest tests/mcp -q -k http_transport
"""
import contextlib
import json
import subprocess

import pytest

from conftest import inspector, need_peer
from test_http import free_port

MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}
HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


@contextlib.contextmanager
def web(gw, token=None, listen=None):
    """Starts `--web` on a free loopback port; yields the /mcp URL."""
    port = free_port()
    env = gw.env(**({"AAI_HTTP_TOKEN": token} if token else {}))
    proc = subprocess.Popen([str(gw.binary), "--home", str(gw.home), "--web", "--listen",
                             listen or f"127.0.0.1:{port}"],
                            env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    try:
        line = ""
        while "serving MCP on" not in line:
            line = proc.stderr.readline()
            assert line, f"the server did not start: {proc.stderr.read()}"
        yield f"http://127.0.0.1:{port}/mcp", proc
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def post(url, body, headers=None):
    import httpx2
    return httpx2.post(url, content=json.dumps(body), headers={**HEADERS, **(headers or {})}, timeout=10)


async def test_the_sdk_client_works_over_http(gw):
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    gw.add_app("com.example.echo")
    with web(gw) as (url, _):
        async with streamable_http_client(url) as (read, write):
            async with ClientSession(read, write) as s:
                init = await s.initialize()
                assert init.server_info.name == "aai-gateway"
                names = [t.name for t in (await s.list_tools()).tools]
                assert "app_com_example_echo" in names and "aai_exec" in names
                r = await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "echo",
                                                   "args": {"text": "over http"}})
                assert r.structured_content["echo"]["text"] == "over http"
                with pytest.raises(MCPError) as e:
                    await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "echo", "args": {}})
                assert e.value.error.code == -32005
        # The stateless 2026-07-28 revision (clientInfo in _meta, no session).
        async with streamable_http_client(url) as (read, write):
            async with ClientSession(read, write) as s:
                await s.discover()
                r = await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "echo",
                                                   "args": {"text": "stateless"}})
                assert r.structured_content["echo"]["text"] == "stateless"
        # Two sessions at once, each its own handler over the one gateway.
        async with streamable_http_client(url) as (r1, w1), streamable_http_client(url) as (r2, w2):
            async with ClientSession(r1, w1) as a, ClientSession(r2, w2) as b:
                await a.initialize()
                await b.initialize()
                ra = await a.call_tool("aai_exec", {"app": "com.example.echo", "tool": "echo", "args": {"text": "a"}})
                rb = await b.call_tool("aai_exec", {"app": "com.example.echo", "tool": "echo", "args": {"text": "b"}})
                assert (ra.structured_content["echo"]["text"], rb.structured_content["echo"]["text"]) == ("a", "b")


def test_the_inspector_cli_works_over_http(gw):
    need_peer(inspector() is not None, "npm @modelcontextprotocol/inspector (mcp-inspector)")
    gw.add_app("com.example.echo")
    with web(gw) as (url, _):
        out = subprocess.run([inspector(), "--cli", url, "--method", "tools/list"],
                             capture_output=True, text=True, timeout=60)
        assert out.returncode == 0, out.stderr
        names = [t["name"] for t in json.loads(out.stdout)["tools"]]
        assert "app_com_example_echo" in names


def test_dns_rebinding_is_refused(gw):
    with web(gw) as (url, _):
        assert post(url, INIT).status_code == 200
        assert post(url, INIT, {"host": "evil.example"}).status_code == 403
        assert post(url, INIT, {"origin": "http://evil.example"}).status_code == 403
        port = url.split(":")[2].split("/")[0]
        assert post(url, INIT, {"origin": f"http://localhost:{port}"}).status_code == 200


def test_a_token_is_required_off_loopback_and_checked_when_set(gw):
    # Refused before anything is bound: nothing listens beyond this machine.
    p = subprocess.run([str(gw.binary), "--home", str(gw.home), "--web", "--listen", "0.0.0.0:0"],
                       env=gw.env(), capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "AAI_HTTP_TOKEN" in p.stderr, p.stderr
    with web(gw, token="t0k3n-s3cr3t") as (url, _):
        assert post(url, INIT).status_code == 401
        assert post(url, INIT, {"authorization": "Bearer wrong"}).status_code == 401
        assert post(url, INIT, {"authorization": "Bearer t0k3n-s3cr3t"}).status_code == 200
    for path in gw.tmp.rglob("*"):
        if path.is_file():
            assert "t0k3n-s3cr3t" not in path.read_text(errors="replace"), path
