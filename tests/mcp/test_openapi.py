"""`aai-gateway import openapi`: real public OpenAPI documents (tests/fixtures/openapi,
sources in SOURCES.md) become web descriptors that validate; the Swagger Petstore runs end
to end through the gateway against Prism, a real mock server built from the same document,
which checks every request against it (path, query, body, security).

Run: python3 -m pytest tests/mcp/test_openapi.py -q
"""
import json
import subprocess
import threading
import time
from functools import partial
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import pytest

MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

from conftest import ROOT, need_peer  # noqa: E402
from test_http import free_port  # noqa: E402

pytestmark = pytest.mark.anyio

FIXTURES = ROOT / "tests" / "fixtures" / "openapi"
PRISM = ROOT / "tests" / "mcp" / "peers" / "node_modules" / ".bin" / "prism"
PETSTORE = "io.swagger.petstore"


@pytest.fixture
def prism(tmp_path):
    """Prism mocking the Petstore on a free loopback port; yields its base URL."""
    need_peer(PRISM.exists(), "npm @stoplight/prism-cli (npm ci --prefix tests/mcp/peers)")
    port = free_port()
    log = open(tmp_path / "prism.log", "w+")
    proc = subprocess.Popen([str(PRISM), "mock", "-h", "127.0.0.1", "-p", str(port),
                             str(FIXTURES / "petstore.json")], stdout=log, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while "Prism is listening on" not in (tmp_path / "prism.log").read_text():
            assert proc.poll() is None, (tmp_path / "prism.log").read_text()
            assert time.monotonic() < deadline, "Prism did not start"
            time.sleep(0.1)
        yield f"http://127.0.0.1:{port}"
    finally:
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        log.close()


async def exec_(s, tool, **args):
    return await s.call_tool("aai_exec", {"app": PETSTORE, "tool": tool, "args": args})


async def test_petstore_runs_end_to_end_against_prism(gw, prism):
    gw.config(credentials={"store": "file"})
    preview = gw.run("import", "openapi", str(FIXTURES / "petstore.json"), "--base-url", prism, "--id", PETSTORE)
    assert preview.returncode == 0, preview.stderr
    assert "Swagger Petstore: 20 tools, auth apiKey (OAuth2 access token)" in preview.stdout, preview.stdout
    assert "Nothing written; run again with --yes" in preview.stdout
    assert "POST /pet/{petId}/uploadImage: its optional multipart/form-data body is not sent" in preview.stdout
    assert "2 tools need another security scheme than `petstore_auth`" in preview.stdout, preview.stdout
    assert "getPetById, getInventory" in preview.stdout
    assert not (gw.home / PETSTORE).exists()
    done = gw.run("import", "openapi", str(FIXTURES / "petstore.json"), "--base-url", prism, "--id", PETSTORE,
                  "--yes")
    assert done.returncode == 0 and f"wrote {gw.home / PETSTORE / 'aai.json'}" in done.stdout, done.stderr
    assert gw.run("validate", str(gw.home / PETSTORE / "aai.json")).returncode == 0

    async with gw.session() as s:
        # No token yet: the gateway says how to get one before calling anything.
        with pytest.raises(MCPError) as e:
            await exec_(s, "getPetById", petId=1)
        assert e.value.error.data["type"] == "AUTH_REQUIRED", e.value.error
    stored = subprocess.run([str(gw.binary), "--home", str(gw.home), "auth", "set", PETSTORE, "--stdin"],
                            input="petstore-token", text=True, capture_output=True, env=gw.env(), timeout=30)
    assert stored.returncode == 0, stored.stderr

    async with gw.session() as s:
        # A path parameter (Prism answers 404 for an unknown path).
        r = await exec_(s, "getOrderById", orderId=3)
        assert not r.is_error, r
        assert "quantity" in json.loads(r.content[0].text)
        # A required array query parameter behind the OAuth2 scheme (Prism answers 400
        # when it is missing or wrong, 401 without a bearer token).
        r = await exec_(s, "findPetsByStatus", status=["available", "sold"])
        assert not r.is_error, r
        pets = json.loads(r.content[0].text)
        assert pets[0]["name"] == "doggie" and isinstance(pets[0]["photoUrls"], list)
        # getPetById takes only the `api_key` scheme: the import said it would be refused.
        with pytest.raises(MCPError) as e:
            await exec_(s, "getPetById", petId=1)
        assert e.value.error.data["type"] == "AUTH_REQUIRED"
        # A JSON body (Order, flattened into the arguments).
        r = await exec_(s, "placeOrder", petId=7, quantity=2, status="placed", complete=False)
        assert not r.is_error, r
        assert json.loads(r.content[0].text)["status"] in ("placed", "approved", "delivered")
        # addPet's body has required fields that Prism checks (422 when absent); the spec
        # declares only a 405 answer, so a valid body gets exactly that.
        with pytest.raises(MCPError) as e:
            await exec_(s, "addPet", name="Rex", photoUrls=["https://example.com/rex.png"])
        assert "405" in e.value.error.data["detail"] and "422" not in e.value.error.data["detail"]
        # Bad arguments stop at the gateway, before the API.
        with pytest.raises(MCPError) as e:
            await exec_(s, "findPetsByStatus", status=["lost"])
        assert e.value.error.data["type"] == "INVALID_PARAMS"
        with pytest.raises(MCPError) as e:
            await exec_(s, "getPetById")
        assert e.value.error.data["type"] == "INVALID_PARAMS"


@pytest.mark.parametrize("fixture,tools,auth,extra", [
    # Its server is plain http, which the gateway refuses for anything but loopback.
    ("petstore.json", 20, "apiKey", ["--base-url", "https://petstore.swagger.io/v2"]),
    ("figma.yaml", 54, "apiKey", []),
    ("github-api.github.com.json", 1223, None, []),
])
def test_real_documents_import_into_descriptors_that_validate(gw, tmp_path, fixture, tools, auth, extra):
    out = tmp_path / "aai.json"
    r = gw.run("import", "openapi", str(FIXTURES / fixture), "-o", str(out), "--yes", "--json", *extra,
               timeout=180)
    assert r.returncode == 0, r.stderr
    report = json.loads(r.stdout)
    assert report["written"] == [str(out)] and report["apps"][0]["plan"] == "new"
    doc = json.loads(out.read_text())
    assert len(doc["tools"]) == tools
    assert doc["execution"]["baseUrl"].startswith("https://")
    assert (doc.get("auth") or {}).get("type") == auth
    names = [t["name"] for t in doc["tools"]]
    assert len(set(names)) == len(names)
    check = gw.run("validate", str(out), timeout=180)
    assert check.returncode == 0 and "error" not in check.stdout, check.stdout
    # Nothing was written into the home directory: -o names the file.
    assert not any(p.name == "aai.json" for p in gw.home.rglob("aai.json"))


def test_import_rules_only_overwrite_urls_and_hostile_input(gw, tmp_path):
    src = str(FIXTURES / "petstore.json")
    # --only: tags and operationIds; an unknown one is an error.
    out = tmp_path / "pets.json"
    https = ["--base-url", "https://petstore.swagger.io/v2"]
    r = gw.run("import", "openapi", src, "--only", "store", "--only", "getPetById", "-o", str(out), "--yes", *https)
    assert r.returncode == 0, r.stderr
    names = sorted(t["name"] for t in json.loads(out.read_text())["tools"])
    assert names == ["deleteOrder", "getInventory", "getOrderById", "getPetById", "placeOrder"]
    r = gw.run("import", "openapi", src, "--only", "nope", "-o", str(out), "--yes", *https)
    assert r.returncode == 2 and "`nope` is neither a tag nor an operationId" in r.stderr
    # An existing -o file that differs is kept unless --force.
    out.write_text("{}\n")
    r = gw.run("import", "openapi", src, "-o", str(out), "--yes", *https)
    assert r.returncode == 0 and "file exists (kept; --force to overwrite)" in r.stdout
    assert out.read_text() == "{}\n"
    r = gw.run("import", "openapi", src, "-o", str(out), "--yes", "--force", *https)
    assert r.returncode == 0 and json.loads(out.read_text())["app"]["id"] == "io.swagger.petstore"
    # A descriptor we wrote into the home is updated; one the user edited is kept.
    r = gw.run("import", "openapi", src, "--yes", *https)
    target = gw.home / "io.swagger.petstore" / "aai.json"
    assert r.returncode == 0 and target.exists(), r.stderr
    target.write_text(target.read_text().replace("Swagger Petstore", "My Petstore"))
    r = gw.run("import", "openapi", src, "--yes", *https)
    assert "edited by you" in r.stdout and "My Petstore" in target.read_text()

    # From a URL: a relative server is taken relative to the document's address.
    spec = json.loads((FIXTURES / "petstore.json").read_text())
    spec["servers"] = [{"url": "/api/v3"}]
    served = tmp_path / "served"
    served.mkdir()
    (served / "openapi.json").write_text(json.dumps(spec))
    server = ThreadingHTTPServer(("127.0.0.1", 0), partial(SimpleHTTPRequestHandler, directory=str(served)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        url = f"http://127.0.0.1:{server.server_address[1]}/openapi.json"
        r = gw.run("import", "openapi", url, "-o", str(tmp_path / "url.json"), "--yes", "--id", "local.pets")
        assert r.returncode == 0, r.stderr
        doc = json.loads((tmp_path / "url.json").read_text())
        assert doc["execution"]["baseUrl"] == f"http://127.0.0.1:{server.server_address[1]}/api/v3"
        r = gw.run("import", "openapi", url.replace("openapi.json", "missing.json"))
        assert r.returncode == 2 and "404" in r.stderr
    finally:
        server.shutdown()

    # Hostile and wrong input: clear errors, nothing written.
    r = gw.run("import", "openapi", "http://api.example.com/openapi.json")
    assert r.returncode == 2 and "must use https" in r.stderr
    for bad_id in ["../../escape", "..", "a/b", "com.example.\u00fc", ""]:
        r = gw.run("import", "openapi", src, "--id", bad_id, "--yes", *https)
        assert r.returncode == 2 and "an app id is" in r.stderr, (bad_id, r.stderr)
    assert not (gw.home.parent / "escape").exists()
    # -o must be a regular file (or a new one in an existing folder): not a directory,
    # a symbolic link or a device; a failed write leaves no temporary file behind.
    (tmp_path / "adir").mkdir()
    (tmp_path / "link.json").symlink_to(tmp_path / "pets.json")
    for target, message in [(tmp_path / "adir", "not a regular file"), ("/dev/null", "not a regular file"),
                            (tmp_path / "link.json", "symbolic link"),
                            (tmp_path / "no" / "such.json", "does not exist")]:
        r = gw.run("import", "openapi", src, "-o", str(target), "--yes", "--force", *https)
        assert r.returncode == 2 and message in r.stderr, (target, r.stderr)
    assert (tmp_path / "link.json").is_symlink() and not list(tmp_path.glob(".*.tmp"))
    # Terminal escapes in the document are shown, not obeyed.
    spec = json.loads((FIXTURES / "petstore.json").read_text())
    spec["info"]["title"] = "Pets\u001b[2K\r\u001b[1Aevil"
    (tmp_path / "ansi.json").write_text(json.dumps(spec))
    r = gw.run("import", "openapi", str(tmp_path / "ansi.json"), *https)
    assert r.returncode == 0 and "\x1b" not in r.stdout and "\\u{1b}[2K" in r.stdout, r.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text("openapi: 3.0.0\npaths: [unclosed\n")
    r = gw.run("import", "openapi", str(bad))
    assert r.returncode == 2 and "invalid YAML" in r.stderr
    swagger = tmp_path / "swagger.json"
    swagger.write_text('{"swagger": "2.0", "info": {"title": "Old"}, "paths": {}}')
    r = gw.run("import", "openapi", str(swagger))
    assert r.returncode == 2 and "Swagger 2.0" in r.stderr
    r = gw.run("import", "openapi", str(tmp_path / "nothing.json"))
    assert r.returncode == 2 and "cannot read" in r.stderr
