"""Call history: every call is recorded in state.db on the gateway's own thread, and
`aai-gateway history` filters by app, tool, caller, status and time. Credentials never
reach it — not even when a service echoes them in its answer.

Run: python3 -m pytest tests/mcp -q -k history
"""
import json
import time

import pytest

from test_auth import auth_set
from test_http import httpbin, tool, web_app  # noqa: F401  (httpbin is a fixture)

MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio

KEY = "k3y-h1st0ry-s3cr3t"


def calls(gw, *args):
    out = gw.run("history", "--json", *args)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)["calls"]


def wait_for(gw, n, *args):
    deadline = time.monotonic() + 10
    while len(found := calls(gw, *args)) < n:
        assert time.monotonic() < deadline, found
        time.sleep(0.05)
    return found


async def test_calls_are_recorded_and_filtered(gw):
    gw.add_app("com.example.echo")
    gw.add_app("com.example.other")
    async with gw.session(client_name="hist-client") as s:
        await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "echo",
                                       "args": {"text": "one", "password": "pw-s3cr3t"}})
        with pytest.raises(MCPError):
            await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "echo", "args": {}})
        await s.call_tool("aai_exec", {"app": "com.example.other", "tool": "echo", "args": {"text": "two"}})
    all_calls = wait_for(gw, 3)
    assert [c["app"] for c in all_calls] == ["com.example.other", "com.example.echo", "com.example.echo"]
    newest_echo_ok = calls(gw, "--app", "com.example.echo", "--status", "ok")
    assert len(newest_echo_ok) == 1
    rec = newest_echo_ok[0]
    assert rec["caller"] == "hist-client@stdio" and rec["tool"] == "echo"
    assert rec["args"] == {"text": "one", "password": "***"}
    assert '"one"' in rec["excerpt"]
    failed = calls(gw, "--status", "error")
    assert failed[0]["code"] == "INVALID_PARAMS"
    assert len(calls(gw, "--caller", "nobody@stdio")) == 0
    assert len(calls(gw, "--since", "1h")) == 3
    assert len(calls(gw, "--limit", "1")) == 1
    table = gw.run("history", "--app", "com.example.other")
    assert "com.example.other" in table.stdout and "hist-client@stdio" in table.stdout
    assert b"pw-s3cr3t" not in (gw.home / "state.db").read_bytes()


async def test_credentials_never_reach_history(gw, httpbin):
    app = web_app("com.example.keyed", httpbin, [tool("headers", "GET", "/headers"), tool("get", "GET", "/get")])
    app["auth"] = {"type": "apiKey", "apiKey": {"location": "header", "name": "Authorization",
                                                "prefix": "Bearer", "obtainUrl": "https://example.com"}}
    gw.put("com.example.keyed", app)
    gw.config(credentials={"store": "file"})
    assert auth_set(gw, "com.example.keyed", KEY).returncode == 0
    async with gw.session() as s:
        r = await s.call_tool("aai_exec", {"app": "com.example.keyed", "tool": "headers", "args": {}})
        assert KEY in r.content[0].text, "httpbin echoes the header: the agent asked for it"
    recorded = wait_for(gw, 1)
    assert KEY not in json.dumps(recorded) and "***" in recorded[0]["excerpt"]
    for path in gw.home.rglob("state.db*"):
        assert KEY.encode() not in path.read_bytes(), path


def test_every_cli_call_is_recorded_under_the_app_id(gw):
    """Fast-failing one-shot calls exit at once: each waits for its record to be stored,
    and each is kept under the app's id, with the name the caller typed beside it."""
    gw.add_app("com.example.notes", name={"en": "Notes", "zh-CN": "笔记"}, aliases=("notes",))
    typed = ["com.example.notes", "notes", "笔记"]
    for i in range(60):
        out = gw.run("call", typed[i % 3], "echo", "{}")  # no `text`: INVALID_PARAMS
        assert out.returncode == 1, out
    found = calls(gw, "--app", "com.example.notes", "--limit", "1000")
    assert len(found) == 60, len(found)
    assert {c["code"] for c in found} == {"INVALID_PARAMS"}
    assert sorted({c["asked"] for c in found}, key=str) == sorted([None, "notes", "笔记"], key=str)
    table = gw.run("history", "--limit", "3").stdout
    assert "com.example.notes (as" in table, table


def test_a_burst_then_sigterm_loses_nothing(gw):
    """MCP calls answered just before SIGTERM are stored before the process ends."""
    import os
    import signal
    import subprocess
    gw.add_app("com.example.echo", aliases=("echo-app",))
    proc = subprocess.Popen([str(gw.binary), "--home", str(gw.home)], env=gw.env(), stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    send = lambda m: (proc.stdin.write(json.dumps(m) + "\n"), proc.stdin.flush())  # noqa: E731
    send({"jsonrpc": "2.0", "id": 0, "method": "initialize",
          "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "burst", "version": "1"}}})
    proc.stdout.readline()
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    n = 40
    for i in range(1, n + 1):
        args = {"text": f"m{i}"} if i % 2 else {}
        send({"jsonrpc": "2.0", "id": i, "method": "tools/call",
              "params": {"name": "aai_exec", "arguments": {"app": "echo-app" if i % 4 == 1 else "com.example.echo",
                                                           "tool": "echo", "args": args}}})
    replies = [json.loads(proc.stdout.readline()) for _ in range(n)]
    assert sorted(r["id"] for r in replies) == list(range(1, n + 1))
    os.kill(proc.pid, signal.SIGTERM)
    assert proc.wait(timeout=30) is not None
    found = calls(gw, "--app", "com.example.echo", "--limit", "1000")
    assert len(found) == n, len(found)
    assert sum(1 for c in found if c["asked"] == "echo-app") == n // 4
