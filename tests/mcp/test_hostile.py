"""Hostile and faulty peers: a second site claiming a cached web app, passwords in URLs,
redirects to refused addresses, services that echo credentials, closed ports with keys
in the query string. Every secret is looked for in the error, the CLI output and every
file the gateway wrote.

Run: python3 -m pytest tests/mcp -q -k hostile
"""
import base64
import json
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from test_auth import auth_set
from test_http import free_port, tool, web_app
from test_web import Site, meta

MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio

KEY = "k3y-s3cr3t+v/alue="


@pytest.fixture
def site():
    s = Site()
    yield s
    s.stop()


def everything_written(gw):
    out = []
    for path in gw.tmp.rglob("*"):
        if path.is_file() and "credentials.json" not in path.name:
            out.append((path, path.read_bytes().decode("utf-8", "replace")))
    return out


def assert_absent(gw, secrets, *texts, history_may_hold=()):
    """No secret in the texts or in any file the gateway wrote. `history_may_hold`: values
    the call history records on purpose (arguments), looked for everywhere else."""
    for secret in secrets:
        for text in texts:
            assert secret not in text, f"{secret!r} leaked: {text[:500]}"
        for path, text in everything_written(gw):
            if secret in history_may_hold and path.name.startswith("state.db"):
                continue
            assert secret not in text, f"{secret!r} leaked into {path}"


async def test_a_second_origin_cannot_take_over_a_web_app(gw, site):
    site.docs["/.well-known/aai.json"] = web_app("com.example.bound", site.base, [tool("get", "GET", "/get")])
    other = f"http://localhost:{site.port}"  # same server, another origin
    async with gw.session() as s:
        await s.call_tool("web_discover", {"url": site.base})
        # The other origin serves the same id, its API on its own origin.
        site.docs["/.well-known/aai.json"] = web_app("com.example.bound", other, [tool("get", "GET", "/get")])
        with pytest.raises(MCPError) as e:
            await s.call_tool("web_discover", {"url": other})
        err = e.value.error
        assert err.code == -32004, err
        assert err.data["boundOrigin"] == site.base
        assert "cannot take it over" in err.data["detail"]
        assert meta(gw, "com.example.bound")["sourceUrl"] == f"{site.base}/.well-known/aai.json"
        with pytest.raises(MCPError):
            await s.call_tool("aai_exec", {"app": other, "tool": "get", "args": {}})


async def test_passwords_in_urls_are_refused_and_never_kept(gw, site):
    site.docs["/.well-known/aai.json"] = web_app("com.example.pw", site.base, [tool("get", "GET", "/get")])
    async with gw.session() as s:
        with pytest.raises(MCPError) as e:
            await s.call_tool("web_discover", {"url": f"http://bob:PW-s3cret@127.0.0.1:{site.port}/"})
        assert e.value.error.code == -32005
        assert "user name or password" in e.value.error.data["detail"]
        detail = json.dumps(e.value.error.data)
    assert not (gw.home / "web" / "com.example.pw").exists()
    assert_absent(gw, ["PW-s3cret"], detail)


class Redirector:
    """Answers every request with a 302 to `target`."""

    def __init__(self, target):
        outer = self
        self.target = target

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                self.send_response(302)
                self.send_header("location", outer.target)
                self.send_header("content-length", "0")
                self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("host", ["0.0.0.0", "[::ffff:127.0.0.1]"])
async def test_every_redirect_hop_passes_the_first_urls_check(gw, site, host):
    site.docs["/.well-known/aai.json"] = web_app("com.example.hop", site.base, [tool("get", "GET", "/get")])
    r = Redirector(f"http://{host}:{site.port}/.well-known/aai.json")
    try:
        async with gw.session() as s:
            with pytest.raises(MCPError) as e:
                await s.call_tool("web_discover", {"url": r.base})
            assert "redirect refused" in e.value.error.data["detail"], e.value.error.data
            assert site.hits.get("/.well-known/aai.json") is None, "the refused hop was never fetched"
    finally:
        r.stop()


class Echo:
    """Answers every request with `status` and a body echoing the request: its path and
    query, every header, and the body — what careless services do in their errors."""

    def __init__(self, status):
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def answer(self):
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length).decode("utf-8", "replace")
                echo = f"bad request {self.path} {dict(self.headers)} {body}".encode()
                self.send_response(status)
                self.send_header("content-type", "text/plain")
                self.send_header("content-length", str(len(echo)))
                self.end_headers()
                self.wfile.write(echo)

            do_GET = do_POST = answer

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


def keyed_apps(gw, base):
    query = web_app("com.example.q", base, [tool("get", "GET", "/items/{id}", {"id": {"type": "string"}}, ["id"])])
    query["auth"] = {"type": "apiKey", "apiKey": {"location": "query", "name": "api_key",
                                                  "obtainUrl": "https://example.com/keys"}}
    gw.put("com.example.q", query)
    header = web_app("com.example.h", base, [tool("get", "GET", "/items")])
    header["auth"] = {"type": "apiKey", "apiKey": {"location": "header", "name": "Authorization",
                                                   "prefix": "Bearer", "obtainUrl": "https://example.com/keys"}}
    gw.put("com.example.h", header)
    gw.config(credentials={"store": "file"})
    assert auth_set(gw, "com.example.q", KEY).returncode == 0
    assert auth_set(gw, "com.example.h", KEY).returncode == 0


def secret_forms():
    return [KEY, urllib.parse.quote(KEY, safe=""), urllib.parse.quote_plus(KEY),
            base64.b64encode(KEY.encode()).decode()]


@pytest.mark.parametrize("status", [400, 401])
async def test_services_that_echo_credentials_are_scrubbed(gw, status):
    echo = Echo(status)
    try:
        keyed_apps(gw, echo.base)
        details = []
        async with gw.session() as s:
            for app, args in [("com.example.q", {"id": "x"}), ("com.example.h", {})]:
                with pytest.raises(MCPError) as e:
                    await s.call_tool("aai_exec", {"app": app, "tool": "get", "args": args})
                details.append(json.dumps(e.value.error.data) + e.value.error.message)
                assert "***" in e.value.error.data["detail"] or status == 401, e.value.error.data
        cli = gw.run("call", "com.example.q", "get", '{"id": "x"}')
        assert cli.returncode == 1
        assert_absent(gw, secret_forms(), *details, cli.stdout, cli.stderr)
    finally:
        echo.stop()


async def test_closed_ports_do_not_leak_keys_or_path_arguments(gw):
    port = free_port()  # nothing listens
    keyed_apps(gw, f"http://127.0.0.1:{port}")
    async with gw.session(AAI_LOG="debug") as s:
        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", {"app": "com.example.q", "tool": "get", "args": {"id": "s3cr3t-path-arg"}})
        assert e.value.error.code == -32016, e.value.error
        detail = json.dumps(e.value.error.data)
        assert f"http://127.0.0.1:{port}/" in detail, "the origin is still named"
    cli = gw.run("call", "com.example.q", "get", '{"id": "s3cr3t-path-arg"}')
    # The history records arguments on purpose (users look them up); the key, never.
    assert_absent(gw, [*secret_forms(), "s3cr3t-path-arg"], detail, cli.stdout, cli.stderr,
                  history_may_hold=["s3cr3t-path-arg"])


class Faulty:
    """A web API that misbehaves by path: /huge (a 20 MiB body), /slow (a body that
    trickles), /loop (redirects to itself), /away (redirects to another origin)."""

    def __init__(self):
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_GET(self):
                path = self.path.split("?")[0]
                if path == "/huge":
                    self.send_response(200)
                    self.send_header("content-type", "text/plain")
                    self.end_headers()  # no length: the cap must hold while streaming
                    chunk = b"h" * (1 << 20)
                    try:
                        for _ in range(20):
                            self.wfile.write(chunk)
                    except OSError:
                        pass
                elif path == "/slow":
                    self.send_response(200)
                    self.send_header("content-type", "text/plain")
                    self.send_header("content-length", "100")
                    self.end_headers()
                    try:
                        for _ in range(100):
                            self.wfile.write(b"s")
                            self.wfile.flush()
                            import time
                            time.sleep(0.2)
                    except OSError:
                        pass
                elif path == "/loop":
                    self.send_response(302)
                    self.send_header("location", "/loop")
                    self.send_header("content-length", "0")
                    self.end_headers()
                elif path == "/away":
                    self.send_response(302)
                    self.send_header("location", f"http://localhost:{outer.port}/loop")
                    self.send_header("content-length", "0")
                    self.end_headers()

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.base = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


async def test_faulty_web_servers_fail_their_calls_cleanly(gw):
    f = Faulty()
    try:
        app = web_app("com.example.faulty", f.base, [tool("huge", "GET", "/huge"), tool("slow", "GET", "/slow"),
                                                     tool("loop", "GET", "/loop"), tool("away", "GET", "/away")],
                      timeout_ms=1500)
        gw.put("com.example.faulty", app)
        async with gw.session() as s:
            async def fails(name):
                with pytest.raises(MCPError) as e:
                    await s.call_tool("aai_exec", {"app": "com.example.faulty", "tool": name, "args": {}})
                return e.value.error
            assert "larger than 10 MiB" in (await fails("huge")).data["detail"]
            assert (await fails("slow")).code == -32008
            assert "redirect" in (await fails("loop")).data["detail"]
            away = await fails("away")
            assert "another origin" in away.data["detail"], away.data
            # Still serving.
            assert (await s.call_tool("aai_search", {"query": "faulty"})).structured_content["results"]
    finally:
        f.stop()


class HugeTokens:
    """A token endpoint that answers with 200 MiB of JSON, echoing the app secret first."""

    def __init__(self):
        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length)
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.end_headers()
                try:
                    self.wfile.write(b'{"echo": ' + json.dumps(body.decode()).encode() + b', "pad": "')
                    chunk = b"p" * (1 << 20)
                    for _ in range(200):
                        self.wfile.write(chunk)
                    self.wfile.write(b'"}')
                except OSError:
                    pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.base = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


async def test_a_huge_token_answer_is_refused_not_buffered(gw):
    ts = HugeTokens()
    try:
        app = web_app("com.example.tok", ts.base, [tool("me", "GET", "/me")])
        app["auth"] = {"type": "appCredential", "appCredential": {"tokenEndpoint": f"{ts.base}/token",
                                                                  "tokenType": "tenantAccessToken",
                                                                  "expiresIn": 7200}}
        gw.put("com.example.tok", app)
        gw.config(credentials={"store": "file"})
        assert auth_set(gw, "com.example.tok", '{"appId": "cli_a1", "appSecret": "app-s3cr3t-xyz"}').returncode == 0
        async with gw.session() as s:
            with pytest.raises(MCPError) as e:
                await s.call_tool("aai_exec", {"app": "com.example.tok", "tool": "me", "args": {}})
            assert "larger than 1 MiB" in e.value.error.data["detail"], e.value.error.data
            from test_executor import _gateways
            pid = max(p for p, _ in _gateways(gw))
            with open(f"/proc/{pid}/status") as f:
                peak_kib = next(int(l.split()[1]) for l in f if l.startswith("VmHWM:"))
            assert peak_kib < 100 * 1024, f"peak RSS {peak_kib} KiB"
            detail = json.dumps(e.value.error.data)
        assert_absent(gw, ["app-s3cr3t-xyz"], detail)
    finally:
        ts.stop()
