"""One gateway for a team: `--web` as an OAuth 2.1 resource server of the team's
authorization server (oidc-provider, `oidc/team.mjs`).

* Protected Resource Metadata and the 401 challenge; the Python MCP SDK's OAuth client
  finds the authorization server from them, registers itself, signs in and calls.
* Two people (alice, an admin, and bob) with JWT access tokens: each one's consent,
  grants and history are their own; the admin sees everyone's history; a session is its
  opener's; scopes limit which apps a person sees.
* The web UI signs people in through the same authorization server (code + PKCE).
* Hostile tokens: expired, wrong audience, wrong issuer, `alg: none`, HS256 signed with
  the public key, tampered, unknown key, no subject; a key endpoint that hangs or floods.
* Opaque tokens through introspection.

Run: python3 -m pytest tests/mcp -q -k team
"""
import http.cookiejar
import json
import re
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from team import TeamIdp, team_config, team_web
from test_http import free_port

MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio

HEADERS = {"content-type": "application/json", "accept": "application/json, text/event-stream"}


def init(name="raw"):
    return {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": name, "version": "1"}}}


def post(url, body, token=None, headers=None):
    import httpx2
    h = {**HEADERS, **({"authorization": f"Bearer {token}"} if token else {}), **(headers or {})}
    return httpx2.post(url, content=json.dumps(body), headers=h, timeout=20)


@pytest.fixture
def team(gw, tmp_path):
    """A `--web` gateway on a free port taking the team's tokens, two apps (notes, which
    asks for consent, and echo), and the team's authorization server."""
    port = free_port()
    audience = f"http://127.0.0.1:{port}/mcp"
    idp = TeamIdp(tmp_path, audience)
    gw.add_app("com.example.notes")
    gw.add_app("com.example.echo")
    team_config(gw, idp, audience, scopeAccess={"apps:notes": {"apps": {"allow": ["com.example.notes"]}},
                                                 "apps:all": {}})
    cfg = json.loads((gw.home / "config.json").read_text())
    cfg["consent"] = {"mode": "prompt", "waitSeconds": 0}
    cfg["apps"] = {"com.example.echo": {"consent": "allow"}}
    (gw.home / "config.json").write_text(json.dumps(cfg))
    with team_web(gw, port) as proc:
        yield idp, audience, proc
    idp.stop()


@pytest.fixture
def anyio_backend():
    return "asyncio"


def session_for(url, token, name):
    """An SDK client session sending `token`."""
    import contextlib
    import httpx2
    from mcp import ClientSession, types
    from mcp.client.streamable_http import streamable_http_client

    @contextlib.asynccontextmanager
    async def opened():
        async with httpx2.AsyncClient(headers={"authorization": f"Bearer {token}"}, timeout=30) as client:
            async with streamable_http_client(url, http_client=client) as (read, write):
                async with ClientSession(read, write,
                                         client_info=types.Implementation(name=name, version="1")) as s:
                    await s.initialize()
                    yield s
    return opened()


def test_metadata_and_the_challenge_name_the_authorization_server(team):
    idp, audience, _ = team
    r = post(audience, init())
    assert r.status_code == 401
    challenge = r.headers["www-authenticate"]
    origin = audience.rsplit("/", 1)[0]
    assert f'resource_metadata="{origin}/.well-known/oauth-protected-resource/mcp"' in challenge
    assert 'scope="mcp"' in challenge and "error=" not in challenge
    import httpx2
    for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
        doc = httpx2.get(origin + path, timeout=10).json()
        assert doc["resource"] == audience
        assert doc["authorization_servers"] == [idp.base]
        assert {"mcp", "apps:notes", "apps:all", "aai:admin"} <= set(doc["scopes_supported"])
    # Nothing else is served without a token.
    assert httpx2.get(origin + "/ui/history", timeout=10, follow_redirects=False).status_code in (303, 307)
    assert httpx2.get(origin + "/metrics", timeout=10).status_code == 401
    # The metrics name every app: for the admin scope only.
    bearer = lambda t: {"authorization": f"Bearer {t}"}  # noqa: E731
    assert httpx2.get(origin + "/metrics", headers=bearer(idp.token("bob", "mcp apps:all")),
                      timeout=10).status_code == 403
    r = httpx2.get(origin + "/metrics", headers=bearer(idp.token("alice")), timeout=10)
    assert r.status_code == 200 and "aai_calls_in_flight" in r.text


async def test_the_sdk_oauth_client_signs_in_by_itself_and_calls(team):
    """The Python SDK's OAuth client: 401 → resource metadata → authorization server
    metadata → dynamic registration → code + PKCE (as bob, in a headless browser) → call."""
    import httpx2
    from mcp import ClientSession
    from mcp.client.auth import OAuthClientProvider
    from mcp.client.streamable_http import streamable_http_client
    from mcp.shared.auth import AuthorizationCodeResult, OAuthClientMetadata
    from team import browse
    idp, audience, _ = team
    redirect = "http://127.0.0.1:1/sdk-callback"
    landed = {}

    class Memory:
        def __init__(self):
            self.tokens = self.client = None

        async def get_tokens(self):
            return self.tokens

        async def set_tokens(self, tokens):
            self.tokens = tokens

        async def get_client_info(self):
            return self.client

        async def set_client_info(self, info):
            self.client = info

    async def open_browser(url):
        url += "&login_hint=bob"
        landed["url"] = await __import__("anyio").to_thread.run_sync(browse, url, redirect)

    async def come_back():
        q = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(landed["url"]).query))
        return AuthorizationCodeResult(code=q["code"], state=q.get("state"), iss=q.get("iss"))

    storage = Memory()
    oauth = OAuthClientProvider(
        audience,
        OAuthClientMetadata(client_name="sdk-team-test", redirect_uris=[redirect],
                            grant_types=["authorization_code"], response_types=["code"],
                            token_endpoint_auth_method="none", scope="mcp apps:notes"),
        storage, redirect_handler=open_browser, callback_handler=come_back)
    async with httpx2.AsyncClient(auth=oauth, timeout=30) as client:
        async with streamable_http_client(audience, http_client=client) as (read, write):
            async with ClientSession(read, write) as s:
                await s.initialize()
                # bob holds `apps:notes`: he sees notes, not echo.
                names = [t.name for t in (await s.list_tools()).tools]
                assert "aai_exec" in names
                # The client asked for what the challenge named (`mcp`, needed by every
                # call); apps are opened by their own scopes (`apps:notes`, `apps:all`),
                # so this token reaches none.
                with pytest.raises(MCPError) as e:
                    await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "echo",
                                                   "args": {"text": "hi"}})
                assert e.value.error.code == -32002, e.value.error  # APP_NOT_FOUND, as if it did not exist
    assert storage.tokens is not None and storage.client.client_id
    import jwt
    claims = jwt.decode(storage.tokens.access_token, options={"verify_signature": False})
    assert claims["sub"] == "bob" and claims["aud"] == audience and claims["scope"] == "mcp"


async def test_two_people_have_their_own_consent_history_and_sessions(team, gw):
    idp, audience, _ = team
    alice, bob = idp.token("alice"), idp.token("bob", "mcp apps:all")
    call = {"app": "com.example.notes", "tool": "echo", "args": {"text": "mine"}}
    # bob's call of an app that asks: refused until approved, pending for bob alone.
    async with session_for(audience, bob, "claude-code") as s:
        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", call)
        assert e.value.error.code == -32014, e.value.error  # CONSENT_REQUIRED
    # alice grants herself; bob's grant is not hers and hers is not bob's.
    done = gw.run("consent", "grant", "com.example.notes", "--start", "--caller", "claude-code@http~alice")
    assert done.returncode == 0, done.stderr
    async with session_for(audience, alice, "claude-code") as s:
        r = await s.call_tool("aai_exec", call)
        assert r.structured_content["echo"]["text"] == "mine"
        r = await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "echo", "args": {"text": "a"}})
    async with session_for(audience, bob, "claude-code") as s:
        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", call)
        assert e.value.error.code == -32014
        await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "echo", "args": {"text": "b"}})
    # Scopes open apps: with `apps:notes` only, echo is as unknown as a missing app.
    async with session_for(audience, idp.token("bob", "mcp apps:notes"), "claude-code") as s:
        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "echo", "args": {"text": "b"}})
        assert e.value.error.code == -32002
        r = await s.call_tool("aai_search", {"query": "echo"})
        assert "com.example.echo" not in json.dumps(r.structured_content)
    # What changes the gateway for everyone is for the admin scope: a member does not
    # even see the gateway's own app, and may not add web apps.
    async with session_for(audience, bob, "claude-code") as s:
        names = [t.name for t in (await s.list_tools()).tools]
        assert "app_aai" not in names
        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", {"app": "aai", "tool": "import", "args": {
                "source": {"mcpServers": {"pwn": {"command": "sh", "args": ["-c", "touch PWNED"]}}},
                "confirm": True}})
        assert e.value.error.code == -32002, e.value.error
        with pytest.raises(MCPError) as e:
            await s.call_tool("web_discover", {"url": "http://127.0.0.1:1/"})
        assert e.value.error.code == -32004 and "admin" in e.value.error.message
    async with session_for(audience, alice, "claude-code") as s:
        r = await s.call_tool("aai_exec", {"app": "aai", "tool": "import", "args": {
            "source": {"mcpServers": {"tool": {"command": "true"}}}}})
        assert "mcp.tool" in json.dumps(r.structured_content or r.content[0].text)
    # History knows who called (a background writer records the calls: wait for them).
    deadline = time.monotonic() + 15
    while len(alices := json.loads(gw.run("history", "--json", "--person", "alice").stdout)["calls"]) < 3:
        assert time.monotonic() < deadline, alices
        time.sleep(0.1)
    rows = json.loads(gw.run("history", "--json", "--person", "bob").stdout)["calls"]
    assert rows and all(r["person"] == "bob" and r["caller"] == "claude-code@http~bob" for r in rows)
    assert {r["status"] for r in alices} == {"ok"} and len(alices) == 3
    # A session is its opener's: bob's session id with alice's token finds nothing.
    r = post(audience, init(), bob)
    sid = r.headers["mcp-session-id"]
    listed = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {}}
    assert post(audience, listed, alice, {"mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}).status_code == 404


def ui_browser(idp, who):
    """A cookie-keeping browser signed in to the gateway's UI as `who`."""
    (idp.key_file.parent / "who").write_text(who)
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    return opener


def test_the_ui_signs_people_in_and_shows_each_their_own(team, gw):
    idp, audience, _ = team
    origin = audience.rsplit("/", 1)[0]
    alice, bob = idp.token("alice"), idp.token("bob", "mcp apps:all")
    for token, text in ((alice, "from-alice"), (bob, "from-bob")):
        r = post(audience, init("cli"), token)
        sid = r.headers["mcp-session-id"]
        h = {"mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}
        post(audience, {"jsonrpc": "2.0", "method": "notifications/initialized"}, token, h)
        r = post(audience, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "aai_exec", "arguments": {"app": "com.example.echo", "tool": "echo", "args": {"text": text}}}},
            token, h)
        assert r.status_code == 200
    # Each has a grant of their own.
    for who in ("alice", "bob"):
        done = gw.run("consent", "grant", "com.example.notes", "--start", "--caller", f"grant-of-{who}@http~{who}")
        assert done.returncode == 0, done.stderr
    # A background writer records the calls: wait for both.
    deadline = time.monotonic() + 15
    while not all(t in (out := gw.run("history", "--json").stdout) for t in ("from-alice", "from-bob")):
        assert time.monotonic() < deadline, out
        time.sleep(0.1)
    pages, grants = {}, {}
    for who in ("bob", "alice"):
        opener = ui_browser(idp, who)
        page = opener.open(origin + "/ui/history", timeout=20)
        assert page.url.startswith(origin + "/ui/history"), page.url
        pages[who] = page.read().decode()
        grants[who] = opener.open(origin + "/ui/consent", timeout=20).read().decode()
    assert "from-bob" in pages["bob"] and "from-alice" not in pages["bob"]
    # alice holds the admin scope: everyone's history.
    assert "from-bob" in pages["alice"] and "from-alice" in pages["alice"]
    # Each person's forms carry a token of their own.
    bob_csrf, alice_csrf = (re.search(r'name="csrf" value="([^"]+)"', grants[w]).group(1) for w in ("bob", "alice"))
    assert bob_csrf != alice_csrf
    alice_browser = ui_browser(idp, "alice")
    page = alice_browser.open(origin + "/ui/consent", timeout=20).read().decode()
    own = re.search(r'name="csrf" value="([^"]+)"', page).group(1)
    for token, status in ((bob_csrf, 403), (own, 200)):
        form = urllib.parse.urlencode({"csrf": token, "caller": "x@http~alice", "app": "com.example.notes"}).encode()
        req = urllib.request.Request(origin + "/ui/consent/grant", data=form, headers={"origin": origin})
        try:
            got = alice_browser.open(req, timeout=20).status
        except urllib.error.HTTPError as e:
            got = e.code
        assert got == status, (token == bob_csrf, got)  # 200: after the redirect
    # Grants are each person's own, the admin's too.
    assert "grant-of-bob@http~bob" in grants["bob"] and "grant-of-alice" not in grants["bob"]
    assert "grant-of-alice@http~alice" in grants["alice"] and "grant-of-bob" not in grants["alice"]
    # Pages that change the gateway for everyone are for admins.
    opener = ui_browser(idp, "bob")
    opener.open(origin + "/ui", timeout=20).read()
    with pytest.raises(urllib.error.HTTPError) as e:
        opener.open(origin + "/ui/credentials", timeout=20)
    assert e.value.code == 403
    # The app pages show what the person's scopes open, no more.
    narrow = idp.token("bob", "mcp apps:notes")
    def ui_get(path):
        req = urllib.request.Request(origin + path, headers={"cookie": f"aai_person={narrow}"})
        try:
            r = urllib.request.urlopen(req, timeout=20)
            return r.status, r.read().decode()
        except urllib.error.HTTPError as e:
            return e.code, e.read().decode()
    status, listed = ui_get("/ui/apps")
    assert status == 200 and "com.example.notes" in listed and "com.example.echo" not in listed
    assert ui_get("/ui/apps/com.example.echo")[0] == 404
    assert ui_get("/ui/apps/aai")[0] == 404
    assert ui_get("/ui/apps/com.example.notes")[0] == 200
    # A callback without the browser's own sign-in is refused.
    with pytest.raises(urllib.error.HTTPError) as e:
        urllib.request.urlopen(origin + "/ui/callback?code=x&state=y", timeout=20)
    assert e.value.code == 400


def test_hostile_tokens_are_refused(team):
    idp, audience, proc = team
    from cryptography.hazmat.primitives.asymmetric import rsa
    import jwt
    now = int(time.time())
    other_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public_pem = jwt.algorithms.RSAAlgorithm.from_jwk(json.dumps(idp.key())).public_key().public_bytes(
        __import__("cryptography").hazmat.primitives.serialization.Encoding.PEM,
        __import__("cryptography").hazmat.primitives.serialization.PublicFormat.SubjectPublicKeyInfo)
    good = idp.forge({})
    assert post(audience, init(), good).status_code == 200
    header, payload, signature = good.split(".")
    import base64
    claims = json.loads(base64.urlsafe_b64decode(payload + "=="))
    claims["sub"] = "alice"
    tampered = header + "." + base64.urlsafe_b64encode(json.dumps(claims).encode()).rstrip(b"=").decode() + "." + signature
    cases = {
        "expired": idp.forge({"exp": now - 120}),
        "wrong audience": idp.forge({"aud": "https://elsewhere.example/mcp"}),
        "wrong issuer": idp.forge({"iss": "http://127.0.0.1:1"}),
        "no subject": idp.forge({"sub": None}),
        "no expiry": idp.forge({"exp": None}),
        "not yet valid": idp.forge({"nbf": now + 3600}),
        "alg none": jwt.encode({"iss": idp.base, "aud": audience, "sub": "x", "exp": now + 60}, None,
                               algorithm="none"),
        "HS256 with the public key": hs256_with(public_pem, payload),
        "tampered": tampered,
        "another key": idp.forge({}, key=other_key),
        "unknown key id": idp.forge({}, key=other_key, headers={"kid": "rotated-9"}),
        "garbage": "not-a-token",
        "an id token type": idp.forge({}, headers={"typ": "id_token+jwt"}),
    }
    for name, token in cases.items():
        r = post(audience, init(), token)
        assert r.status_code == 401, (name, r.status_code, r.text)
        assert 'error="invalid_token"' in r.headers["www-authenticate"], name
        assert token not in r.text and token not in r.headers["www-authenticate"], name
    # The required scope.
    r = post(audience, init(), idp.forge({"scope": "apps:all"}))
    assert r.status_code == 403 and 'error="insufficient_scope"' in r.headers["www-authenticate"]
    # The gateway still serves the good token, and logged none of the tokens.
    assert post(audience, init(), good).status_code == 200
    proc.terminate()
    log = proc.stderr.read()
    for token in [good, *cases.values()]:
        assert token not in log


def hs256_with(secret, payload):
    """A token whose HS256 signature uses `secret` (the issuer's public key: the old key
    confusion attack)."""
    import base64
    import hashlib
    import hmac
    head = base64.urlsafe_b64encode(b'{"alg":"HS256","kid":"team-1","typ":"at+jwt"}').rstrip(b"=").decode()
    mac = hmac.new(secret, f"{head}.{payload}".encode(), hashlib.sha256).digest()
    return f"{head}.{payload}." + base64.urlsafe_b64encode(mac).rstrip(b"=").decode()


class HostileIssuer:
    """An authorization server whose key set hangs or floods."""

    def __init__(self, mode):
        outer = self
        self.mode = mode
        self.key_requests = 0

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                if self.path.startswith("/.well-known/"):
                    body = json.dumps({"issuer": outer.base, "authorization_endpoint": outer.base + "/auth",
                                       "token_endpoint": outer.base + "/token", "jwks_uri": outer.base + "/jwks",
                                       "code_challenge_methods_supported": ["S256"]}).encode()
                    self.send_response(200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                    return
                outer.key_requests += 1
                if outer.mode == "hang":
                    time.sleep(30)
                    return
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.end_headers()
                try:
                    self.wfile.write(b'{"keys":[' + b'{"kty":"RSA","n":"AQAB","e":"AQAB"},' * 200_000)
                except OSError:
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()


@pytest.mark.parametrize("mode", ["hang", "flood"])
def test_a_key_endpoint_that_hangs_or_floods_costs_a_bounded_wait(gw, tmp_path, mode):
    import jwt
    from cryptography.hazmat.primitives.asymmetric import rsa
    issuer = HostileIssuer(mode)
    port = free_port()
    audience = f"http://127.0.0.1:{port}/mcp"
    gw.config(web={"auth": {"issuer": issuer.base, "audience": audience}})
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    token = jwt.encode({"iss": issuer.base, "aud": audience, "sub": "x", "exp": int(time.time()) + 60}, key,
                       algorithm="RS256", headers={"kid": "k"})
    try:
        with team_web(gw, port):
            started = time.monotonic()
            r = post(audience, init(), token)
            assert r.status_code == 503, r.text
            assert time.monotonic() - started < 12
            # Within the retry pause the next request does not ask again.
            started = time.monotonic()
            assert post(audience, init(), token).status_code == 503
            assert time.monotonic() - started < 2
            assert issuer.key_requests == 1
    finally:
        issuer.stop()


def test_opaque_tokens_are_introspected(gw, tmp_path):
    port = free_port()
    audience = f"http://127.0.0.1:{port}/mcp"
    idp = TeamIdp(tmp_path, audience, token_format="opaque")
    try:
        gw.add_app("com.example.echo")
        team_config(gw, idp, audience)
        token = idp.token("bob", "mcp")
        assert token.count(".") != 2
        with team_web(gw, port):
            r = post(audience, init(), token)
            assert r.status_code == 200, r.text
            assert post(audience, init(), token + "x").status_code == 401
        # Without the client secret the gateway cannot introspect: opaque tokens fail.
        with team_web(gw, port, env={"AAI_WEB_AUTH_CLIENT_SECRET": ""}):
            assert post(audience, init(), token).status_code == 401
    finally:
        idp.stop()
