"""Web app credentials end to end: stored with `aai-gateway auth set` in a real Secret
Service (gnome-keyring on a private bus), sent as API keys (header, query, bearer) and
cookies to httpbin, app credentials exchanged at a token endpoint (with re-exchange after
a 401), guidance when a credential is missing, a locked keyring, the opt-in file store —
and no secret anywhere in what the gateway wrote.

Run: python3 -m pytest tests/mcp -q -k auth
"""
import contextlib
import json
import os
import shutil
import subprocess
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from conftest import need_peer
from test_http import call, free_port, httpbin, tool, web_app  # noqa: F401  (httpbin is a fixture)

MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio

SECRETS = ["k3y-s3cr3t-value", "sess10n-c00kie", "app-s3cr3t-xyz", "t-token-"]


def start_keyring(bus, tmp, unlock=True):
    need_peer(shutil.which("gnome-keyring-daemon") is not None, "gnome-keyring (Debian package gnome-keyring)")
    home = tmp / "keyring-home"
    run = tmp / "keyring-run"
    home.mkdir()
    run.mkdir(mode=0o700)
    env = {**os.environ, **bus.env(), "HOME": str(home), "XDG_RUNTIME_DIR": str(run),
           "XDG_DATA_HOME": str(home / ".local/share")}
    if unlock:
        subprocess.run(["gnome-keyring-daemon", "--unlock", "--components=secrets"], input="pw", text=True,
                       env=env, capture_output=True, timeout=20, check=True)
    subprocess.run(["gnome-keyring-daemon", "--start", "--components=secrets"], env=env,
                   capture_output=True, timeout=20, check=True)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        out = subprocess.run(["busctl", f"--address={bus.address}", "list", "--acquired", "--no-legend"],
                             capture_output=True, text=True).stdout
        if "org.freedesktop.secrets" in out:
            break
        time.sleep(0.1)
    pid = bus.call("call", "org.freedesktop.DBus", "/org/freedesktop/DBus", "org.freedesktop.DBus",
                   "GetConnectionUnixProcessID", "s", "org.freedesktop.secrets")["data"][0]
    def kill(_):
        with contextlib.suppress(ProcessLookupError):  # it may have ended already
            os.kill(pid, 9)

    bus.procs.append(type("P", (), {"kill": kill})())
    return pid


@pytest.fixture
def agw(gw, bus, tmp_path):
    gw.extra_env = bus.env()
    start_keyring(bus, tmp_path)
    return gw


def auth_set(gw, app, value, **env):
    p = subprocess.run([str(gw.binary), "--home", str(gw.home), "auth", "set", app, "--stdin"],
                       input=value, text=True, capture_output=True, env=gw.env(**env), timeout=30)
    return p


def api_apps(gw, base):
    instructions = {"short": "Get a token in Settings > Tokens", "helpUrl": "https://example.com/help"}
    header = web_app("com.example.keyed", base, [tool("headers", "GET", "/headers"),
                                                 tool("denied", "GET", "/status/401")])
    header["auth"] = {"type": "apiKey", "apiKey": {"location": "header", "name": "X-Auth-Token", "prefix": "Token",
                                                   "obtainUrl": "https://example.com/tokens",
                                                   "instructions": instructions}}
    gw.put("com.example.keyed", header)
    query = web_app("com.example.query", base, [tool("get", "GET", "/get", {"q": {"type": "string"}})])
    query["auth"] = {"type": "apiKey", "apiKey": {"location": "query", "name": "api_key",
                                                  "obtainUrl": "https://example.com/tokens"}}
    gw.put("com.example.query", query)
    bearer = web_app("com.example.bearer", base, [tool("bearer", "GET", "/bearer")])
    bearer["auth"] = {"type": "apiKey", "apiKey": {"location": "header", "name": "Authorization", "prefix": "Bearer",
                                                   "obtainUrl": "https://example.com/tokens"}}
    gw.put("com.example.bearer", bearer)
    cookie = web_app("com.example.cookie", base, [tool("cookies", "GET", "/cookies")])
    cookie["auth"] = {"type": "cookie", "cookie": {"loginUrl": "https://example.com/login",
                                                   "requiredCookies": ["session", "a1"], "domain": "127.0.0.1",
                                                   "instructions": "Log in, then copy the cookies from DevTools"}}
    gw.put("com.example.cookie", cookie)


def assert_no_secret_leaked(gw):
    written = [p for p in gw.tmp.rglob("*") if p.is_file() and "keyring" not in str(p)]
    for path in written:
        text = path.read_bytes().decode("utf-8", "replace")
        for secret in SECRETS:
            assert secret not in text, f"{secret!r} leaked into {path}"


async def test_api_keys_and_cookies_from_the_keyring(agw, httpbin):
    api_apps(agw, httpbin)
    assert auth_set(agw, "com.example.keyed", "k3y-s3cr3t-value\n").returncode == 0
    assert auth_set(agw, "com.example.query", "k3y-s3cr3t-value").returncode == 0
    assert auth_set(agw, "com.example.bearer", "k3y-s3cr3t-value").returncode == 0
    bad = auth_set(agw, "com.example.cookie", "a1=1")
    assert bad.returncode == 0, "cookies are checked when used, not when stored"
    status = agw.run("auth", "status")
    assert "com.example.keyed" in status.stdout and "k3y" not in status.stdout + status.stderr
    assert [l.split()[-1] for l in status.stdout.splitlines()[1:]] == ["yes"] * 4

    async with agw.session() as s:
        h = await call(s, "com.example.keyed", "headers")
        assert h["headers"]["X-Auth-Token"] == "Token k3y-s3cr3t-value"
        q = await call(s, "com.example.query", "get", q="x")
        assert q["args"] == {"q": "x", "api_key": "k3y-s3cr3t-value"}
        b = await call(s, "com.example.bearer", "bearer")
        assert b == {"authenticated": True, "token": "k3y-s3cr3t-value"}
        with pytest.raises(MCPError) as e:
            await call(s, "com.example.cookie", "cookies")
        assert e.value.error.code == -32011 and "lack session" in e.value.error.data["detail"]
        with pytest.raises(MCPError) as e:
            await call(s, "com.example.keyed", "denied")
        assert e.value.error.code == -32011
        assert "rejected the stored credential" in e.value.error.data["detail"]

    assert auth_set(agw, "com.example.cookie", "session=sess10n-c00kie; a1=x").returncode == 0
    async with agw.session() as s:  # a new gateway process: credentials survived the restart
        c = await call(s, "com.example.cookie", "cookies")
        assert c["cookies"] == {"session": "sess10n-c00kie", "a1": "x"}
        assert (await call(s, "com.example.bearer", "bearer"))["authenticated"] is True
    assert agw.run("auth", "logout", "com.example.bearer").stdout.startswith("removed")
    async with agw.session() as s:
        with pytest.raises(MCPError) as e:
            await call(s, "com.example.bearer", "bearer")
        assert e.value.error.code == -32011
    assert_no_secret_leaked(agw)


async def test_missing_credentials_explain_what_to_do(agw, httpbin):
    api_apps(agw, httpbin)
    async with agw.session(LANG="zh_CN.UTF-8") as s:
        with pytest.raises(MCPError) as e:
            await call(s, "com.example.keyed", "headers")
        d = e.value.error.data
        assert e.value.error.code == -32011 and d["type"] == "AUTH_REQUIRED"
        assert d["authType"] == "apiKey" and d["command"] == "aai-gateway auth set com.example.keyed"
        assert d["obtainUrl"] == "https://example.com/tokens"
        assert d["instructions"] == {"short": "Get a token in Settings > Tokens", "helpUrl": "https://example.com/help"}
        assert d["locale"] == "zh-CN"
        guide = (await s.call_tool("aai_guide", {"app": "com.example.keyed"})).content[0].text
        assert "API key in the header `X-Auth-Token`" in guide


class TokenServer:
    """A token endpoint and an API that only accepts the tokens it issued most recently."""

    def __init__(self):
        self.exchanges = 0
        self.valid = set()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def reply(self, code, body):
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self):
                body = json.loads(self.rfile.read(int(self.headers["content-length"])))
                if body != {"app_id": "cli_a1", "app_secret": "app-s3cr3t-xyz"}:
                    return self.reply(200, {"code": 10014, "msg": "app secret invalid"})
                outer.exchanges += 1
                token = f"t-token-{outer.exchanges}"
                outer.valid = {token}
                self.reply(200, {"code": 0, "msg": "ok", "tenant_access_token": token, "expire": 7200})

            def do_GET(self):
                auth = self.headers.get("authorization", "")
                if auth.removeprefix("Bearer ") in outer.valid:
                    return self.reply(200, {"me": "bot", "token_no": auth.rsplit("-", 1)[-1]})
                self.reply(401, {"code": 99991663, "msg": "token expired"})

        self.server = ThreadingHTTPServer(("127.0.0.1", free_port()), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"


async def test_app_credentials_are_exchanged_cached_and_renewed(agw):
    ts = TokenServer()
    app = web_app("com.example.feishu", ts.base, [tool("me", "GET", "/me")])
    app["auth"] = {"type": "appCredential", "appCredential": {"tokenEndpoint": f"{ts.base}/token",
                                                              "tokenType": "tenantAccessToken", "expiresIn": 7200}}
    agw.put("com.example.feishu", app)
    assert auth_set(agw, "com.example.feishu", '{"appId": "cli_a1", "appSecret": "wrong"}').returncode == 0
    async with agw.session() as s:
        with pytest.raises(MCPError) as e:
            await call(s, "com.example.feishu", "me")
        assert e.value.error.code == -32012 and "app secret invalid" in e.value.error.data["detail"]
    assert auth_set(agw, "com.example.feishu", '{"app_id": "cli_a1", "app_secret": "app-s3cr3t-xyz"}').returncode == 0
    async with agw.session() as s:
        assert (await call(s, "com.example.feishu", "me"))["token_no"] == "1"
        assert (await call(s, "com.example.feishu", "me"))["token_no"] == "1"
        assert ts.exchanges == 1, "the token is cached"
        ts.valid = set()  # the provider revokes it: the next call gets a 401
        assert (await call(s, "com.example.feishu", "me"))["token_no"] == "2"
        assert ts.exchanges == 2, "one re-exchange after the 401"
    ts.server.shutdown()
    assert_no_secret_leaked(agw)


def test_a_locked_keyring_gives_a_clear_error_fast(gw, bus, tmp_path):
    gw.extra_env = bus.env()
    start_keyring(bus, tmp_path, unlock=False)
    gw.put("com.example.keyed", {**web_app("com.example.keyed", "http://127.0.0.1:9", [tool("x", "GET", "/x")]),
                                 "auth": {"type": "apiKey", "apiKey": {"location": "header", "name": "K",
                                                                       "obtainUrl": "https://example.com"}}})
    started = time.monotonic()
    p = auth_set(gw, "com.example.keyed", "k3y-s3cr3t-value")
    assert time.monotonic() - started < 15
    assert p.returncode == 1
    assert "the OS credential store is not usable" in p.stderr, p.stderr
    # What to do, in one line, never cut.
    line = next(ln for ln in p.stderr.splitlines() if "not usable" in ln)
    assert line.rstrip().endswith('or set "credentials": {"store": "file"} in config.json.'), line
    assert "Start a Secret Service" in line, line
    assert "k3y" not in p.stderr


def test_auth_status_lists_apps_without_a_secret_service(gw):
    # The default test environment has no session bus, so no Secret Service.
    gw.put("com.example.keyed", {**web_app("com.example.keyed", "http://127.0.0.1:9", [tool("x", "GET", "/x")]),
                                 "auth": {"type": "apiKey", "apiKey": {"location": "header", "name": "K",
                                                                       "obtainUrl": "https://example.com"}}})
    status = gw.run("auth", "status")
    assert status.returncode == 1
    row = next(line for line in status.stdout.splitlines() if line.startswith("com.example.keyed"))
    assert "apiKey" in row and "unknown" in row, status.stdout
    assert '"credentials": {"store": "file"}' in status.stderr, status.stderr


async def test_the_file_store_is_an_explicit_opt_in(gw, httpbin):
    api_apps(gw, httpbin)
    gw.config(credentials={"store": "file"})
    assert auth_set(gw, "com.example.bearer", "k3y-s3cr3t-value").returncode == 0
    creds = gw.home / "credentials.json"
    assert oct(creds.stat().st_mode & 0o777) == "0o600"
    async with gw.session() as s:
        assert (await call(s, "com.example.bearer", "bearer"))["authenticated"] is True
    assert "plain file" in (gw.tmp / "stderr.log").read_text()
