"""The team gateway's peers: the team's authorization server (oidc-provider, `oidc/team.mjs`)
and the tests' own sign-ins against it, and `--web` gateways configured to take its tokens
(`web.auth`)."""
import base64
import contextlib
import hashlib
import json
import os
import secrets
import shutil
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from conftest import need_peer
from test_http import free_port

OIDC = Path(__file__).with_name("oidc")


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Follows redirects inside the provider; stops at the client's redirect URI."""

    def __init__(self, stop_at):
        self.stop_at = stop_at
        self.landed = None

    def redirect_request(self, req, fp, code, msg, headers, newurl):
        newurl = urllib.parse.urljoin(req.full_url, newurl)
        if newurl.startswith(self.stop_at):
            self.landed = newurl
            return None
        return super().redirect_request(req, fp, code, msg, headers, newurl)


def browse(url, stop_at):
    """A cookie-keeping browser that follows `url` until it reaches `stop_at`; the URL it
    landed on (with `code` and `state`)."""
    jar = urllib.request.HTTPCookieProcessor()
    stop = _NoRedirect(stop_at)
    opener = urllib.request.build_opener(jar, stop)
    try:
        opener.open(url, timeout=10).read()
    except urllib.error.HTTPError as e:
        if stop.landed is None:
            raise AssertionError(f"{e.code} {e.read()[:300]!r} at {e.url}") from None
    assert stop.landed, f"never reached {stop_at}"
    return stop.landed


class TeamIdp:
    """The team's authorization server, on a free loopback port, for the resource
    `audience` (`env`: more of team.mjs's settings, such as TOKEN_EXCHANGE)."""

    def __init__(self, tmp, audience, ttl=600, token_format="jwt", env=None):
        need_peer(shutil.which("node") is not None and (OIDC / "node_modules" / "oidc-provider").is_dir(),
                  "npm package oidc-provider (npm ci --prefix tests/mcp/oidc)")
        self.port = free_port()
        self.base = f"http://127.0.0.1:{self.port}"
        self.audience = audience
        self.key_file = Path(tmp) / f"idp-key-{self.port}.json"
        self.proc = subprocess.Popen(
            ["node", str(OIDC / "team.mjs")], cwd=OIDC, text=True,
            env={**os.environ, "PORT": str(self.port), "AUDIENCE": audience, "ACCESS_TTL": str(ttl),
                 "TOKEN_FORMAT": token_format, "KEY_FILE": str(self.key_file),
                 "WHO_FILE": str(Path(tmp) / "who"), **(env or {})},
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        assert self.proc.stdout.readline().strip() == "ready"

    def stop(self):
        self.proc.kill()
        self.proc.wait()

    def key(self):
        return json.loads(self.key_file.read_text())

    def token(self, user="alice", scope="mcp apps:all aai:admin"):
        """An access token for `user` through the code flow (client `cli-test`, PKCE)."""
        verifier = secrets.token_urlsafe(48)
        challenge = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest()).rstrip(b"=").decode()
        state = secrets.token_urlsafe(16)
        query = urllib.parse.urlencode({
            "client_id": "cli-test", "response_type": "code", "redirect_uri": "http://127.0.0.1/callback",
            "scope": f"openid {scope}", "state": state, "code_challenge": challenge,
            "code_challenge_method": "S256", "resource": self.audience, "login_hint": user})
        landed = browse(f"{self.base}/auth?{query}", "http://127.0.0.1/callback")
        got = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(landed).query))
        assert got.get("state") == state, got
        form = urllib.parse.urlencode({
            "grant_type": "authorization_code", "code": got["code"], "redirect_uri": "http://127.0.0.1/callback",
            "code_verifier": verifier, "client_id": "cli-test", "resource": self.audience}).encode()
        answer = json.loads(urllib.request.urlopen(f"{self.base}/token", data=form, timeout=10).read())
        return answer["access_token"]

    def forge(self, claims, key=None, headers=None, alg="RS256"):
        """A token signed with the provider's own key (or `key`), with these claims over
        valid defaults."""
        import jwt
        now = int(time.time())
        body = {"iss": self.base, "aud": self.audience, "sub": "mallory", "exp": now + 600, "iat": now,
                "scope": "mcp apps:all", **claims}
        body = {k: v for k, v in body.items() if v is not None}
        signing = key if key is not None else jwt.algorithms.RSAAlgorithm.from_jwk(json.dumps(self.key()))
        return jwt.encode(body, signing, algorithm=alg,
                          headers={"kid": "team-1", "typ": "at+jwt", **(headers or {})})


def team_config(gw, idp, audience, **more):
    auth = {"issuer": idp.base, "audience": audience, "scopes": ["mcp"], "clientId": "aai-ui", **more}
    gw.config(web={"auth": auth}, enableWebUI=True)


@contextlib.contextmanager
def team_web(gw, port, env=None, replica=None):
    """`--web` on `port`, taking the team's tokens (as replica `replica`); yields the
    process."""
    more = ["--replica", replica] if replica else []
    proc = subprocess.Popen([str(gw.binary), "--home", str(gw.home), "--web", "--listen", f"127.0.0.1:{port}", *more],
                            env=gw.env(**{"AAI_WEB_AUTH_CLIENT_SECRET": "ui-secret-for-tests-only", **(env or {})}),
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = ""
        while "serving MCP on" not in line:
            line = proc.stderr.readline()
            assert line, f"the server did not start: {proc.stderr.read()}"
        yield proc
    finally:
        proc.terminate()
        proc.wait(timeout=15)
