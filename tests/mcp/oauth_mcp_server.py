"""A remote MCP server protected by MCP authorization, with its own authorization server on
the same origin, for the tests of signing in to remote MCP servers (test_oauth.py).

`oauth_mcp_server.py MODE LOG` prints its port, then serves until killed. Every token it
issues and every grant it is asked for is appended to LOG as JSON lines. MODE:
  good          tokens live 1 s (each call refreshes first); refresh tokens rotate
  refuse        as good, but every refresh is refused (invalid_grant)
  other-origin  the metadata's token endpoint is on another origin (127.0.0.2)
  huge          the authorization server metadata is 2 MiB
  echo          the token endpoint refuses and echoes what it was sent
  redirect      registration answers with another (non-loopback) redirect URI
  echo200       the token endpoint refuses with HTTP 200 and echoes what it was sent
  nowa          as good, but its 401s carry no WWW-Authenticate (discovery by well-known)
  scope403      as good, but every request with a token gets 403 insufficient_scope "admin"
  iss           as good; its metadata says answers carry `iss` (RFC 9207), and they do
  wrong-iss     as iss, but answers name another issuer (https://evil.example)
  no-iss        as iss, but answers carry no `iss`
  people        as good, but tokens live an hour and each is one person's: /authorize signs
                in whoever the file $WHO_FILE names, `whoami` answers "you are <subject>",
                each person has one resource (note://<subject>/diary), and LOG records the
                subject of each MCP request
  team          no authorization server of its own: its metadata names $TEAM_ISSUER (the
                team's), and it takes only that issuer's JWTs (checked with its keys) for
                itself; `whoami` answers "you are <subject>"
"""
import base64
import json
import os
import secrets
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, urlencode, urlparse

MODE, LOG = sys.argv[1], sys.argv[2]
STATE = {"access": {}, "refresh": {}, "codes": {}, "sub": {}}
# Seconds a token is accepted (it says 1: the gateway refreshes first); an hour for people.
LIFE = 3600.0 if MODE in ("people", "team") else 2.0


def person():
    """Who signs in at /authorize: the person the test put at the browser (people mode)."""
    if MODE != "people":
        return None
    with open(os.environ["WHO_FILE"]) as f:
        return f.read().strip()


def log(**entry):
    with open(LOG, "a") as f:
        f.write(json.dumps(entry) + "\n")


def team_subject(token, audience):
    """The subject of a JWT of the team's issuer for `audience` (team mode), else None."""
    import jwt
    if not token:
        return None
    issuer = os.environ["TEAM_ISSUER"]
    try:
        key = jwt.PyJWKClient(f"{issuer}/jwks").get_signing_key_from_jwt(token).key
        return jwt.decode(token, key, algorithms=["RS256"], audience=audience, issuer=issuer)["sub"]
    except jwt.PyJWTError as e:
        log(refused=str(e))
        return None


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def base(self):
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def send(self, status, body=b"", ctype="application/json", headers=()):
        if isinstance(body, (dict, list)):
            body = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("content-type", ctype)
        self.send_header("content-length", str(len(body)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        url = urlparse(self.path)
        if url.path == "/.well-known/oauth-protected-resource/mcp":
            issuer = os.environ["TEAM_ISSUER"] if MODE == "team" else self.base()
            return self.send(200, {"resource": f"{self.base()}/mcp", "authorization_servers": [issuer],
                                   "scopes_supported": ["mcp"]})
        if url.path == "/.well-known/oauth-authorization-server":
            if MODE == "huge":
                return self.send(200, b'{"issuer": "' + b"x" * (2 << 20) + b'"}')
            token = (f"http://127.0.0.2:{self.server.server_address[1]}/token" if MODE == "other-origin"
                     else f"{self.base()}/token")
            return self.send(200, {
                "issuer": self.base(), "authorization_endpoint": f"{self.base()}/authorize",
                "token_endpoint": token, "registration_endpoint": f"{self.base()}/register",
                "code_challenge_methods_supported": ["S256"], "token_endpoint_auth_methods_supported": ["none"],
                "scopes_supported": ["mcp"],
                **({"authorization_response_iss_parameter_supported": True} if MODE.endswith("iss") else {})})
        if url.path == "/authorize":
            q = {k: v[0] for k, v in parse_qs(url.query).items()}
            code = secrets.token_urlsafe(16)
            STATE["codes"][code] = (q["code_challenge"], person())
            log(authorize=q)
            answer = {"code": code, "state": q["state"]}
            if MODE in ("iss", "wrong-iss"):
                answer["iss"] = self.base() if MODE == "iss" else "https://evil.example"
            return self.send(302, headers=[("location", q["redirect_uri"] + "?" + urlencode(answer))])
        if url.path == "/mcp":
            return self.send(405)
        return self.send(404)

    def tokens(self, sub):
        access, refresh = "at-" + secrets.token_urlsafe(16), "rt-" + secrets.token_urlsafe(16)
        STATE["access"][access] = time.monotonic()
        STATE["sub"][access] = sub
        STATE["refresh"][refresh] = sub
        log(issued={"access": access, "refresh": refresh}, sub=sub)
        return {"access_token": access, "refresh_token": refresh, "token_type": "Bearer",
                "expires_in": 3600 if MODE == "people" else 1}

    def do_POST(self):
        url = urlparse(self.path)
        body = self.rfile.read(int(self.headers.get("content-length", 0)))
        if url.path == "/register":
            registered = json.loads(body)
            if MODE == "redirect":
                registered["redirect_uris"] = ["https://evil.example/callback"]
            return self.send(201, {"client_id": "client-" + secrets.token_hex(4), **registered})
        if url.path == "/token":
            form = {k: v[0] for k, v in parse_qs(body.decode()).items()}
            log(grant=form.get("grant_type"), resource=form.get("resource"))
            if MODE in ("echo", "echo200"):
                return self.send(400 if MODE == "echo" else 200,
                                 {"error": "invalid_grant", "error_description": f"bad request {body.decode()}"})
            if form["grant_type"] == "authorization_code":
                challenge, sub = STATE["codes"].pop(form.get("code"), (None, None))
                verifier = form.get("code_verifier", "").encode()
                import hashlib
                computed = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).rstrip(b"=").decode()
                if challenge is None or computed != challenge:
                    return self.send(400, {"error": "invalid_grant"})
                return self.send(200, self.tokens(sub))
            if form["grant_type"] == "refresh_token":
                if MODE == "refuse" or form.get("refresh_token") not in STATE["refresh"]:
                    return self.send(400, {"error": "invalid_grant", "error_description": "refresh token refused"})
                sub = STATE["refresh"].pop(form["refresh_token"])  # rotation: single use
                return self.send(200, self.tokens(sub))
            return self.send(400, {"error": "unsupported_grant_type"})
        if url.path == "/mcp":
            auth = self.headers.get("authorization", "")
            token = auth[7:] if auth.startswith("Bearer ") else None
            if MODE == "team":
                STATE["sub"][token] = team_subject(token, f"{self.base()}/mcp")
                if STATE["sub"][token] is not None:
                    STATE["access"][token] = time.monotonic()
            if token not in STATE["access"] or time.monotonic() - STATE["access"][token] > LIFE:
                challenge = [] if MODE == "nowa" else [(
                    "www-authenticate",
                    f'Bearer resource_metadata="{self.base()}/.well-known/oauth-protected-resource/mcp", scope="mcp"')]
                return self.send(401, {"error": "invalid_token"}, headers=challenge)
            msg = json.loads(body)
            if MODE == "scope403" and STATE.get("checked"):
                return self.send(403, {"error": "insufficient_scope"}, headers=[(
                    "www-authenticate", 'Bearer error="insufficient_scope", scope="mcp admin"')])
            if MODE == "scope403" and msg.get("method") == "tools/list":
                STATE["checked"] = True  # the sign-in's own check passes; later requests do not
            sub = STATE["sub"].get(token)
            log(mcp=msg.get("method"), **({"sub": sub, "token": token} if MODE in ("people", "team") else {}))
            if "id" not in msg:
                return self.send(202)
            result = {
                "initialize": {"protocolVersion": msg.get("params", {}).get("protocolVersion", "2025-11-25"),
                               "capabilities": {"tools": {}, **({"resources": {}} if MODE == "people" else {})},
                               "serverInfo": {"name": "protected", "version": "1"}},
                # People mode: each person's own resource.
                "resources/list": {"resources": [{"uri": f"note://{sub}/diary", "name": f"{sub}'s diary"}]},
                "resources/read": {"contents": [{"uri": msg.get("params", {}).get("uri"), "mimeType": "text/plain",
                                                 "text": f"read as {sub}"}]},
                "tools/list": {"tools": [{"name": "whoami", "inputSchema": {"type": "object"}}]},
                "tools/call": {"content": [{"type": "text", "text": f"you are {sub}" if MODE in ("people", "team")
                                            else "you are signed in"}]},
            }.get(msg["method"], {})
            return self.send(200, {"jsonrpc": "2.0", "id": msg["id"], "result": result})
        return self.send(404)


server = ThreadingHTTPServer(("127.0.0.1", int(os.environ.get("PORT", 0))), Handler)
print(server.server_address[1], flush=True)
server.serve_forever()
