"""OAuth 2 against a strict, certified provider (oidc-provider 9: PKCE S256 required,
single-use codes, rotating refresh tokens, no clock tolerance, 3-second access tokens):
`aai-gateway auth login` completed headless through $BROWSER, calls with the token,
refresh before expiry (twice, proving the rotated refresh token was stored), refresh once
after a 401, sign-in again when everything is revoked — tokens kept in gnome-keyring and
never written anywhere else.

Run: python3 -m pytest tests/mcp -q -k oauth
"""
import json
import os
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from conftest import need_peer
from test_auth import start_keyring
from test_http import call, free_port

MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio
OIDC = Path(__file__).with_name("oidc")
BROWSER = Path(__file__).with_name("browser.py")


class Provider:
    def __init__(self, ttl=3):
        need_peer(shutil.which("node") is not None and (OIDC / "node_modules" / "oidc-provider").is_dir(),
                  "npm package oidc-provider (npm install --prefix tests/mcp/oidc)")
        self.port = free_port()
        self.ttl = ttl
        self.start()

    def start(self):
        self.proc = subprocess.Popen(["node", str(OIDC / "provider.mjs")], cwd=OIDC, text=True,
                                     env={**os.environ, "PORT": str(self.port), "ACCESS_TTL": str(self.ttl)},
                                     stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert self.proc.stdout.readline().strip() == "ready"
        self.base = f"http://127.0.0.1:{self.port}"

    def restart(self):
        """Forget every code, token and session (the provider keeps them in memory)."""
        self.stop()
        self.start()

    def stop(self):
        self.proc.kill()
        self.proc.wait()

    def post(self, path, form):
        req = urllib.request.Request(self.base + path, data=urllib.parse.urlencode(form).encode())
        try:
            return urllib.request.urlopen(req, timeout=10).status, None
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read() or b"{}")


@pytest.fixture
def oidc():
    # Long enough that logging in, `auth status` and a debug gateway's first call all
    # fit in the first half of the token's life on a loaded machine.
    p = Provider(ttl=12)
    yield p
    p.stop()


class Api:
    """The web app's API: `/me` answers with the provider's userinfo for the bearer token,
    but rejects the next request with a 401 when told to (a token revoked behind the
    gateway's back, while its refresh token stays good)."""

    def __init__(self, provider):
        import threading
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
        self.reject_next = False
        self.seen = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                auth = self.headers.get("authorization", "")
                outer.seen.append(auth)
                if outer.reject_next:
                    outer.reject_next = False
                    status, body = 401, b'{"error":"invalid_token"}'
                else:
                    req = urllib.request.Request(provider.base + "/me", headers={"Authorization": auth})
                    try:
                        r = urllib.request.urlopen(req, timeout=10)
                        status, body = r.status, r.read()
                    except urllib.error.HTTPError as e:
                        status, body = e.code, e.read()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def oauth_app(gw, provider, client_id="aai-test", api=None):
    gw.put("com.example.oidc", {
        "schemaVersion": "1.0", "version": "1.0.0", "platform": "web",
        "app": {"id": "com.example.oidc", "name": {"en": "OIDC"}, "defaultLang": "en", "description": "OAuth app"},
        "execution": {"type": "http", "baseUrl": (api or provider).base},
        "auth": {"type": "oauth2", "oauth2": {
            "authorizationEndpoint": f"{provider.base}/auth", "tokenEndpoint": f"{provider.base}/token",
            "scopes": ["openid", "offline_access"], "pkce": {"method": "S256"},
            **({"clientId": client_id} if client_id else {})}},
        "tools": [{"name": "me", "description": "Who am I", "execution": {"path": "/me", "method": "GET"},
                   "parameters": {"type": "object"}}]})


def login(gw):
    log = gw.tmp / "browser.log"
    p = subprocess.run([str(gw.binary), "--home", str(gw.home), "auth", "login", "com.example.oidc"],
                       env=gw.env(BROWSER=f"{sys.executable} {BROWSER}", BROWSER_LOG=str(log)),
                       capture_output=True, text=True, timeout=60)
    return p, log


def stored(gw):
    out = subprocess.run(["secret-tool", "lookup", "service", "aai-gateway", "username", "com.example.oidc"],
                         env=gw.env(), capture_output=True, text=True, timeout=10).stdout
    return json.loads(out)


@pytest.fixture
def ogw(gw, bus, tmp_path):
    gw.extra_env = bus.env()
    start_keyring(bus, tmp_path)
    return gw


async def test_sign_in_call_refresh_rotate_and_recover(ogw, oidc):
    api = Api(oidc)
    oauth_app(ogw, oidc, api=api)
    async with ogw.session() as s:
        with pytest.raises(MCPError) as e:
            await call(s, "com.example.oidc", "me")
        assert e.value.error.code == -32011
        assert e.value.error.data["command"] == "aai-gateway auth login com.example.oidc"

    p, log = login(ogw)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "signed in to com.example.oidc"
    callback = urllib.parse.urlparse(log.read_text().splitlines()[-1])
    assert callback.hostname == "127.0.0.1" and callback.path == "/callback" and callback.port != 80
    sent = urllib.parse.parse_qs(urllib.parse.urlparse(p.stderr.split("sign in at ")[1].split()[0]).query)
    assert sent["code_challenge_method"] == ["S256"] and len(sent["state"][0]) >= 43
    assert sent["client_id"] == ["aai-test"] and sent["scope"] == ["openid offline_access"]
    # The code is single-use: replaying it fails at the (strict) provider.
    code = urllib.parse.parse_qs(callback.query)["code"][0]
    status, body = oidc.post("/token", {"grant_type": "authorization_code", "code": code, "client_id": "aai-test",
                                        "redirect_uri": f"http://127.0.0.1:{callback.port}/callback",
                                        "code_verifier": "x" * 43})
    assert status == 400 and body["error"] == "invalid_grant"

    first = stored(ogw)
    assert ogw.run("auth", "status", "com.example.oidc").stdout.split()[-1] == "yes"
    async with ogw.session() as s:
        assert await call(s, "com.example.oidc", "me") == {"sub": "alice"}
        now = stored(ogw)
        assert now.pop("boundTo").startswith("http://127.0.0.1:"), "bound to the API it was sent to"
        assert now == first, "a fresh token is used as it is"
        time.sleep(7)  # past the refresh time (half of 12 s), before expiry: refreshed first
        assert await call(s, "com.example.oidc", "me") == {"sub": "alice"}
        second = stored(ogw)
        assert second.get("boundTo", "").startswith("http://127.0.0.1:"), "a refresh keeps the binding"
        assert second["refreshToken"] != first["refreshToken"], "the rotated refresh token was stored"
        assert second["accessToken"] != first["accessToken"]
        time.sleep(7)  # again: works only with the rotated refresh token (the old one is spent)
        assert await call(s, "com.example.oidc", "me") == {"sub": "alice"}
        third = stored(ogw)
        # A 401 on a token that is not due for refresh: refreshed once, then the call succeeds.
        api.reject_next = True
        assert await call(s, "com.example.oidc", "me") == {"sub": "alice"}
        assert stored(ogw)["accessToken"] != third["accessToken"]
        assert api.seen[-2] == "Bearer " + third["accessToken"] and api.seen[-1] != api.seen[-2]

    oidc.restart()  # the provider forgets everything: the refresh fails too
    async with ogw.session() as s:
        with pytest.raises(MCPError) as e:
            await call(s, "com.example.oidc", "me")
        assert e.value.error.code == -32013, e.value.error
        assert "sign in again with `aai-gateway auth login com.example.oidc`" in e.value.error.data["detail"]

    api.server.shutdown()
    secrets = [first["accessToken"], first["refreshToken"], third["accessToken"], code]
    for path in [p for p in ogw.tmp.rglob("*") if p.is_file() and "keyring" not in str(p)]:
        text = path.read_bytes().decode("utf-8", "replace")
        for secret in secrets:
            assert secret not in text or path.name == "browser.log" and secret == code, f"token leaked into {path}"


def test_login_needs_a_client_id_and_ignores_a_stray_answer(ogw, oidc):
    oauth_app(ogw, oidc, client_id=None)
    p, _ = login(ogw)
    assert p.returncode == 1 and "no OAuth client id for `com.example.oidc`" in p.stderr
    ogw.config(apps={"com.example.oidc": {"clientId": "unknown-client"}})
    # A browser that never comes back would keep `auth login` waiting (5 minutes); the
    # config's client id is checked in the authorization URL the gateway prints first.
    proc = subprocess.Popen([str(ogw.binary), "--home", str(ogw.home), "auth", "login", "com.example.oidc"],
                            env=ogw.env(BROWSER="true"), stderr=subprocess.PIPE, text=True)
    line = proc.stderr.readline()
    assert "client_id=unknown-client" in line, line
    # A redirect that does not carry our `state` (a forged or stale answer) is answered
    # with an error page and ignored: the login goes on waiting for the real one.
    query = urllib.parse.parse_qs(urllib.parse.urlparse(line.split("sign in at ")[1].split()[0]).query)
    callback = query["redirect_uri"][0]
    with pytest.raises(urllib.error.HTTPError) as forged:
        urllib.request.urlopen(f"{callback}?code=stolen&state=forged", timeout=10)
    assert forged.value.code == 400 and "ignored" in forged.value.read().decode()
    with pytest.raises(subprocess.TimeoutExpired):
        proc.wait(timeout=1)
    proc.kill()
    proc.wait()
    assert ogw.run("auth", "status", "com.example.oidc").stdout.split()[-1] == "no", "nothing was stored"
