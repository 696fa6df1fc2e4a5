"""Two `--web` replicas on one PostgreSQL behind nginx, taking the team's tokens: the
proxy sends each MCP session back to the replica that holds it (the replica's name
starts the session id, `--replica`), the stateless revision goes anywhere, and a consent
question answered on one replica releases the call waiting on the other. The nginx
configuration is the one docs/deploy.md shows.

Peers: Debian's `nginx` and `postgresql`, oidc-provider (`oidc/team.mjs`).
Run: python3 -m pytest tests/mcp/test_replicas.py -q
"""
import contextlib
import json
import re
import shutil
import subprocess
import time
import urllib.parse
import urllib.request

import anyio
import pytest

from conftest import Gateway, need_peer
from team import TeamIdp, team_web
from test_http import free_port, wait_port
from test_store import KEY, pg  # noqa: F401  (pg is a fixture)
from test_team import init, post, session_for
from test_ui import csrf_of

MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio

NGINX = """
worker_processes 1;
daemon off;
pid {tmp}/nginx.pid;
error_log {tmp}/nginx-error.log warn;
events {{ worker_connections 512; }}
http {{
    access_log off;
    client_body_temp_path {tmp}/nginx-body;
    proxy_temp_path {tmp}/nginx-proxy;
    fastcgi_temp_path {tmp}/nginx-fastcgi;
    uwsgi_temp_path {tmp}/nginx-uwsgi;
    scgi_temp_path {tmp}/nginx-scgi;

    # Every replica, for requests that belong to no session yet (an initialize, the
    # stateless revision, the resource metadata).
    upstream gateways {{ server 127.0.0.1:{a}; server 127.0.0.1:{b}; }}
    upstream replica_a {{ server 127.0.0.1:{a}; }}
    upstream replica_b {{ server 127.0.0.1:{b}; }}
    # A session's requests go back to the replica named at the start of its id.
    map $http_mcp_session_id $mcp_pool {{
        "~^a\\." replica_a;
        "~^b\\." replica_b;
        default gateways;
    }}
    # The web UI: one person stays on one replica (where the message after an action waits).
    upstream ui {{ hash $cookie_aai_person consistent; server 127.0.0.1:{a}; server 127.0.0.1:{b}; }}

    server {{
        listen 127.0.0.1:{port};
        proxy_http_version 1.1;
        proxy_set_header Host $http_host;
        proxy_set_header Connection "";
        proxy_buffering off;
        proxy_read_timeout 1h;
        location /mcp {{ proxy_pass http://$mcp_pool; }}
        location /ui {{ proxy_pass http://ui; }}
        location / {{ proxy_pass http://gateways; }}
    }}
}}
"""


@contextlib.contextmanager
def nginx(tmp, port, a, b):
    exe = shutil.which("nginx") or "/usr/sbin/nginx"
    need_peer(shutil.which("nginx") is not None or __import__("os").path.exists(exe), "Debian package nginx")
    conf = tmp / "nginx.conf"
    conf.write_text(NGINX.format(tmp=tmp, port=port, a=a, b=b))
    proc = subprocess.Popen([exe, "-c", str(conf), "-p", str(tmp), "-e", str(tmp / "nginx-error.log")],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        wait_port(port, proc)
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=15)


def replica_home(binary, tmp, name, idp, audience, pg):
    (tmp / name).mkdir()
    gw = Gateway(binary, tmp / name)
    gw.add_app("com.example.notes")
    gw.add_app("com.example.echo")
    gw.config(web={"auth": {"issuer": idp.base, "audience": audience, "scopes": ["mcp"], "clientId": "aai-ui"}},
              store={"url": pg.url(), "timeoutSeconds": 3, "connectTimeoutSeconds": 2},
              consent={"mode": "prompt", "waitSeconds": 30},
              apps={"com.example.echo": {"consent": "allow"}})
    gw.extra_env["AAI_STORE_KEY"] = KEY
    return gw


@pytest.fixture
def team_replicas(binary, tmp_path, pg):  # noqa: F811
    proxy = free_port()
    audience = f"http://127.0.0.1:{proxy}/mcp"
    idp = TeamIdp(tmp_path, audience)
    a, b = free_port(), free_port()
    homes = [replica_home(binary, tmp_path, n, idp, audience, pg) for n in ("a", "b")]
    with contextlib.ExitStack() as stack:
        for gw, port, name in zip(homes, (a, b), ("a", "b")):
            stack.enter_context(team_web(gw, port, replica=name))
        stack.enter_context(nginx(tmp_path, proxy, a, b))
        yield idp, audience, homes, (a, b)
    idp.stop()


async def test_sessions_stay_on_their_replica_and_consent_crosses_replicas(team_replicas, tmp_path):
    idp, audience, homes, (a, b) = team_replicas
    bob = idp.token("bob", "mcp")
    # Round robin spreads new sessions; each id names its replica, and every later request
    # of the session reaches it through the proxy.
    ids = [post(audience, init(), bob).headers["mcp-session-id"] for _ in range(4)]
    assert {i.split(".")[0] for i in ids} == {"a", "b"}, ids
    for n in range(6):
        async with session_for(audience, bob, f"client-{n}") as s:
            r = await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "echo", "args": {"text": str(n)}})
            assert r.structured_content["echo"]["text"] == str(n)
    # The stateless revision: any replica.
    import httpx2
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    async with httpx2.AsyncClient(headers={"authorization": f"Bearer {bob}"}, timeout=30) as client:
        for n in range(4):
            async with streamable_http_client(audience, http_client=client) as (read, write):
                async with ClientSession(read, write) as s:
                    await s.discover()
                    r = await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "echo",
                                                       "args": {"text": f"stateless {n}"}})
                    assert r.structured_content["echo"]["text"] == f"stateless {n}"
    # A call that waits for consent on replica b, answered through replica a's UI.
    while True:
        r = post(audience, init("claude-code"), bob)
        sid = r.headers["mcp-session-id"]
        if sid.startswith("b."):
            break
    h = {"mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
    post(audience, {"jsonrpc": "2.0", "method": "notifications/initialized"}, bob, h)
    done = {}

    def waiting_call():
        r = post(audience, {"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
            "name": "aai_exec", "arguments": {"app": "com.example.notes", "tool": "echo",
                                              "args": {"text": "across"}}}}, bob, h)
        done["at"] = time.monotonic()
        done["body"] = r.text

    async with anyio.create_task_group() as tg:
        tg.start_soon(anyio.to_thread.run_sync, waiting_call)
        ui = f"http://127.0.0.1:{a}/ui"
        cookie = {"cookie": f"aai_person={idp.token('bob', 'mcp')}"}
        deadline = time.monotonic() + 20
        while True:
            page = urllib.request.urlopen(urllib.request.Request(ui + "/consent", headers=cookie),
                                          timeout=10).read().decode()
            pending = re.findall(r'<tr id="pending-(\d+)"', page)
            if pending or time.monotonic() > deadline:
                break
            await anyio.sleep(0.1)
        assert pending, "replica a never listed the call waiting on replica b"
        # A person's form token is theirs on every replica: the one replica b's page
        # carries is taken by replica a.
        other = urllib.request.urlopen(urllib.request.Request(f"http://127.0.0.1:{b}/ui/consent", headers=cookie),
                                       timeout=10).read().decode()
        assert csrf_of(other) == csrf_of(page)
        form = urllib.parse.urlencode({"csrf": csrf_of(other), "id": pending[0], "choice": "once"}).encode()
        answered = time.monotonic()
        req = urllib.request.Request(ui + "/consent/answer", data=form,
                                     headers={**cookie, "origin": f"http://127.0.0.1:{a}"})
        urllib.request.urlopen(req, timeout=10).read()
    assert "across" in done["body"] and '"isError":true' not in done["body"], done["body"]
    print(f"\nreleased on replica b {1000 * (done['at'] - answered):.0f} ms after the answer on replica a")
    # Both replicas wrote bob's calls into the one history (a background writer records
    # them: wait for the last).
    deadline = time.monotonic() + 15
    while len(rows := json.loads(homes[0].run("history", "--json", "--person", "bob").stdout)["calls"]) < 11:
        assert time.monotonic() < deadline, rows
        time.sleep(0.2)
