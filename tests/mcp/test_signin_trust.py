"""Sign-in and refresh that other parties cannot abuse: `auth login` keeps its `state` out
of the browser's command line, ignores stray answers, serves no other user at its loopback
callback, and refuses an answer from another authorization server (RFC 9207 `iss`); a
token endpoint or a web API that echoes a refresh token does not get it into the agent's
error or the history.

Run: python3 -m pytest tests/mcp/test_signin_trust.py -q
"""
import json
import os
import shutil
import subprocess
import sys
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

HERE = Path(__file__).parent
BROWSER = HERE / "browser.py"
SERVER = HERE / "oauth_mcp_server.py"
MCP_APP = "dev.remote.protected"


def signing_in(gw, app, browser, *extra):
    """Starts `auth login`; returns the process and the authorization URL it printed."""
    proc = subprocess.Popen([str(gw.binary), "--home", str(gw.home), "auth", "login", app, *extra],
                            env=gw.env(BROWSER=browser, BROWSER_LOG=str(gw.tmp / "browser.log")),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    for line in proc.stderr:
        if "sign in at " in line:
            return proc, line.split("sign in at ", 1)[1].split()[0]
    proc.wait(timeout=10)
    pytest.fail("no authorization URL was printed")


def query_of(url):
    return {k: v[0] for k, v in urllib.parse.parse_qs(urllib.parse.urlparse(url).query).items()}


def finished(proc):
    out, err = proc.communicate(timeout=60)
    return proc.returncode, out + err


@pytest.fixture
def oidc_gw(gw, bus, tmp_path):
    from test_auth import start_keyring
    from test_oauth import Provider, oauth_app
    gw.extra_env = bus.env()
    start_keyring(bus, tmp_path)
    provider = Provider(ttl=60)
    oauth_app(gw, provider)
    yield gw, provider
    provider.stop()


def status(gw, app):
    return gw.run("auth", "status", app).stdout.split()[-1]


def test_the_browsers_command_line_holds_no_state_and_stray_answers_are_ignored(oidc_gw, tmp_path):
    """$BROWSER gets the callback's /start address (the provider's URL with its `state` is
    only printed on the terminal); a forged answer, sent before the real one, gets an error
    page and the sign-in goes on to completion."""
    gw, _ = oidc_gw
    argv_log, forged_log = tmp_path / "argv.json", tmp_path / "forged.txt"
    opener = tmp_path / "opener.py"
    opener.write_text(
        "import json, subprocess, sys, urllib.error, urllib.parse, urllib.request\n"
        f"open({str(argv_log)!r}, 'w').write(json.dumps(sys.argv))\n"
        "port = urllib.parse.urlparse(sys.argv[1]).port\n"
        "try:\n"
        "    urllib.request.urlopen(f'http://127.0.0.1:{port}/callback?code=stolen&state=forged', timeout=10)\n"
        "except urllib.error.HTTPError as e:\n"
        f"    open({str(forged_log)!r}, 'w').write(f'{{e.code}} ' + e.read().decode())\n"
        f"subprocess.run([sys.executable, {str(BROWSER)!r}, sys.argv[1]], check=True)\n")
    proc, url = signing_in(gw, "com.example.oidc", f"{sys.executable} {opener}")
    code, said = finished(proc)
    assert code == 0, said
    assert "signed in to com.example.oidc" in said
    state = query_of(url)["state"]
    argv = json.loads(argv_log.read_text())
    assert not any(state in a for a in argv), argv
    assert argv[1].startswith("http://127.0.0.1:") and argv[1].endswith("/start"), argv
    assert forged_log.read_text().startswith("400 ") and "ignored" in forged_log.read_text()
    assert status(gw, "com.example.oidc") == "yes"


def test_another_users_connections_to_the_callback_are_refused(oidc_gw):
    """uid 65534, even with the real `state` (here taken from the terminal), is answered
    neither at /callback nor at /start: its code is not redeemed, and the owner's browser
    then signs in."""
    gw, _ = oidc_gw
    if os.geteuid() != 0 or not shutil.which("setpriv"):
        pytest.skip("needs root and setpriv to act as another user")
    proc, url = signing_in(gw, "com.example.oidc", "true")
    q = query_of(url)
    port = urllib.parse.urlparse(q["redirect_uri"]).port
    probe = (
        "import socket, sys\n"
        "answers = []\n"
        "for target in sys.argv[2:]:\n"
        "    s = socket.create_connection(('127.0.0.1', int(sys.argv[1])), timeout=10)\n"
        "    s.sendall(f'GET {target} HTTP/1.1\\r\\nhost: 127.0.0.1\\r\\n\\r\\n'.encode())\n"
        "    data = b''\n"
        "    try:\n"
        "        while chunk := s.recv(4096):\n"
        "            data += chunk\n"
        "    except OSError:\n"
        "        pass\n"
        "    answers.append(data.decode('latin-1'))\n"
        "print(repr(answers))\n")
    targets = ["/start", f"/callback?code=stolen&state={urllib.parse.quote(q['state'])}"]
    other = subprocess.run(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                            "/usr/bin/python3", "-c", probe, str(port), *targets],
                           capture_output=True, text=True, timeout=30)
    assert other.returncode == 0, other.stderr
    assert other.stdout.strip() == repr(["", ""]), other.stdout
    assert proc.poll() is None, "another user's answer ended the sign-in"
    # The owner (this test, as root) answers: the sign-in completes.
    subprocess.run([sys.executable, str(BROWSER), url], check=True, timeout=30,
                   env={**gw.env(), "BROWSER_LOG": str(gw.tmp / "browser.log")})
    code, said = finished(proc)
    assert code == 0, said
    assert status(gw, "com.example.oidc") == "yes"


@pytest.fixture
def remote(gw, tmp_path):
    procs = []

    def start(mode):
        log = tmp_path / f"server-{mode}.log"
        p = subprocess.Popen([sys.executable, str(SERVER), mode, str(log)], stdout=subprocess.PIPE, text=True)
        procs.append(p)
        url = f"http://127.0.0.1:{int(p.stdout.readline())}/mcp"
        gw.config(credentials={"store": "file"})
        gw.put("remote", {
            "schemaVersion": "1.0", "version": "1.0.0", "platform": "linux",
            "app": {"id": MCP_APP, "name": {"en": "Protected"}, "defaultLang": "en", "description": "remote"},
            "execution": {"type": "mcp", "url": url}})
        return log, url.removesuffix("/mcp")

    yield start
    for p in procs:
        p.kill()
        p.wait()


def grants(log):
    return [json.loads(line).get("grant") for line in log.read_text().splitlines()] if log.exists() else []


@pytest.mark.parametrize("mode, ok", [("iss", True), ("wrong-iss", False), ("no-iss", False)])
def test_an_answer_from_another_authorization_server_is_refused(gw, remote, mode, ok):
    """The authorization server's metadata says its answers carry `iss` (RFC 9207): an
    answer naming another issuer, or none, is refused before the code is redeemed."""
    log, _ = remote(mode)
    p = subprocess.run([str(gw.binary), "--home", str(gw.home), "auth", "login", MCP_APP, "--yes"],
                       env=gw.env(BROWSER=f"{sys.executable} {BROWSER}", BROWSER_LOG=str(gw.tmp / "b.log")),
                       capture_output=True, text=True, timeout=60)
    if ok:
        assert p.returncode == 0, p.stderr
        return
    assert p.returncode == 1, p.stderr
    assert "came from another authorization server" in p.stderr, p.stderr
    assert ("`https://evil.example`" if mode == "wrong-iss" else "is none") in p.stderr, p.stderr
    assert "authorization_code" not in grants(log), "the code was redeemed"
    creds = gw.home / "credentials.json"
    assert not creds.exists() or "tokens\": {" not in creds.read_text()

APP = "com.example.echo"


class Echoer:
    """A token endpoint and an API on one loopback port. The token endpoint refuses every
    refresh (400) or hands out `fresh` tokens; both echo what they hold in their errors.
    `/me` answers 401 for tokens in `expired`, else 400 with the text of `api_says`."""

    def __init__(self):
        self.refresh_answer = None  # (status, body) for the next refresh
        self.api_says = "nothing"
        self.expired = set()
        self.seen = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def answer(self, status, body, ctype="application/json"):
                body = body.encode() if isinstance(body, str) else body
                self.send_response(status)
                self.send_header("content-type", ctype)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def do_POST(self):
                form = urllib.parse.parse_qs(self.rfile.read(int(self.headers.get("content-length", 0))).decode())
                outer.seen.append(("token", {k: v[0] for k, v in form.items()}))
                status, body = outer.refresh_answer
                self.answer(status, body(form["refresh_token"][0]) if callable(body) else body)

            def do_GET(self):
                auth = self.headers.get("authorization", "")
                outer.seen.append(("api", auth))
                if auth.removeprefix("Bearer ") in outer.expired:
                    return self.answer(401, '{"error": "invalid_token"}')
                self.answer(400, json.dumps({"message": outer.api_says}))

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def echoer():
    e = Echoer()
    yield e
    e.close()


def echo_app(gw, server):
    gw.config(credentials={"store": "file"})
    gw.put(APP, {
        "schemaVersion": "1.0", "version": "1.0.0", "platform": "web",
        "app": {"id": APP, "name": {"en": "Echo"}, "defaultLang": "en", "description": "Echoes tokens"},
        "execution": {"type": "http", "baseUrl": server.base},
        "auth": {"type": "oauth2", "oauth2": {
            "authorizationEndpoint": f"{server.base}/auth", "tokenEndpoint": f"{server.base}/token",
            "scopes": ["read"], "clientId": "aai-test"}},
        "tools": [{"name": "me", "description": "Who am I", "execution": {"path": "/me", "method": "GET"},
                   "parameters": {"type": "object"}}]})


def store_tokens(gw, access, refresh, due):
    """Tokens as `auth login` stores them; `due`: the refresh time has passed."""
    creds = gw.home / "credentials.json"
    creds.write_text(json.dumps({APP: {
        "type": "oauth2", "accessToken": access, "refreshToken": refresh,
        "expiresAt": 1 if due else 4_000_000_000, "refreshAt": 1 if due else 3_999_999_000}}))
    creds.chmod(0o600)


def call_me(gw):
    p = gw.run("call", APP, "me", "{}")
    assert p.returncode == 1, p.stdout + p.stderr
    return p.stdout + p.stderr


def history(gw):
    return gw.run("history", "--json").stdout + gw.run("history").stdout


def assert_hidden(secret, *texts):
    for text in texts:
        assert secret not in text, text
        assert urllib.parse.quote(secret, safe="") not in text, text


@pytest.mark.parametrize("body", [
    lambda rt: json.dumps({"error": "invalid_grant", "error_description": f"refresh token {rt} is not valid"}),
    lambda rt: json.dumps({"error": f"invalid_grant {rt}"}),
    lambda rt: f"refresh_token={rt} refused",
], ids=["description", "error", "text"])
def test_a_token_endpoint_echoing_the_refresh_token_does_not_leak_it(gw, echoer, body):
    echo_app(gw, echoer)
    refresh = "rt-echoed-0123456789abcdef"
    store_tokens(gw, "at-old-0123456789abcdef", refresh, due=True)
    echoer.refresh_answer = (400, body)
    out = call_me(gw)
    assert any(kind == "token" for kind, _ in echoer.seen), "the refresh was tried"
    assert "AUTH_EXPIRED" in out or "auth login" in out, out
    assert_hidden(refresh, out, history(gw), (gw.tmp / "stderr.log").read_text()
                  if (gw.tmp / "stderr.log").exists() else "")


def test_a_web_api_echoing_the_refresh_token_does_not_leak_it(gw, echoer):
    echo_app(gw, echoer)
    refresh = "rt-stored-0123456789abcdef"
    store_tokens(gw, "at-good-0123456789abcdef", refresh, due=False)
    echoer.api_says = f"you also hold the refresh token {refresh}"
    out = call_me(gw)
    assert "you also hold the refresh token" in out, out
    assert_hidden(refresh, out, history(gw))


def test_tokens_from_a_refresh_after_a_401_are_scrubbed_too(gw, echoer):
    """The first token is refused; the refresh hands out new ones, and the API echoes the
    new refresh token and access token in its error."""
    echo_app(gw, echoer)
    old = "at-old-0123456789abcdef"
    store_tokens(gw, old, "rt-old-0123456789abcdef", due=False)
    echoer.expired.add(old)
    new_access, new_refresh = "at-new-0123456789abcdef", "rt-new-0123456789abcdef"
    echoer.refresh_answer = (200, json.dumps({
        "access_token": new_access, "refresh_token": new_refresh, "token_type": "Bearer", "expires_in": 3600}))
    echoer.api_says = f"new tokens {new_access} and {new_refresh}"
    out = call_me(gw)
    assert ("api", "Bearer " + new_access) in echoer.seen, echoer.seen
    assert "new tokens" in out, out
    for secret in (new_access, new_refresh, "rt-old-0123456789abcdef"):
        assert_hidden(secret, out, history(gw))


def test_a_web_apps_sign_in_checks_iss_against_the_metadata_of_its_endpoint(gw, remote):
    """A web app's descriptor names no issuer: the metadata on its authorization
    endpoint's origin (which describes that endpoint) does, and promises `iss`."""
    log, base = remote("wrong-iss")
    gw.put("com.example.mixup", {
        "schemaVersion": "1.0", "version": "1.0.0", "platform": "web",
        "app": {"id": "com.example.mixup", "name": {"en": "Mix-up"}, "defaultLang": "en", "description": "x"},
        "execution": {"type": "http", "baseUrl": base},
        "auth": {"type": "oauth2", "oauth2": {
            "authorizationEndpoint": f"{base}/authorize", "tokenEndpoint": f"{base}/token",
            "scopes": ["mcp"], "pkce": {"method": "S256"}, "clientId": "aai-test"}},
        "tools": [{"name": "me", "description": "x", "execution": {"path": "/me", "method": "GET"},
                   "parameters": {"type": "object"}}]})
    p = subprocess.run([str(gw.binary), "--home", str(gw.home), "auth", "login", "com.example.mixup"],
                       env=gw.env(BROWSER=f"{sys.executable} {BROWSER}", BROWSER_LOG=str(gw.tmp / "b.log")),
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 1, p.stderr
    assert "came from another authorization server" in p.stderr and "`https://evil.example`" in p.stderr, p.stderr
    assert "authorization_code" not in grants(log), "the code was redeemed"
