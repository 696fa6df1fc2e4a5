"""`aai-gateway --web`: MCP over Streamable HTTP at /mcp, driven by the Python SDK's
HTTP client and the Inspector CLI; DNS-rebinding checks (Host, Origin); the bearer token
that off-loopback listening requires.

Run: python3 -m pytest tests/mcp -q -k http_transport
"""
import contextlib
import os
import sys
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


async def test_the_sdk_client_works_over_http(gw, caplog):
    import logging
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    caplog.set_level(logging.WARNING, logger="mcp.client.streamable_http")
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
    # Each session was ended with DELETE, answered the way the SDK expects (200 or 204).
    assert not [r for r in caplog.records if "Session termination failed" in r.getMessage()], caplog.text


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


def test_a_token_is_checked_when_set_and_must_be_strong(gw):
    # A guessable token is refused before anything is bound.
    p = subprocess.run([str(gw.binary), "--home", str(gw.home), "--web", "--listen", "127.0.0.1:0"],
                       env=gw.env(AAI_HTTP_TOKEN="abc"), capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and "shorter than 16 characters" in p.stderr, p.stderr
    with web(gw, token="t0k3n-s3cr3t-long-enough") as (url, _):
        assert post(url, INIT).status_code == 401
        assert post(url, INIT, {"authorization": "Bearer wrong"}).status_code == 401
        assert post(url, INIT, {"authorization": "Bearer t0k3n-s3cr3t-long-enough"}).status_code == 200
        # Guessing slows down: after a few wrong tokens each answer waits.
        import time
        started = time.monotonic()
        for _ in range(10):
            assert post(url, INIT, {"authorization": "Bearer guess"}).status_code == 401
        assert time.monotonic() - started > 2.0, "wrong tokens in a row are answered slowly"
        assert post(url, INIT, {"authorization": "Bearer t0k3n-s3cr3t-long-enough"}).status_code == 200
    for path in gw.tmp.rglob("*"):
        if path.is_file():
            assert "t0k3n-s3cr3t-long-enough" not in path.read_text(errors="replace"), path


def test_another_user_on_this_machine_is_refused_before_a_byte_is_read(gw):
    """Loopback is not an identity: the listener serves only its own user's connections
    (Linux: the owner of the client's socket, from /proc/net/tcp)."""
    import shutil
    setpriv = shutil.which("setpriv")
    need_peer(setpriv is not None, "setpriv (util-linux)")
    if os.geteuid() != 0:
        pytest.skip("acting as another user needs root (CI runs as root)")
    client = (
        "import socket, sys\n"
        "s = socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=10)\n"
        "try:\n"
        "    s.sendall(b'GET /ui HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n\\r\\n')\n"
        "    data = s.recv(65536)\n"
        "except ConnectionError:\n"
        "    data = b''\n"
        "print(len(data), data[:12].decode(errors='replace'))\n"
    )
    with web(gw) as (url, proc):
        port = url.split(":")[2].split("/")[0]
        other = subprocess.run([setpriv, "--reuid=65534", "--regid=65534", "--clear-groups",
                                sys.executable, "-c", client, port], capture_output=True, text=True, timeout=30)
        mine = subprocess.run([sys.executable, "-c", client, port], capture_output=True, text=True, timeout=30)
        assert mine.stdout.split()[1:2] == ["HTTP/1.1"], mine.stdout + mine.stderr
        assert other.stdout.split()[:1] == ["0"], f"another user got an answer: {other.stdout}{other.stderr}"
        assert post(url, INIT).status_code == 200, "the owner's clients need nothing more"
    log = (gw.home / "logs").glob("*.log")
    assert any("refused a connection of another user" in f.read_text() for f in log)


def test_idle_connections_cannot_exhaust_the_listener(gw):
    """Under a 64-descriptor limit, 50 connections that never send a request do not lock
    the owner out: each is closed after the header-read timeout."""
    import resource
    import socket
    import time
    port = free_port()

    def limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (64, 64))

    proc = subprocess.Popen([str(gw.binary), "--home", str(gw.home), "--web", "--listen", f"127.0.0.1:{port}"],
                            env=gw.env(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, preexec_fn=limit)
    idle = []
    try:
        while "serving MCP on" not in proc.stderr.readline():
            assert proc.poll() is None, "the server did not start"
        for _ in range(50):
            idle.append(socket.create_connection(("127.0.0.1", port), timeout=5))
        # Until the idle ones time out the gateway may be out of descriptors: it then
        # fails closed (it cannot read who a new client is), and recovers by itself.
        started = time.monotonic()
        while True:
            assert time.monotonic() - started < 30, "the listener never recovered"
            try:
                if post(f"http://127.0.0.1:{port}/mcp", INIT).status_code == 200:
                    break
            except Exception:  # noqa: BLE001 (reset while out of descriptors)
                time.sleep(0.5)
        # The idle ones were closed by the server.
        idle[0].settimeout(15)
        assert idle[0].recv(1) == b""
    finally:
        for s in idle:
            s.close()
        proc.terminate()
        proc.wait(timeout=15)


def test_with_a_token_remote_clients_may_name_the_machine(gw):
    gw.config(web={"allowedHosts": ["gateway.example.internal"]})
    token = "remote-t0ken-long-enough"
    with web(gw, token=token) as (url, _):
        auth = {"authorization": f"Bearer {token}"}
        for host in ["gateway.example.internal", "192.0.2.10:8080", "[2001:db8::1]:80"]:
            assert post(url, INIT, {**auth, "host": host}).status_code == 200, host
        assert post(url, INIT, {**auth, "host": "evil.example"}).status_code == 403
    with web(gw) as (url, _):
        assert post(url, INIT, {"host": "192.0.2.10"}).status_code == 403, "without a token: loopback names only"


def test_http_requests_are_bounded_in_size_and_shape(gw):
    import httpx2
    with web(gw) as (url, _):
        post(url, INIT)
        values = ",".join(["0"] * 2_000_000)
        body = '{"jsonrpc":"2.0","id":2,"method":"tools/list","params":{"x":[' + values + ']}}'
        r = httpx2.post(url, content=body, headers=HEADERS, timeout=30)
        assert r.status_code == 400 and "JSON values" in r.text
        r = httpx2.post(url, content=b"x" * (17 << 20), headers=HEADERS, timeout=30)
        assert r.status_code == 413
        assert post(url, INIT).status_code == 200


def test_a_reused_id_in_flight_is_refused_and_sessions_are_capped(gw):
    import concurrent.futures
    import httpx2
    gw.add_app("com.example.echo")
    with web(gw) as (url, _):
        r = post(url, INIT)
        session = {"mcp-session-id": r.headers["mcp-session-id"]}
        post(url, {"jsonrpc": "2.0", "method": "notifications/initialized"}, session)
        call = {"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": {
            "name": "aai_exec", "arguments": {"app": "com.example.echo", "tool": "sleep", "args": {"seconds": 3}}}}
        # The adapter runs before the race, so the first request is in flight at once.
        warm = {**call, "id": 4, "params": {**call["params"], "arguments": {
            "app": "com.example.echo", "tool": "echo", "args": {"text": "warm"}}}}
        assert "warm" in post(url, warm, session).text
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            first = pool.submit(post, url, call, session)
            import time
            time.sleep(1.0)
            second = post(url, call, session)
            assert second.status_code == 200 and second.json()["error"]["code"] == -32600, second.text
            assert "slept" in first.result(timeout=30).text, "the first request keeps its reply"
        # Once answered, the id may be used again.
        assert "slept" in post(url, call, session).text
        # Sessions are capped per listener.
        opened = [post(url, INIT) for _ in range(63)]
        assert all(o.status_code == 200 for o in opened)
        refused = post(url, INIT)
        assert refused.status_code == 503 and "sessions open" in refused.text
        # Open sessions go on.
        assert post(url, {"jsonrpc": "2.0", "id": 6, "method": "ping"}, session).status_code == 200
        for o in opened:
            httpx2.delete(url, headers={**HEADERS, "mcp-session-id": o.headers["mcp-session-id"]}, timeout=10)
        assert post(url, INIT).status_code == 200, "closing sessions makes room"


FAKE_LSOF = """#!{python}
import os, sys
here = os.path.dirname(os.path.abspath(__file__))
open(os.path.join(here, "calls.txt"), "a").write(" ".join(sys.argv[1:]) + "\\n")
client = next(a[len("-iTCP@"):] for a in sys.argv[1:] if a.startswith("-iTCP@"))
uid = open(os.path.join(here, "uid.txt")).read().strip()
print(f"p4242\\nu{{uid}}\\nf5\\nn{{client}}->127.0.0.1:1")
"""

FAKE_POWERSHELL = """#!{python}
import os, sys
here = os.path.dirname(os.path.abspath(__file__))
open(os.path.join(here, "calls.txt"), "a").write(" ".join(sys.argv[1:3]) + " " + os.environ.get("AAI_PEER_PORT", "") + "\\n")
print(open(os.path.join(here, "answer.txt")).read().strip())
"""


@pytest.mark.parametrize("os_name, program, fake", [("macos", "lsof", FAKE_LSOF),
                                                    ("windows", "powershell.exe", FAKE_POWERSHELL)])
def test_on_macos_and_windows_the_os_is_asked_who_connects(gw, tmp_path, os_name, program, fake):
    """Through their command boundaries (recording fakes; not run on those systems here)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / program).write_text(fake.format(python=sys.executable))
    (bindir / program).chmod(0o755)
    answer = {"macos": ("uid.txt", str(os.getuid()), "4242"), "windows": ("answer.txt", "owner", "other")}[os_name]
    (bindir / answer[0]).write_text(answer[1])
    port = free_port()
    proc = subprocess.Popen([str(gw.binary), "--home", str(gw.home), "--web", "--listen", f"127.0.0.1:{port}"],
                            env=gw.env(AAI_HOST_OS=os_name, PATH=f"{bindir}:{os.environ['PATH']}"),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        while "serving MCP on" not in proc.stderr.readline():
            assert proc.poll() is None, "the server did not start"
        url = f"http://127.0.0.1:{port}/mcp"
        assert post(url, INIT).status_code == 200, "the owner, as the OS says"
        (bindir / answer[0]).write_text(answer[2])
        import httpx2
        with pytest.raises(httpx2.HTTPError):
            post(url, INIT)
        calls = (bindir / "calls.txt").read_text()
        assert calls.count("\n") >= 2, calls
        if os_name == "macos":
            assert "-nP -a -iTCP@127.0.0.1:" in calls and "-sTCP:ESTABLISHED -F pun" in calls, calls
        else:
            assert calls.startswith("-NoProfile -NonInteractive"), calls
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def test_a_taken_port_is_named_and_another_suggested(gw):
    """`--web` on a port another program holds: it says so (what answers there is not the
    gateway) and how to pick another, and exits; `--listen 127.0.0.1:0` then serves."""
    import socket
    holder = socket.socket()
    holder.bind(("127.0.0.1", 0))
    holder.listen(1)
    port = holder.getsockname()[1]
    try:
        gw.config(httpPort=port)
        for args in (["--web"], ["--web", "--listen", f"127.0.0.1:{port}"]):
            p = gw.run(*args, timeout=30)
            assert p.returncode != 0, p
            assert f"cannot listen on 127.0.0.1:{port}: another program listens on that port already" in p.stderr, p.stderr
            assert "--listen 127.0.0.1:0" in p.stderr, p.stderr
            assert "serving MCP" not in p.stderr
    finally:
        holder.close()
    with web(gw, listen="127.0.0.1:0") as (_, proc):
        pass
