"""Web app descriptors: `web_discover` of a site's /.well-known/aai.json, the cache under
$AAI_HOME/web with its metadata and ETag revalidation, the stale copy when the site is
down, invalid descriptors, and the AAI Registry catalog — all served from 127.0.0.1.

Run: python3 -m pytest tests/mcp -q -k web
"""
import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anyio
import pytest

from test_http import call, httpbin, tool, web_app  # noqa: F401  (httpbin is a fixture)

MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio


class Site:
    """Serves documents by path, with ETags; `hits` counts full responses per path. Other
    paths go to `upstream` (httpbin) when set, so that a site's descriptor can describe an
    API on its own origin, as fetched descriptors must."""

    def __init__(self):
        self.docs = {}
        self.hits = {}
        self.not_modified = 0
        self.upstream = None
        self.forwarded = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):
                pass

            def forward(self):
                import urllib.error
                import urllib.request
                outer.forwarded.append(self.path)
                length = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(length) if length else None
                headers = {k: v for k, v in self.headers.items() if k.lower() not in ("host", "content-length")}
                request = urllib.request.Request(outer.upstream + self.path, data=body, headers=headers,
                                                 method=self.command)
                try:
                    with urllib.request.urlopen(request, timeout=10) as r:
                        status, payload, kind = r.status, r.read(), r.headers.get("content-type", "")
                except urllib.error.HTTPError as e:
                    status, payload, kind = e.code, e.read(), e.headers.get("content-type", "")
                self.send_response(status)
                self.send_header("content-type", kind)
                self.send_header("content-length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_POST = do_PUT = do_PATCH = do_DELETE = forward

            def do_GET(self):
                doc = outer.docs.get(self.path)
                if doc is None and outer.upstream:
                    return self.forward()
                if doc is None:
                    self.send_response(404)
                    self.end_headers()
                    return
                body = (doc if isinstance(doc, str) else json.dumps(doc)).encode()
                etag = '"' + hashlib.sha1(body).hexdigest() + '"'
                if self.headers.get("if-none-match") == etag:
                    outer.not_modified += 1
                    self.send_response(304)
                    self.end_headers()
                    return
                outer.hits[self.path] = outer.hits.get(self.path, 0) + 1
                self.send_response(200)
                self.send_header("content-type", "application/json")
                self.send_header("etag", etag)
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.base = f"http://127.0.0.1:{self.port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self):
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def site():
    s = Site()
    yield s
    s.stop()


def meta(gw, app_id):
    return json.loads((gw.home / "web" / app_id / "meta.json").read_text())


async def test_web_discover_caches_and_makes_the_app_callable(gw, site, httpbin):
    changed = []

    async def on_message(message):
        if getattr(getattr(message, "root", message), "method", "") == "notifications/tools/list_changed":
            changed.append(1)

    site.upstream = httpbin
    app = web_app("com.example.webapp", site.base, [tool("get", "GET", "/get", {"q": {"type": "string"}})])
    app["app"]["name"] = {"en": "Web App", "zh-CN": "网页应用"}
    site.docs["/.well-known/aai.json"] = app
    async with gw.session(on_message=on_message) as s:
        names = [t.name for t in (await s.list_tools()).tools]
        assert "web_discover" in names and "app_com_example_webapp" not in names
        guide = (await s.call_tool("web_discover", {"url": f"{site.base}/some/page?x=1"})).content[0].text
        assert guide.startswith("# Web App (`com.example.webapp`)")
        m = meta(gw, "com.example.webapp")
        assert m["sourceUrl"] == f"{site.base}/.well-known/aai.json"
        assert m["ttlSecs"] == 86400 and m["etag"].startswith('"') and m["fetchedAt"] > 0
        assert changed, "tools/list_changed was sent"
        assert "app_com_example_webapp" in [t.name for t in (await s.list_tools()).tools]
        assert (await call(s, "com.example.webapp", "get", q="hi"))["args"] == {"q": "hi"}
        await s.call_tool("web_discover", {"url": site.base})
        assert site.hits["/.well-known/aai.json"] == 1, "a fresh cache entry is not fetched again"

    site.stop()
    async with gw.session() as s:  # a new process, the site is down: the cache serves
        assert "app_com_example_webapp" in [t.name for t in (await s.list_tools()).tools]
        r = await s.call_tool("aai_search", {"query": "网页"})
        assert r.structured_content["results"][0]["app"] == "com.example.webapp"


async def test_stale_entries_are_revalidated_or_used_offline(gw, site, httpbin):
    site.upstream = httpbin
    site.docs["/.well-known/aai.json"] = web_app("com.example.stale", site.base, [tool("get", "GET", "/get")])
    async with gw.session() as s:
        await s.call_tool("web_discover", {"url": site.base})
        m = meta(gw, "com.example.stale")
        m["fetchedAt"] -= 2 * 86400
        (gw.home / "web" / "com.example.stale" / "meta.json").write_text(json.dumps(m))
        await s.call_tool("web_discover", {"url": site.base})
        assert site.not_modified == 1 and site.hits["/.well-known/aai.json"] == 1, "revalidated with If-None-Match"
        assert meta(gw, "com.example.stale")["fetchedAt"] > m["fetchedAt"]
        m = meta(gw, "com.example.stale")
        m["fetchedAt"] -= 2 * 86400
        (gw.home / "web" / "com.example.stale" / "meta.json").write_text(json.dumps(m))
        site.stop()
        guide = (await s.call_tool("web_discover", {"url": site.base})).content[0].text
        assert guide.startswith("> The site could not be reached; this is the cached copy")


async def test_bad_sites_and_descriptors_are_reported(gw, site):
    site.docs["/.well-known/aai.json"] = {"schemaVersion": "1.0", "app": {"id": "com.example.bad"}}
    async with gw.session() as s:
        with pytest.raises(MCPError) as e:
            await s.call_tool("web_discover", {"url": site.base})
        assert e.value.error.code == -32007
        pointers = [d["pointer"] for d in e.value.error.data["diagnostics"]]
        assert "/app" in pointers
        with pytest.raises(MCPError) as e:
            await s.call_tool("web_discover", {"url": "http://example.com"})
        assert e.value.error.code == -32005 and "must use https" in e.value.error.data["detail"]
        site.docs.clear()
        with pytest.raises(MCPError) as e:
            await s.call_tool("web_discover", {"url": site.base})
        assert e.value.error.code == -32017


async def test_registry_catalog_is_fetched_and_cached(gw, site, httpbin):
    site.upstream = httpbin
    site.docs["/a.json"] = web_app("com.example.rega", site.base, [tool("get", "GET", "/get")])
    site.docs["/b.json"] = {"not": "a descriptor"}
    site.docs["/c.json"] = web_app("com.example.other", site.base, [tool("get", "GET", "/get")])
    # An entry whose descriptor points its API at another origin is refused too.
    site.docs["/e.json"] = web_app("com.example.rege", httpbin, [tool("get", "GET", "/get")])
    site.docs["/api/v1/apps"] = {"apps": [
        {"appId": "com.example.rega", "name": "A", "descriptor_url": f"{site.base}/a.json"},
        {"appId": "com.example.regb", "name": "B", "descriptor_url": f"{site.base}/b.json"},
        {"appId": "com.example.regc", "name": "C", "descriptor_url": f"{site.base}/c.json"},
        {"appId": "com.example.regd", "name": "D", "descriptor_url": f"{site.base}/missing.json"},
        {"appId": "com.example.rege", "name": "E", "descriptor_url": f"{site.base}/e.json"},
    ]}
    gw.config(enableRegistry=True, registryUrl=site.base)
    async with gw.session() as s:
        import anyio
        with anyio.fail_after(10):
            while "app_com_example_rega" not in [t.name for t in (await s.list_tools()).tools]:
                await anyio.sleep(0.1)
        names = [t.name for t in (await s.list_tools()).tools]
        assert not any(x in n for x in ("regb", "regc", "other", "regd", "rege") for n in names), names
        assert (await call(s, "com.example.rega", "get"))["url"].endswith("/get")
    log = (gw.tmp / "stderr.log").read_text()
    assert "registry entry skipped: com.example.regb" in log
    assert "the catalog lists `com.example.regc` but" in log
    assert "registry entry skipped: com.example.rege" in log and "baseUrl is on" in log
    site.stop()
    async with gw.session() as s:  # offline: the cache still serves the registry's apps
        assert "app_com_example_rega" in [t.name for t in (await s.list_tools()).tools]
        # The refresh runs beside the session; wait for its verdict before closing.
        with anyio.fail_after(10):
            while "the registry could not be read; using the cache" not in (gw.tmp / "stderr.log").read_text():
                await anyio.sleep(0.05)


async def test_aai_exec_takes_a_web_apps_url(gw, site, httpbin):
    site.upstream = httpbin
    site.docs["/.well-known/aai.json"] = web_app("com.example.byurl", site.base, [tool("get", "GET", "/get")])
    async with gw.session() as s:
        r = await s.call_tool("aai_exec", {"app": f"{site.base}/any/page", "tool": "get", "args": {}})
        assert json.loads(r.content[0].text)["url"].endswith("/get")
        assert meta(gw, "com.example.byurl")["sourceUrl"] == f"{site.base}/.well-known/aai.json"
        await s.call_tool("aai_exec", {"app": site.base, "tool": "get", "args": {}})
        assert site.hits["/.well-known/aai.json"] == 1, "the second call uses the cache"


async def test_one_discovery_is_one_reload_of_the_one_app(gw, site):
    """The discovery looks at the files it wrote alone; the watcher, seeing them written,
    reloads nothing (docs/performance.md, "Over a gateway's life")."""
    gw.config(scanInterval=0)
    gw.add_app("com.example.local")
    site.docs["/.well-known/aai.json"] = web_app("com.example.once", site.base,
                                                 [tool("get", "GET", "/get")])
    log = gw.home / "logs" / "aai-gateway.log"
    async with gw.session() as s:
        await s.list_tools()
        await s.call_tool("web_discover", {"url": site.base})
        assert "app_com_example_once" in [t.name for t in (await s.list_tools()).tools]
        # The watcher has seen the cache written (and found nothing to load), and settled.
        with anyio.fail_after(15):
            while "no descriptor changed" not in log.read_text():
                await anyio.sleep(0.1)
        await anyio.sleep(0.5)
        loads = re.findall(r'catalog loaded apps=\d+ (read=\d+ reused=\d+ files="\w+")', log.read_text())
        assert loads == ['read=1 reused=0 files="all"', 'read=1 reused=1 files="touched"'], loads
        assert "no descriptor changed" in log.read_text()
