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
])
def test_hostile_authorization_servers_are_refused_clearly(gw, remote, mode, said):
    url, log = remote(mode)
    p = run(gw, "auth", "login", APP, "--yes")
    assert p.returncode == 1
    assert said in p.stderr, p.stderr
    if mode == "other-origin":
        # Refused before the browser step: the user never saw a sign-in page.
        assert not any("authorize" in e for e in entries(log))
    if mode == "echo":
        # The token endpoint echoed the code and the verifier: neither reaches the output.
        assert "bad request" in p.stderr
        said = p.stderr.split("bad request", 1)[1]
        assert "code=***" in said and "code_verifier=***" in said, p.stderr
    assert not (gw.home / "credentials.json").exists() or APP not in (gw.home / "credentials.json").read_text()
