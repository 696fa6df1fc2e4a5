"""Signing in to a remote MCP server (MCP authorization, `auth::mcp`): `auth login --yes`
through a headless browser, calls with the token, refresh with rotation before the token
expires, AUTH_REQUIRED before sign-in and after a refused refresh, and hostile
authorization servers (an endpoint on another origin, huge metadata, a token endpoint that
echoes what it was sent). No token is written anywhere but the credential store.

The server and its authorization server: oauth_mcp_server.py. The conformance suite's
client scenarios (test_conformance.py) cover discovery, registration and scopes.

Run: python3 -m pytest tests/mcp -q -k mcp_oauth
"""
import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

HERE = Path(__file__).parent
SERVER = HERE / "oauth_mcp_server.py"
BROWSER = HERE / "browser.py"
APP = "dev.remote.protected"


@pytest.fixture
def remote(gw, tmp_path):
    """Starts the protected server in a mode; yields (url, log path)."""
    procs = []

    def start(mode):
        log = tmp_path / f"server-{mode}.log"
        p = subprocess.Popen([sys.executable, str(SERVER), mode, str(log)], stdout=subprocess.PIPE, text=True)
        procs.append(p)
        port = int(p.stdout.readline())
        url = f"http://127.0.0.1:{port}/mcp"
        gw.config(credentials={"store": "file"})
        gw.put("remote", {
            "schemaVersion": "1.0", "version": "1.0.0", "platform": "linux",
            "app": {"id": APP, "name": {"en": "Protected"}, "defaultLang": "en", "description": "A remote server"},
            "execution": {"type": "mcp", "url": url}})
        return url, log

    yield start
    for p in procs:
        p.kill()
        p.wait()


def run(gw, *args, browser_log=None):
    env = gw.env(BROWSER=f"{sys.executable} {BROWSER}", BROWSER_LOG=str(browser_log or gw.tmp / "browser.log"))
    return subprocess.run([str(gw.binary), "--home", str(gw.home), *args], env=env,
                          capture_output=True, text=True, timeout=60)


def entries(log):
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def issued(log):
    return [t for e in entries(log) if "issued" in e for t in e["issued"].values()]


def error_of(p):
    return json.loads(p.stdout)["data"]


def test_sign_in_call_refresh_and_no_token_outside_the_store(gw, remote):
    url, log = remote("good")
    # Before sign-in: AUTH_REQUIRED naming the command, and nothing was asked of the
    # authorization server.
    p = run(gw, "call", APP, "whoami", "{}")
    assert p.returncode == 1
    assert error_of(p)["type"] == "AUTH_REQUIRED"
    assert error_of(p)["command"] == f"aai-gateway auth login {APP}"
    assert not any("grant" in e or "authorize" in e for e in entries(log))
    # Without a terminal and without --yes, sign-in is refused before the authorization
    # server hears of it; the origins are shown.
    p = run(gw, "auth", "login", APP)
    assert p.returncode != 0 and "--yes" in p.stderr
    assert "http://127.0.0.1" in p.stderr
    assert not any("authorize" in e for e in entries(log))
    p = run(gw, "auth", "login", APP, "--yes")
    assert p.returncode == 0, p.stderr
    [auth] = [e["authorize"] for e in entries(log) if "authorize" in e]
    assert auth["resource"] == url and auth["code_challenge_method"] == "S256" and auth["scope"] == "mcp"
    assert "signed in" in run(gw, "auth", "status", APP).stdout
    # The token lives 1 s: each call after that refreshes it first (rotation: the old
    # refresh token is refused from then on, so a second refresh proves the new one was
    # stored).
    for _ in range(2):
        time.sleep(1.2)
        p = run(gw, "call", APP, "whoami", "{}")
        assert p.returncode == 0, p.stdout + p.stderr
        assert "you are signed in" in p.stdout
    grants = [e["grant"] for e in entries(log) if "grant" in e]
    assert grants[0] == "authorization_code" and grants.count("refresh_token") >= 2
    assert all(e["resource"] == url for e in entries(log) if "grant" in e)
    # No token anywhere but the credential store.
    tokens = issued(log)
    store = gw.home / "credentials.json"
    assert store.exists() and any(t in store.read_text() for t in tokens)
    for f in gw.tmp.rglob("*"):
        if f.is_file() and f != store and "server-" not in f.name:
            data = f.read_bytes()
            leaked = [t for t in tokens if t.encode() in data]
            assert not leaked, f"{f} holds a token"
    assert not any(t in p.stderr for t in tokens)


def test_a_refused_refresh_asks_for_sign_in(gw, remote):
    remote("refuse")
    assert run(gw, "auth", "login", APP, "--yes").returncode == 0
    time.sleep(1.2)
    p = run(gw, "call", APP, "whoami", "{}")
    assert p.returncode == 1
    data = error_of(p)
    assert data["type"] == "AUTH_REQUIRED", data
    assert data["command"] == f"aai-gateway auth login {APP}"


@pytest.mark.parametrize("mode, said", [
    ("other-origin", "on another origin (http://127.0.0.2"),
    ("huge", "larger than"),
    ("echo", "the token endpoint refused"),
    ("redirect", "another redirect URI"),
    ("echo200", "the token endpoint refused (HTTP 200"),
])
def test_hostile_authorization_servers_are_refused_clearly(gw, remote, mode, said):
    url, log = remote(mode)
    p = run(gw, "auth", "login", APP, "--yes")
    assert p.returncode == 1
    assert said in p.stderr, p.stderr
    if mode in ("other-origin", "redirect"):
        # Refused before the browser step: the user never saw a sign-in page.
        assert not any("authorize" in e for e in entries(log))
    if mode in ("echo", "echo200"):
        # The token endpoint echoed the code and the verifier: neither reaches the output.
        assert "bad request" in p.stderr
        said = p.stderr.split("bad request", 1)[1]
        assert "code=***" in said and "code_verifier=***" in said, p.stderr
    assert not (gw.home / "credentials.json").exists() or APP not in (gw.home / "credentials.json").read_text()


@pytest.mark.anyio
async def test_the_web_ui_shows_both_origins_then_signs_in(gw, remote):
    import re
    from test_http_transport import web
    from test_ui import call_over_http, csrf_of, get, post, ui_of
    url, log = remote("good")
    origin = url.removesuffix("/mcp")
    with web(gw) as (mcp, _):
        ui = ui_of(mcp)
        # A call before sign-in: AUTH_REQUIRED names the command and the UI page.
        e = await call_over_http(mcp, "whoami", app=APP, args={})
        assert e.error.data["type"] == "AUTH_REQUIRED"
        assert e.error.data["command"] == f"aai-gateway auth login {APP}"
        assert e.error.data["ui"] == ui + "/credentials"
        page = get(ui + "/credentials").text
        assert APP in page and "oauth2 (MCP)" in page
        token = csrf_of(page)
        r = post(ui + "/credentials/login", {"csrf": token, "app": APP})
        # The page names both origins; the authorization server has heard nothing.
        assert r.status_code == 200 and f"<code>{origin}</code>" in r.text
        assert not any("authorize" in e or "grant" in e for e in entries(log))
        issuer = re.search(r'name="issuer" value="([^"]+)"', r.text).group(1)
        # An issuer the user was not shown is refused.
        r = post(ui + "/credentials/mcp-login", {"csrf": token, "app": APP, "issuer": "https://evil.example"})
        assert r.status_code == 303 and "/ui/credentials" in r.headers["location"]
        assert not any("authorize" in e for e in entries(log))
        r = post(ui + "/credentials/mcp-login", {"csrf": token, "app": APP, "issuer": issuer})
        assert r.status_code == 303 and r.headers["location"].startswith(origin + "/authorize?")
        subprocess.run([sys.executable, str(BROWSER), r.headers["location"]], timeout=30, check=True,
                       env={**gw.env(), "BROWSER_LOG": str(gw.tmp / "browser.log")})
        for _ in range(100):
            if "Sign-in: signed in" in get(ui + "/credentials").text:
                break
            time.sleep(0.1)
        assert "signed in at" in get(ui + "/credentials").text
        result = await call_over_http(mcp, "whoami", app=APP, args={})
        assert result.content[0].text == "you are signed in"


SDK_EXAMPLES = HERE / "peers" / "node_modules" / "@modelcontextprotocol" / "sdk" / "dist" / "esm" / "examples" / "server"


@pytest.mark.parametrize("strict", [False, True])
def test_the_typescript_sdk_oauth_example_signs_in(gw, strict):
    """The MCP TypeScript SDK's OAuth-protected streamable HTTP example (its in-memory
    authorization server on another port; `--oauth-strict` accepts only tokens issued for
    this server's resource)."""
    from conftest import need_peer
    from test_http import free_port
    example = SDK_EXAMPLES / "simpleStreamableHttp.js"
    need_peer(example.exists(), "npm @modelcontextprotocol/sdk (npm ci --prefix tests/mcp/peers)")
    port, auth_port = free_port(), free_port()
    proc = subprocess.Popen(["node", str(example), "--oauth", *(["--oauth-strict"] if strict else [])],
                            cwd=HERE / "peers", env={**gw.env(), "MCP_PORT": str(port), "MCP_AUTH_PORT": str(auth_port)},
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    try:
        while "MCP Streamable HTTP Server listening" not in proc.stdout.readline():
            assert proc.poll() is None, "the example did not start"
        gw.config(credentials={"store": "file"})
        gw.put("sdk", {
            "schemaVersion": "1.0", "version": "1.0.0", "platform": "linux",
            "app": {"id": "dev.sdk.oauth", "name": {"en": "SDK"}, "defaultLang": "en", "description": "x"},
            "execution": {"type": "mcp", "url": f"http://localhost:{port}/mcp"}})
        p = run(gw, "call", "dev.sdk.oauth", "greet", '{"name": "x"}')
        assert json.loads(p.stdout)["data"]["type"] == "AUTH_REQUIRED"
        p = run(gw, "auth", "login", "dev.sdk.oauth", "--yes")
        assert p.returncode == 0, p.stderr
        assert f"sends you to http://localhost:{auth_port}" in p.stderr
        p = run(gw, "call", "dev.sdk.oauth", "greet", '{"name": "x"}')
        assert p.returncode == 0, p.stdout + p.stderr
        assert "Hello, x!" in p.stdout
    finally:
        proc.kill()
        proc.wait()


def test_the_typescript_sdk_sse_example_works_through_its_app(gw):
    """The MCP TypeScript SDK's HTTP+SSE example (2024-11-05), found by detection: the
    `url` is its event stream and no `transport` is given."""
    from conftest import need_peer
    from test_http import free_port
    example = SDK_EXAMPLES / "simpleSseServer.js"
    need_peer(example.exists(), "npm @modelcontextprotocol/sdk (npm ci --prefix tests/mcp/peers)")
    port = free_port()
    # The example listens on 3000, fixed: a copy beside it (its imports resolve the same)
    # listens on a free port instead.
    copy = example.with_name(f".aai-simpleSseServer-{port}.js")
    copy.write_text(example.read_text().replace("const PORT = 3000;", f"const PORT = {port};"))
    proc = subprocess.Popen(["node", str(copy)], env=gw.env(), stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        while "listening on port" not in proc.stdout.readline():
            assert proc.poll() is None, "the example did not start"
        gw.put("sse", {
            "schemaVersion": "1.0", "version": "1.0.0", "platform": "linux",
            "app": {"id": "dev.sdk.sse", "name": {"en": "SSE"}, "defaultLang": "en", "description": "x"},
            "execution": {"type": "mcp", "url": f"http://127.0.0.1:{port}/mcp"}})
        p = run(gw, "call", "dev.sdk.sse", "start-notification-stream", '{"interval": 10, "count": 2}')
        assert p.returncode == 0, p.stdout + p.stderr
        assert "Completed sending 2 notifications every 10ms" in p.stdout, p.stdout
    finally:
        proc.kill()
        proc.wait()
        copy.unlink(missing_ok=True)


def test_a_401_without_a_challenge_is_still_auth_required(gw, remote):
    """A server whose 401 carries no WWW-Authenticate: the call says AUTH_REQUIRED (not
    SERVICE_UNAVAILABLE), and sign-in finds its metadata at the well-known URL."""
    remote("nowa")
    p = run(gw, "call", APP, "whoami", "{}")
    assert error_of(p)["type"] == "AUTH_REQUIRED", p.stdout
    assert run(gw, "auth", "login", APP, "--yes").returncode == 0
    p = run(gw, "call", APP, "whoami", "{}")
    assert p.returncode == 0 and "you are signed in" in p.stdout, p.stdout + p.stderr


def test_a_scope_refused_while_listing_is_asked_for_at_the_next_sign_in(gw, remote):
    url, log = remote("scope403")
    assert run(gw, "auth", "login", APP, "--yes").returncode == 0
    p = run(gw, "call", APP, "whoami", "{}")
    assert error_of(p)["type"] == "AUTH_REQUIRED" and "more scope" in p.stdout, p.stdout
    run(gw, "auth", "login", APP, "--yes")
    scopes = [e["authorize"].get("scope") for e in entries(log) if "authorize" in e]
    assert scopes[0] == "mcp" and "admin" in scopes[-1].split(), scopes


def test_an_idle_connection_to_the_callback_does_not_hold_up_the_sign_in(gw, remote, tmp_path):
    """A browser's preconnect (a connection that sends nothing) is dropped after a few
    seconds; the redirect behind it is read and the sign-in completes."""
    import socket
    remote("good")
    opener = tmp_path / "preconnect.py"
    opener.write_text(
        "import socket, subprocess, sys, urllib.parse\n"
        "url = sys.argv[1]\n"
        "port = urllib.parse.urlparse(url).port  # the callback's /start address\n"
        "idle = socket.create_connection(('127.0.0.1', port))\n"
        f"subprocess.run([sys.executable, {str(BROWSER)!r}, url])\n"
        "idle.close()\n")
    env = gw.env(BROWSER=f"{sys.executable} {opener}", BROWSER_LOG=str(tmp_path / "b.log"))
    p = subprocess.run([str(gw.binary), "--home", str(gw.home), "auth", "login", APP, "--yes"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr


def test_import_mcp_of_a_url_then_one_sign_in_then_calls(gw, remote, tmp_path):
    """The issue's promise: `import mcp` of a client configuration naming the server's URL
    (one command), one sign-in in the browser, then calls."""
    url, _ = remote("good")
    (gw.home / "remote").joinpath("aai.json").unlink()  # only the imported descriptor
    config = tmp_path / "mcp.json"
    config.write_text(json.dumps({"mcpServers": {"protected": {"type": "http", "url": url}}}))
    p = run(gw, "import", "mcp", str(config), "--yes")
    assert p.returncode == 0, p.stdout + p.stderr
    listed = json.loads(run(gw, "--scan", "--json").stdout)
    ids = [a["id"] for a in listed["apps"] if "protected" in a["id"]]
    assert len(ids) == 1, listed
    app = ids[0]
    p = run(gw, "call", app, "whoami", "{}")
    assert error_of(p)["command"] == f"aai-gateway auth login {app}"
    assert run(gw, "auth", "login", app, "--yes").returncode == 0
    p = run(gw, "call", app, "whoami", "{}")
    assert p.returncode == 0 and "you are signed in" in p.stdout, p.stdout + p.stderr
