"""The certificate check of a web app's first call (docs/consent.md, Web apps): before
anything is sent, the consent question shows the site's origin and its certificate
(subject, issuer, SHA-256), read by a verified TLS handshake; an "always" answer is tied to
that certificate, and a changed certificate asks again. A site whose certificate does not
verify gets no request at all.

A real https server on loopback (Python's ssl) with certificates from a test CA made by
openssl; the gateway trusts the CA through SSL_CERT_FILE.

Run: python3 -m pytest tests/mcp -q -k site
"""
import contextlib
import hashlib
import http.server
import json
import shutil
import ssl
import subprocess
import threading

import pytest

from conftest import need_peer
from test_http import free_port, tool, web_app

MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio


def openssl(*args, cwd):
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def pki(tmp_path):
    """A test CA, a second CA nobody trusts, and a function making server certificates."""
    need_peer(shutil.which("openssl") is not None, "openssl (Debian package openssl)")
    d = tmp_path / "pki"
    d.mkdir()
    for ca in ["ca", "rogue"]:
        openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-subj", f"/CN=aai test {ca}",
                "-keyout", f"{ca}.key", "-out", f"{ca}.pem", cwd=d)

    def server_cert(name, ca="ca"):
        (d / f"{name}.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n")
        openssl("req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN=aai test server {name}",
                "-keyout", f"{name}.key", "-out", f"{name}.csr", cwd=d)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", f"{ca}.pem", "-CAkey", f"{ca}.key",
                "-CAcreateserial", "-days", "2", "-extfile", f"{name}.ext", "-out", f"{name}.pem", cwd=d)
        pem = (d / f"{name}.pem").read_text()
        der = ssl.PEM_cert_to_DER_cert(pem)
        fingerprint = ":".join(f"{b:02X}" for b in hashlib.sha256(der).digest())
        return d / f"{name}.pem", d / f"{name}.key", fingerprint

    return d, server_cert


@contextlib.contextmanager
def https_server(port, cert, key):
    """Answers GET /hello with JSON; records every request path it gets."""
    seen = []

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            seen.append(self.path)
            body = json.dumps({"hello": "world"}).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", port), Handler)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield seen
    finally:
        httpd.shutdown()
        httpd.server_close()


class Answers:
    def __init__(self, answer):
        self.answer = answer
        self.asked = []

    async def __call__(self, context, params):
        from mcp import types
        self.asked.append(params.message)
        return types.ElicitResult(action="accept", content={"decision": self.answer})


HELLO = {"app": "com.example.secure", "tool": "hello", "args": {}}


async def test_the_first_call_shows_the_certificate_and_a_new_one_asks_again(gw, pki):
    d, server_cert = pki
    port = free_port()
    gw.put("com.example.secure", web_app("com.example.secure", f"https://127.0.0.1:{port}",
                                         [tool("hello", "GET", "/hello")]))
    gw.config(consent={"mode": "prompt"})
    trust = {"SSL_CERT_FILE": str(d / "ca.pem")}
    cert_a, key_a, fp_a = server_cert("a")
    with https_server(port, cert_a, key_a) as seen:
        ask = Answers("tool")
        async with gw.session(elicitation=ask, client_name="checker", **trust) as s:
            r = await s.call_tool("aai_exec", HELLO)
            assert json.loads(r.content[0].text) == {"hello": "world"}
            await s.call_tool("aai_exec", HELLO)
        assert len(ask.asked) == 1, "asked once, then remembered"
        assert ask.asked[0].endswith(
            f" — on https://127.0.0.1:{port}, certificate of CN=aai test server a issued by CN=aai test ca, SHA-256 {fp_a}")
        assert seen == ["/hello", "/hello"]
    grants = json.loads(gw.run("consent", "list", "--json").stdout)["grants"]
    assert [g.get("cert") for g in grants] == [fp_a]
    listed = gw.run("consent", "list").stdout
    assert fp_a in listed
    # The site now shows another certificate (same CA, so it verifies): asked again.
    cert_b, key_b, fp_b = server_cert("b")
    with https_server(port, cert_b, key_b) as seen:
        ask = Answers("deny")
        async with gw.session(elicitation=ask, client_name="checker", **trust) as s:
            with pytest.raises(MCPError) as e:
                await s.call_tool("aai_exec", HELLO)
            assert e.value.error.code == -32004
        assert len(ask.asked) == 1 and fp_b in ask.asked[0] and fp_a not in ask.asked[0]
        assert seen == [], "denied: nothing was sent to the site"
        # Without a channel the refusal says which certificate it is about (UI pending).
        async with gw.session(client_name="checker", **trust) as s:
            with pytest.raises(MCPError) as e:
                await s.call_tool("aai_exec", HELLO)
            assert e.value.error.code == -32014
        assert seen == []


async def test_a_certificate_that_does_not_verify_gets_no_request(gw, pki):
    d, server_cert = pki
    port = free_port()
    gw.put("com.example.secure", web_app("com.example.secure", f"https://127.0.0.1:{port}",
                                         [tool("hello", "GET", "/hello")]))
    gw.config(consent={"mode": "prompt"})
    cert, key, _ = server_cert("rogue-signed", ca="rogue")
    with https_server(port, cert, key) as seen:
        ask = Answers("once")
        async with gw.session(elicitation=ask, SSL_CERT_FILE=str(d / "ca.pem")) as s:
            with pytest.raises(MCPError) as e:
                await s.call_tool("aai_exec", HELLO)
        err = e.value.error
        assert err.code == -32016, err
        assert "certificate" in err.data["detail"], err.data
        assert ask.asked == [], "the user is not asked about a site that does not verify"
        assert seen == []


async def test_mode_allow_reads_no_certificate(gw, pki):
    d, server_cert = pki
    port = free_port()
    gw.put("com.example.secure", web_app("com.example.secure", f"https://127.0.0.1:{port}",
                                         [tool("hello", "GET", "/hello")]))
    gw.config(consent={"mode": "allow"})
    cert, key, _ = server_cert("a")
    with https_server(port, cert, key) as seen:
        async with gw.session(SSL_CERT_FILE=str(d / "ca.pem")) as s:
            r = await s.call_tool("aai_exec", HELLO)
            assert json.loads(r.content[0].text) == {"hello": "world"}
        assert seen == ["/hello"]
