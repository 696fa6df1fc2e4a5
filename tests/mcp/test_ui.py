"""The web UI at /ui, in real headless Chromium (Debian's `chromium` driven by npm
`playwright-core`, tests/mcp/ui/drive.mjs): a screenshot of every page goes to
target/ui-screenshots/; a pending call approved in the UI completes; an API key entered
in the UI makes the next call succeed; a history filter narrows the list; a POST without
the CSRF token is refused; a grant revoked in the UI asks again. Without a browser: the
stdio server's UI on httpPort, the UI link in CONSENT_REQUIRED, Host/Origin and token
checks on /ui.

Run: python3 -m pytest tests/mcp -q -k ui
"""
import json
import os
import re
import shutil
import subprocess
from pathlib import Path

import anyio
import pytest

from conftest import need_peer
from test_auth import auth_set
from test_http import free_port, httpbin, tool, web_app  # noqa: F401  (httpbin is a fixture)
from test_http_transport import web

MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]
DRIVER = Path(__file__).with_name("ui") / "drive.mjs"
SHOTS = ROOT / "target" / "ui-screenshots"
CHROMIUM = os.environ.get("CHROMIUM", "/usr/bin/chromium")
KEY = "ui-k3y-5ecr3t-value"


def browser_ready():
    need_peer(Path(CHROMIUM).exists(), f"Chromium at {CHROMIUM} (apt chromium)")
    need_peer((DRIVER.parent / "node_modules" / "playwright-core").is_dir(),
              "npm playwright-core in tests/mcp/ui (npm ci --prefix tests/mcp/ui)")


def drive(flow, ui, *args, timeout=90, refused=False):
    """Runs one browser flow; its JSON answer. `refused`: the flow expects a 403 (which the
    browser logs as a console error)."""
    browser_ready()
    p = subprocess.run(["node", str(DRIVER), flow, ui, str(SHOTS), *args], capture_output=True,
                       text=True, timeout=timeout)
    assert p.returncode == 0, f"browser flow {flow} failed:\n{p.stderr}"
    seen = json.loads(p.stdout.strip().splitlines()[-1])
    problems = seen.pop("problems")
    if refused:
        problems = [p for p in problems if "403" not in p]
    assert problems == [], "the page logged errors (CSP, scripts)"
    return seen


def ui_of(url):
    return url.removesuffix("/mcp") + "/ui"


async def http_session(url):
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    return streamable_http_client(url), ClientSession


async def call_over_http(url, tool_name="echo", app="com.example.echo", args=None, name="ui-test"):
    """One aai_exec over HTTP from a client that cannot be asked (no elicitation); its
    result, or the MCPError it failed with."""
    from mcp import ClientSession, types
    from mcp.client.streamable_http import streamable_http_client
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write, client_info=types.Implementation(name=name, version="1")) as s:
            await s.initialize()
            try:
                return await s.call_tool("aai_exec", {"app": app, "tool": tool_name,
                                                      "args": {"text": "hi"} if args is None else args})
            except MCPError as e:
                return e


def post(url, data):
    import httpx2
    return httpx2.post(url, data=data, timeout=10, follow_redirects=False)


def get(url, **kw):
    import httpx2
    return httpx2.get(url, timeout=10, follow_redirects=False, **kw)


def csrf_of(page):
    return re.search(r'name="csrf" value="([^"]+)"', page).group(1)


def keyed_app(base):
    app = web_app("com.example.keyed", base, [tool("bearer", "GET", "/bearer")])
    app["auth"] = {"type": "apiKey", "apiKey": {"location": "header", "name": "Authorization",
                                                "prefix": "Bearer", "obtainUrl": "https://example.com/keys"}}
    return app


async def test_every_page_renders_in_chromium(gw, httpbin):
    gw.add_app("com.example.echo")
    gw.add_app("com.example.notes")
    gw.put("com.example.keyed", keyed_app(httpbin))
    (gw.home / "com.example.broken").mkdir()
    (gw.home / "com.example.broken" / "aai.json").write_text('{"schemaVersion": "1.0", "app": ')
    gw.config(credentials={"store": "file"}, consent={"mode": "prompt"})
    assert gw.run("call", "com.example.echo", "echo", '{"text": "first"}').returncode == 0
    assert gw.run("call", "com.example.echo", "fail", "{}").returncode != 0
    assert gw.run("consent", "grant", "com.example.notes", "--start", "--caller", "claude-code@stdio").returncode == 0
    with web(gw) as (url, _):
        ui = ui_of(url)
        pages = [["dashboard", "/ui"], ["apps", "/ui/apps"], ["apps-search", "/ui/apps?q=notes"],
                 ["app", "/ui/apps/com.example.echo"], ["history", "/ui/history"],
                 ["call", "/ui/history/1"], ["consent", "/ui/consent"], ["credentials", "/ui/credentials"],
                 ["config", "/ui/config"]]
        seen = drive("pages", ui.removesuffix("/ui"), json.dumps(pages))
    for name, _ in pages:
        assert seen[name]["status"] == 200, (name, seen[name])
        assert (SHOTS / f"{name}.png").stat().st_size > 5000, name
    dashboard = " ".join(seen["dashboard"]["text"].split())
    # Three apps of the test and the gateway's own, `aai`.
    for figure in ["4 apps served", "1 broken or unusable", "2 calls in 24 h", "1 errors in 24 h"]:
        assert figure in dashboard, dashboard
    assert "com.example.broken" in seen["apps"]["text"] and "invalid JSON" in seen["apps"]["text"]
    assert "com.example.notes" in seen["apps-search"]["text"]
    assert "com.example.echo" not in seen["apps-search"]["text"]
    assert '"text"' in seen["app"]["text"] and "Guide" in seen["app"]["text"]
    assert "first" in seen["call"]["text"] and "aai-gateway@cli" in seen["call"]["text"]
    assert "claude-code@stdio" in seen["consent"]["text"]
    assert "com.example.keyed" in seen["credentials"]["text"] and "apiKey" in seen["credentials"]["text"]
    config = seen["config"]["text"]
    assert re.search(r"consent\.mode\s+prompt\s+\S*config\.json", config), config
    # `--web --listen` chose the port: the page says the real one, and the setting.
    assert re.search(r"httpPort\s+\d+\s+listening \(the setting is 3000\)", config), config


async def test_a_pending_call_approved_in_the_ui_completes(gw):
    gw.add_app("com.example.echo")
    gw.config(consent={"mode": "prompt", "waitSeconds": 60})
    with web(gw) as (url, _):
        ui = ui_of(url)
        base = ui.removesuffix("/ui")
        async with anyio.create_task_group() as tg:
            answer = {}

            async def approve():
                answer.update(await anyio.to_thread.run_sync(drive, "approve", base + "/ui", "Allow once"))
            tg.start_soon(approve)
            r = await call_over_http(url)
        assert answer["state"] == "waiting" and "goes on" in answer["flash"], answer
        assert json.loads(r.content[0].text)["echo"]["text"] == "hi"
        assert answer["left"] == 0
        # "Always allow this tool": remembered; the next call runs without asking.
        async with anyio.create_task_group() as tg:
            tg.start_soon(anyio.to_thread.run_sync, drive, "approve", base + "/ui", "Always allow this tool")
            await call_over_http(url)
        with anyio.fail_after(10):
            await call_over_http(url)
        # Revoked in the UI: the next call asks again (and is denied in the UI).
        revoked = drive("revoke", base + "/ui", "ui-test@http")
        # The caller's grant goes; the adapter's start, allowed with it, stays.
        assert "Revoked 1 grant" in revoked["flash"] and revoked["grants"] == 1
        async with anyio.create_task_group() as tg:
            denied = {}

            async def deny():
                denied.update(await anyio.to_thread.run_sync(drive, "approve", base + "/ui", "Deny"))
            tg.start_soon(deny)
            e = await call_over_http(url)
        assert denied["state"] == "waiting"
        assert isinstance(e, MCPError) and e.error.code == -32004 and "denied" in e.error.message, e
    history = json.loads(gw.run("history", "--json").stdout)["calls"]
    assert [c["status"] for c in history[:2]] == ["error", "ok"]


async def test_an_api_key_entered_in_the_ui_makes_the_next_call_succeed(gw, httpbin):
    gw.put("com.example.keyed", keyed_app(httpbin))
    gw.config(credentials={"store": "file"})
    with web(gw) as (url, _):
        e = await call_over_http(url, "bearer", "com.example.keyed", {})
        assert isinstance(e, MCPError) and e.error.code == -32011, e
        saved = drive("apikey", ui_of(url), "com.example.keyed", KEY)
        assert saved["before"] == "no" and saved["after"] == "yes", saved
        assert KEY not in saved["html"], "a stored value is never shown"
        r = await call_over_http(url, "bearer", "com.example.keyed", {})
        assert json.loads(r.content[0].text)["token"] == KEY
        page = get(ui_of(url) + "/history").text
        assert KEY not in page
    for path in gw.home.rglob("state.db*"):
        assert KEY.encode() not in path.read_bytes(), path
    for path in (gw.home / "logs").rglob("*"):
        assert KEY not in path.read_text(errors="replace"), path


async def test_a_history_filter_narrows_the_list(gw):
    gw.add_app("com.example.echo")
    gw.add_app("com.example.notes")
    for app, text in [("com.example.echo", "one"), ("com.example.notes", "two"), ("com.example.echo", "three")]:
        assert gw.run("call", app, "echo", json.dumps({"text": text})).returncode == 0
    with web(gw) as (url, _):
        seen = drive("filter", ui_of(url), "com.example.notes")
    assert seen["before"] == 3 and seen["after"] == 1 and seen["apps"] == ["com.example.notes"], seen
    assert '"two"' in seen["detail"], "the detail view shows the request"


async def test_a_post_without_the_csrf_token_is_refused(gw):
    gw.add_app("com.example.echo")
    with web(gw) as (url, _):
        ui = ui_of(url)
        seen = drive("csrf", ui, "com.example.echo", refused=True)
        assert seen["status"] == 403 and "CSRF" in seen["text"]
        token = csrf_of(get(ui + "/consent").text)
        forms = {"/consent/answer": {"id": "1", "choice": "once"},
                 "/consent/grant": {"caller": "x@http", "app": "com.example.echo"},
                 "/consent/revoke": {"caller": "x@http", "app": "com.example.echo", "tool": "*"},
                 "/credentials/set": {"app": "com.example.echo", "secret": "v"},
                 "/credentials/remove": {"app": "com.example.echo"},
                 "/credentials/login": {"app": "com.example.echo"}, "/rescan": {"back": "/ui"}}
        for path, form in forms.items():
            for bad in [None, "", token[:-1] + ("A" if token[-1] != "A" else "B")]:
                data = dict(form, **({} if bad is None else {"csrf": bad}))
                assert post(ui + path, data).status_code == 403, (path, bad)
        # With the token the same form works.
        r = post(ui + "/consent/grant", {"csrf": token, "caller": "x@http", "app": "com.example.echo"})
        assert r.status_code == 303
    grants = json.loads(gw.run("consent", "list", "--json").stdout)["grants"]
    assert [g["caller"] for g in grants] == ["x@http"], "the forged grant was not made"


async def test_host_origin_and_token_guard_the_ui(gw):
    gw.add_app("com.example.echo")
    with web(gw) as (url, _):
        ui = ui_of(url)
        assert get(ui, headers={"Host": "evil.example"}).status_code == 403
        assert get(ui, headers={"Host": "evil.example:80"}).status_code == 403
        token = csrf_of(get(ui).text)
        import httpx2
        r = httpx2.post(ui + "/rescan", data={"csrf": token}, headers={"Origin": "http://evil.example"})
        assert r.status_code == 403, "a cross-site form post is refused before the CSRF check"
        assert get(ui + "/style.css").headers["content-type"].startswith("text/css")
        headers = get(ui).headers
        assert "frame-ancestors 'none'" in headers["content-security-policy"]
        # A link cannot put words in the UI's mouth: messages travel as one-time numbers.
        assert "Hacked" not in get(ui + "/consent?flash=Hacked").text
        # `back` only leads within the UI.
        r = post(ui + "/rescan", {"csrf": token, "back": "//evil.example/x"})
        assert r.headers["location"].startswith("/ui?flash=")
    secret = "ui-bearer-t0ken-long-enough"
    with web(gw, token=secret) as (url, _):
        ui = ui_of(url)
        r = get(ui)
        assert r.status_code == 303 and r.headers["location"] == "/ui/login"
        assert get(ui, headers={"Authorization": f"Bearer {secret}"}).status_code == 200
        assert post(ui + "/login", {"token": "wrong"}).status_code == 401
        r = post(ui + "/login", {"token": secret})
        assert r.status_code == 303
        cookie = r.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=Strict" in cookie
        assert secret not in cookie, "the cookie is derived from the token, not the token"
        value = cookie.split(";")[0].split("=", 1)[1]
        jar = {"aai_token": value}
        assert get(ui + "/consent", cookies={"aai_token": secret}).status_code == 303
        assert get(ui + "/consent", cookies=jar).status_code == 200
        assert get(ui + "/consent", cookies={"aai_token": "wrong"}).status_code == 303
        # The cookie opens the UI only, never MCP, not even as a bearer token.
        import httpx2
        for extra in [{"cookies": jar}, {"headers": {"Authorization": f"Bearer {value}"}}]:
            headers = {"content-type": "application/json", "accept": "application/json, text/event-stream",
                       **extra.get("headers", {})}
            r = httpx2.post(url, content=b"{}", cookies=extra.get("cookies"), headers=headers)
            assert r.status_code == 401


async def test_the_stdio_server_serves_the_ui_and_links_to_it(gw):
    gw.add_app("com.example.echo")
    port = free_port()
    gw.config(httpPort=port, consent={"mode": "prompt"})
    async with gw.session(client_name="linked") as s:
        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "echo", "args": {"text": "x"}})
        err = e.value.error
        assert err.code == -32014
        link = err.data["ui"]
        assert link.startswith(f"http://127.0.0.1:{port}/ui/consent?pending="), link
        assert link in err.data["detail"], err.data
        page = get(link).text
        m = re.search(r'<tr id="pending-(\d+)" class="highlight"', page)
        assert m, "the linked call is highlighted"
        assert "linked@stdio" in page and "refused; approve its retry" in page
        # Approving the refused call lets its retry run once.
        r = post(f"http://127.0.0.1:{port}/ui/consent/answer",
                 {"csrf": csrf_of(page), "id": m.group(1), "choice": "once"})
        assert r.status_code == 303
        await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "echo", "args": {"text": "x"}})
        with pytest.raises(MCPError):
            await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "echo", "args": {"text": "x"}})
        assert get(f"http://127.0.0.1:{port}/mcp").status_code == 404, "stdio serves MCP on stdio only"
    log = (gw.home / "logs" / "aai-gateway.log").read_text()
    assert f"serving the web UI on http://127.0.0.1:{port}/ui" in log


async def test_a_taken_port_moves_the_ui_to_the_next_one(gw):
    import socket
    gw.add_app("com.example.echo")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        gw.config(httpPort=port)
        async with gw.session() as s:
            await s.list_tools()
            log = (gw.home / "logs" / "aai-gateway.log").read_text()
            m = re.search(r"serving the web UI on (http://127\.0\.0\.1:(\d+)/ui)", log)
            assert m and int(m.group(2)) != port, log
            assert get(m.group(1)).status_code == 200


async def test_enable_web_ui_false_serves_nothing(gw):
    gw.add_app("com.example.echo")
    port = free_port()
    gw.config(httpPort=port, enableWebUI=False)
    async with gw.session() as s:
        await s.list_tools()
        import httpx2
        with pytest.raises(httpx2.ConnectError):
            get(f"http://127.0.0.1:{port}/ui")


async def test_hostile_names_are_escaped_everywhere(gw):
    """Descriptor text, caller names and recorded arguments reach pages only escaped, and
    a `javascript:` link is never offered."""
    x = '<script>alert(1)</script>"\'><img src=x onerror=alert(2)>'
    app = web_app("com.example.evil", "http://127.0.0.1:9", [tool("get", "GET", "/get", {"q": {"type": "string"}})])
    app["app"]["name"] = {"en": "Evil " + x}
    app["app"]["description"] = "desc " + x
    app["tools"][0]["description"] = "tool " + x
    app["auth"] = {"type": "apiKey", "apiKey": {"location": "header", "name": "Authorization", "prefix": "Bearer",
                                                "obtainUrl": "javascript:alert(3)", "instructions": {"short": x}}}
    gw.put("com.example.evil", app)
    gw.config(credentials={"store": "file"}, consent={"mode": "prompt"})
    gw.run("call", "com.example.evil", "get", json.dumps({"q": x}))
    with web(gw) as (url, _):
        await call_over_http(url, "get", "com.example.evil", {"q": x}, name=x)
        ui = ui_of(url)
        for path in ["", "/apps", "/apps/com.example.evil", "/credentials", "/history", "/history/1",
                     "/consent", "/config", "/apps/" + x, "/history?app=" + x]:
            page = get(ui + path).text
            assert "<script" not in page and "<img" not in page, path
            assert 'href="javascript' not in page, path


async def test_a_link_cannot_pre_fill_a_grant_or_break_an_answer(gw):
    gw.add_app("com.example.echo")
    with web(gw) as (url, _):
        ui = ui_of(url)
        page = get(ui + "/consent?caller=evil%40stdio&app=com.example.echo&tool=echo").text
        assert "evil@stdio" not in page and 'value="com.example.echo"' not in page
        token = csrf_of(get(ui).text)
        # A `back` that is no header value: the action's answer is still a redirect.
        r = post(ui + "/rescan", {"csrf": token, "back": "/ui/apps\x01x"})
        assert r.status_code == 303 and r.headers["location"].startswith("/ui?flash="), r.status_code


async def test_a_tool_runs_from_its_app_page(gw):
    """The app page has a form per tool, built from its schema; running it goes through
    the pipeline as the user at the UI (validated, recorded as web-ui@ui)."""
    gw.add_app("com.example.echo")
    gw.config(consent={"mode": "prompt"})
    with web(gw) as (url, _):
        app_url = ui_of(url) + "/apps/com.example.echo"
        page = get(app_url).text
        assert 'name="arg.text"' in page and 'name="type.n" value="integer"' in page, page
        csrf = csrf_of(page)
        ran = post(app_url + "/try", {"csrf": csrf, "tool": "echo", "type.text": "text", "arg.text": "from the ui",
                                      "type.n": "integer", "arg.n": "2", "type.delay": "number", "arg.delay": ""})
        assert ran.status_code == 200 and "The tool ran." in ran.text, ran.text
        assert "from the ui" in ran.text and "&#34;n&#34;: 2" in ran.text, ran.text
        # A field that is not what its type says is refused before anything runs.
        bad = post(app_url + "/try", {"csrf": csrf, "tool": "echo", "type.n": "integer", "arg.n": "two",
                                      "arg.text": "x"})
        assert bad.status_code == 303
        assert "must be a whole number" in get(url.removesuffix("/mcp") + bad.headers["location"]).text
        # The schema still decides: a missing required field fails like any call.
        failed = post(app_url + "/try", {"csrf": csrf, "tool": "echo", "json": "{}"})
        assert "The call failed." in failed.text and "INVALID_PARAMS" in failed.text, failed.text
        assert post(app_url + "/try", {"tool": "echo", "arg.text": "x"}).status_code == 403
    calls = json.loads(gw.run("history", "--json").stdout)["calls"]
    assert [(c["caller"], c["status"]) for c in calls] == [("web-ui@ui", "error"), ("web-ui@ui", "ok")]


async def test_pages_follow_pending_consent_and_show_the_real_port(gw):
    gw.add_app("com.example.echo")
    gw.config(consent={"mode": "prompt"})
    # A broken descriptor with 14 errors: 10 are shown, the rest counted.
    gw.put("com.example.broken", {"schemaVersion": "1.0", "version": "1.0.0", "platform": "linux",
                                  "app": {"id": "com.example.broken", "name": {"en": "B"}},
                                  "execution": {"type": "stdio", "command": "x"},
                                  "tools": [{"name": f"t{i}", "parameters": {"type": 7}} for i in range(14)]})
    port = free_port()
    with web(gw, listen=f"127.0.0.1:{port}") as (url, _):
        ui = f"http://127.0.0.1:{port}/ui"
        consent = get(ui + "/consent").text
        assert 'http-equiv="refresh"' not in consent, "nothing pending: no reload under the grant form"
        assert 'http-equiv="refresh" content="10"' in get(ui).text
        e = await call_over_http(f"http://127.0.0.1:{port}/mcp")
        assert isinstance(e, MCPError) and e.error.code == -32014
        assert 'http-equiv="refresh" content="3"' in get(ui + "/consent").text
        assert 'http-equiv="refresh" content="3"' in get(ui).text
        config = get(ui + "/config").text
        assert f"<td><code>{port}</code></td>" in config and "listening (the setting is 3000)" in config, config
        apps = get(ui + "/apps").text
        assert re.search(r"… and \d+ more \(`aai-gateway validate", apps), apps
        assert "(UTC)" not in get(ui + "/history").text


async def test_without_a_secret_service_the_credential_form_says_the_way_forward(gw):
    """No Secret Service on the session bus (the test environment names none) and the
    default store: the form's refusal says what to start, or to keep credentials in a
    file, as the command line does."""
    gw.put("com.example.keyed", keyed_app("http://127.0.0.1:9"))
    import html
    with web(gw) as (url, _):
        ui = ui_of(url)
        # The page says it before anything is typed: what to set, and in which file.
        form = html.unescape(get(ui + "/credentials").text)
        notice = re.search(r'<p class="flash bad" id="store-problem">(.*?)</p>', form, re.S)
        assert notice, form
        assert "Start a Secret Service" in notice[1], notice[1]
        assert '"credentials": {"store": "file"} in config.json' in notice[1], notice[1]
        assert f"This gateway's config file: {gw.home / 'config.json'}" in notice[1], notice[1]
        token = csrf_of(form)
        r = post(ui + "/credentials/set", {"csrf": token, "app": "com.example.keyed", "secret": "k-123"})
        assert r.status_code == 303, r
        page = html.unescape(get(url.removesuffix("/mcp") + r.headers["location"]).text)
    assert "Not saved" in page, page
    assert "Start a Secret Service" in page and '"credentials": {"store": "file"} in config.json' in page, page
    assert str(gw.home / "config.json") in page, page
    assert "k-123" not in page
