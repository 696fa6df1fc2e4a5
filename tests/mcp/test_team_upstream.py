"""Each person's own sign-in upstream, in team mode (`web.auth`; docs/team.md, "Whose
sign-in a call uses"): a remote MCP server that signs in the MCP way is reached with the
caller's own tokens, on a connection of their own.

* oauth_mcp_server.py in `people` mode: whoever the test puts at the browser signs in, and
  `whoami` answers with the subject of the token it got.
* alice and bob sign in for themselves (`auth login --person`); their interleaved calls
  each reach the server as their own; carol, who has not, gets AUTH_REQUIRED naming her
  own sign-in, and nothing of hers (or anyone's token for her) reaches the server.
* A sign-in made without `--person` (an admin's, or one from before team mode) is never a
  stand-in for a person; with `apps.<id>.signIn: "shared"` it serves everybody, and
  `--person` is refused.
* The SDK's OAuth example server sees two clients for two people.

Run: python3 -m pytest tests/mcp -q -k team_upstream
"""
import asyncio
import json
import subprocess
import sys
from pathlib import Path

import pytest

from team import TeamIdp, team_config, team_web
from test_http import free_port
from test_store import pg  # noqa: F401  (a fixture)

MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio

HERE = Path(__file__).parent
APP = "dev.remote.people"


@pytest.fixture
def anyio_backend():
    return "asyncio"


def entries(log):
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


class Upstream:
    """The people-mode server, a team IdP and a `--web` gateway in front of both."""

    def __init__(self, gw, tmp_path, sign_in=None):
        self.gw, self.tmp = gw, tmp_path
        self.log = tmp_path / "server.log"
        self.who = tmp_path / "upstream-who"
        self.who.write_text("nobody")
        self.server = subprocess.Popen([sys.executable, str(HERE / "oauth_mcp_server.py"), "people", str(self.log)],
                                       env={"WHO_FILE": str(self.who), "PATH": "/usr/bin:/bin"},
                                       stdout=subprocess.PIPE, text=True)
        self.url = f"http://127.0.0.1:{int(self.server.stdout.readline())}/mcp"
        self.port = free_port()
        self.audience = f"http://127.0.0.1:{self.port}/mcp"
        self.idp = TeamIdp(tmp_path, self.audience)
        team_config(gw, self.idp, self.audience)
        cfg = json.loads((gw.home / "config.json").read_text())
        cfg["credentials"] = {"store": "file"}
        if sign_in:
            cfg["apps"] = {APP: {"signIn": sign_in}}
        (gw.home / "config.json").write_text(json.dumps(cfg))
        gw.put("people", {
            "schemaVersion": "1.0", "version": "1.0.0", "platform": "linux",
            "app": {"id": APP, "name": {"en": "People"}, "defaultLang": "en", "description": "A remote server"},
            "execution": {"type": "mcp", "url": self.url}})

    def login(self, person=None, at_browser=None):
        """`auth login` (for `person`), with `at_browser` signing in upstream."""
        self.who.write_text(at_browser or person or "admin")
        env = self.gw.env(BROWSER=f"{sys.executable} {HERE / 'browser.py'}", BROWSER_LOG=str(self.tmp / "browser.log"))
        args = ["auth", "login", APP, "--yes", *(["--person", person] if person else [])]
        return subprocess.run([str(self.gw.binary), "--home", str(self.gw.home), *args], env=env,
                              capture_output=True, text=True, timeout=60)

    def stored(self):
        path = self.gw.home / "credentials.json"
        return sorted(json.loads(path.read_text())) if path.exists() else []

    def calls(self):
        return [e for e in entries(self.log) if e.get("mcp") == "tools/call"]

    def stop(self):
        self.server.kill()
        self.server.wait()
        self.idp.stop()


@pytest.fixture
def upstream(gw, tmp_path):
    made = []

    def make(**kw):
        made.append(Upstream(gw, tmp_path, **kw))
        return made[-1]
    yield make
    for u in made:
        u.stop()


def session(url, token, name="claude-code"):
    from test_team import session_for
    return session_for(url, token, name)


async def whoami(up, token):
    async with session(up.audience, token) as s:
        r = await s.call_tool("aai_exec", {"app": APP, "tool": "whoami", "args": {}})
        return r.content[0].text


async def auth_required(up, token):
    async with session(up.audience, token) as s:
        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", {"app": APP, "tool": "whoami", "args": {}})
    assert e.value.error.code == -32011, e.value.error  # AUTH_REQUIRED
    return e.value.error


async def test_each_person_acts_upstream_as_themselves(gw, upstream):
    up = upstream()
    tokens = {p: up.idp.token(p, "mcp apps:all") for p in ("alice", "bob", "carol")}
    with team_web(gw, up.port):
        # Before anyone signed in: alice is told it is her own sign-in that is missing,
        # and how to make it; the server heard no token.
        error = await auth_required(up, tokens["alice"])
        assert error.data["person"] == "alice", error.data
        assert error.data["command"] == f"aai-gateway auth login {APP} --person alice"
        assert "your own sign-in" in error.message
        assert not up.calls()
        # alice and bob sign in for themselves, each at their own browser.
        for person in ("alice", "bob"):
            p = up.login(person)
            assert p.returncode == 0, p.stderr
            assert f"signed in to {APP} for {person}" in p.stdout
        assert up.stored() == [f"{APP}~alice", f"{APP}~bob"]
        # 20 calls, interleaved and concurrent: each reaches the server as its caller.
        order = ["alice", "bob"] * 10
        answers = await asyncio.gather(*(whoami(up, tokens[p]) for p in order))
        assert answers == [f"you are {p}" for p in order]
        # The server saw each token only for its own person.
        issued = {e["issued"]["access"]: e["sub"] for e in entries(up.log) if "issued" in e}
        for call in up.calls():
            assert issued[call["token"]] == call["sub"]
        assert sorted(c["sub"] for c in up.calls()) == sorted(order)
        # carol has not signed in: AUTH_REQUIRED, and nothing reached the server for her
        # with anybody's token.
        before = len(up.calls())
        error = await auth_required(up, tokens["carol"])
        assert error.data["person"] == "carol"
        assert len(up.calls()) == before
        # `auth status` names who signed in; bob signs out and is asked again.
        status = gw.run("auth", "status", APP).stdout
        assert "signed in: alice, bob" in status, status
        p = gw.run("auth", "logout", APP, "--person", "bob")
        assert p.returncode == 0 and "for bob" in p.stdout
        await auth_required(up, tokens["bob"])
        assert await whoami(up, tokens["alice"]) == "you are alice"


async def test_a_subject_of_any_characters_gets_an_account_of_its_own(gw, upstream):
    up = upstream()
    odd = "ali~ce#%/ x@y"
    with team_web(gw, up.port):
        p = up.login(odd, at_browser="odd")
        assert p.returncode == 0, p.stderr
        assert up.stored() == [f"{APP}~ali~ce%23%25%2F%20x%40y"]
        assert await whoami(up, up.idp.token(odd, "mcp apps:all")) == "you are odd"
        # Neither "ali" nor the encoded form's look-alike is that person.
        await auth_required(up, up.idp.token("ali", "mcp apps:all"))


async def test_a_sign_in_without_person_stands_in_for_nobody(gw, upstream):
    """An admin's `auth login` (or one made before team mode): people still sign in for
    themselves, and its token never reaches the server for them."""
    up = upstream()
    p = up.login()
    assert p.returncode == 0, p.stderr
    assert up.stored() == [APP]
    with team_web(gw, up.port):
        await auth_required(up, up.idp.token("bob", "mcp apps:all"))
        assert not up.calls()


async def test_a_shared_sign_in_serves_everybody_when_the_app_says_so(gw, upstream):
    up = upstream(sign_in="shared")
    p = up.login("alice")
    assert p.returncode != 0 and "shared sign-in" in p.stderr and "without --person" in p.stderr
    assert up.login().returncode == 0
    with team_web(gw, up.port):
        for person in ("alice", "bob"):
            assert await whoami(up, up.idp.token(person, "mcp apps:all")) == "you are admin"
    assert "shared: everyone uses the sign-in above" in gw.run("auth", "status", APP).stdout


def test_person_is_refused_outside_team_mode_and_for_bad_subjects(gw, upstream):
    up = upstream()
    p = up.login("bad\nname")
    assert p.returncode != 0 and "control characters" in p.stderr
    cfg = json.loads((gw.home / "config.json").read_text())
    del cfg["web"]
    (gw.home / "config.json").write_text(json.dumps(cfg))
    p = up.login("alice")
    assert p.returncode != 0 and "team mode" in p.stderr
    assert up.stored() == []


async def test_the_sdk_oauth_example_sees_two_people(gw, tmp_path):
    """The MCP TypeScript SDK's OAuth-protected example server (its in-memory
    authorization server registers a client per sign-in): alice's and bob's calls arrive
    with two tokens of two clients, each person's own as the store keeps it."""
    import re
    import threading
    from conftest import need_peer
    from test_mcp_oauth import SDK_EXAMPLES
    example = SDK_EXAMPLES / "simpleStreamableHttp.js"
    need_peer(example.exists(), "npm @modelcontextprotocol/sdk (npm ci --prefix tests/mcp/peers)")
    port, auth_port, gw_port = free_port(), free_port(), free_port()
    proc = subprocess.Popen(["node", str(example), "--oauth"], cwd=HERE / "peers",
                            env={**gw.env(), "MCP_PORT": str(port), "MCP_AUTH_PORT": str(auth_port)},
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    seen = []
    try:
        while "MCP Streamable HTTP Server listening" not in proc.stdout.readline():
            assert proc.poll() is None, "the example did not start"
        threading.Thread(target=lambda: seen.extend(iter(proc.stdout.readline, "")), daemon=True).start()
        audience = f"http://127.0.0.1:{gw_port}/mcp"
        idp = TeamIdp(tmp_path, audience)
        team_config(gw, idp, audience)
        cfg = json.loads((gw.home / "config.json").read_text())
        cfg["credentials"] = {"store": "file"}
        (gw.home / "config.json").write_text(json.dumps(cfg))
        gw.put("sdk", {
            "schemaVersion": "1.0", "version": "1.0.0", "platform": "linux",
            "app": {"id": "dev.sdk.oauth", "name": {"en": "SDK"}, "defaultLang": "en", "description": "x"},
            "execution": {"type": "mcp", "url": f"http://localhost:{port}/mcp"}})
        env = gw.env(BROWSER=f"{sys.executable} {HERE / 'browser.py'}", BROWSER_LOG=str(tmp_path / "browser.log"))
        with team_web(gw, gw_port):
            stored = {}
            for person in ("alice", "bob"):
                token = idp.token(person, "mcp apps:all")
                async with session(audience, token) as s:
                    with pytest.raises(MCPError) as e:
                        await s.call_tool("aai_exec", {"app": "dev.sdk.oauth", "tool": "greet", "args": {"name": person}})
                    assert e.value.error.data["person"] == person
                p = subprocess.run([str(gw.binary), "--home", str(gw.home), "auth", "login", "dev.sdk.oauth",
                                    "--person", person, "--yes"], env=env, capture_output=True, text=True, timeout=60)
                assert p.returncode == 0, p.stderr
                grant = json.loads((gw.home / "credentials.json").read_text())[f"dev.sdk.oauth~{person}"]
                stored[person] = (grant["clientId"], grant["tokens"]["accessToken"])
                mark = len(seen)
                async with session(audience, token) as s:
                    r = await s.call_tool("aai_exec", {"app": "dev.sdk.oauth", "tool": "greet", "args": {"name": person}})
                    assert f"Hello, {person}!" in r.content[0].text
                heard = "".join(seen[mark:])
                tokens = set(re.findall(r"token: '([^']+)'", heard))
                clients = set(re.findall(r"clientId: '([^']+)'", heard))
                assert tokens == {stored[person][1]}, (person, tokens)
                assert clients == {stored[person][0]}, (person, clients)
            assert stored["alice"][0] != stored["bob"][0] and stored["alice"][1] != stored["bob"][1]
        idp.stop()
    finally:
        proc.kill()
        proc.wait()


def ui_csrf(page):
    import re
    return re.search(r'name="csrf" value="([^"]+)"', page).group(1)


def ui_post(browser, origin, path, **form):
    import urllib.error
    import urllib.parse
    import urllib.request
    req = urllib.request.Request(origin + path, data=urllib.parse.urlencode(form).encode(), headers={"origin": origin})
    try:
        r = browser.open(req, timeout=30)
        return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def upstream_link(browser, origin, app):
    """Starts `app`'s sign-in in `browser` through the pages; the authorization URL."""
    import html
    import re
    page = browser.open(origin + "/ui/sign-ins", timeout=30).read().decode()
    status, confirm = ui_post(browser, origin, "/ui/sign-ins/start", csrf=ui_csrf(page), app=app)
    assert status == 200 and "sends you to" in confirm, confirm
    issuer = html.unescape(re.search(r'name="issuer" value="([^"]+)"', confirm).group(1))
    status, go = ui_post(browser, origin, "/ui/sign-ins/confirm", csrf=ui_csrf(confirm), app=app, issuer=issuer)
    assert status == 200, go
    return html.unescape(re.search(r'id="go" href="([^"]+)"', go).group(1))


def callback_of(link):
    """Where the upstream authorization server sends the browser back (not followed)."""
    import urllib.error
    import urllib.request

    class Stop(urllib.request.HTTPRedirectHandler):
        def redirect_request(self, *a):
            return None
    try:
        urllib.request.build_opener(Stop).open(link, timeout=30)
    except urllib.error.HTTPError as e:
        assert e.code == 302
        return e.headers["location"]
    raise AssertionError("no redirect")


async def test_people_sign_in_upstream_from_their_own_browser(gw, upstream):
    import urllib.error
    from test_team import ui_browser
    up = upstream()
    origin = up.audience.rsplit("/", 1)[0]
    alice = up.idp.token("alice", "mcp apps:all")
    with team_web(gw, up.port):
        error = await auth_required(up, alice)
        assert error.data["ui"] == f"{origin}/ui/sign-ins?app={APP}", error.data
        # alice, a member, at her own browser: the page, the origins, the link, and the
        # upstream server's sign-in (as "alice-upstream") back to the gateway.
        browser = ui_browser(up.idp, "alice")
        page = browser.open(f"{origin}/ui/sign-ins?app={APP}", timeout=30).read().decode()
        assert "not signed in" in page and APP in page and "All your sign-ins" in page
        link = upstream_link(browser, origin, APP)
        assert f"redirect_uri={origin}/ui/sign-ins/callback".replace(":", "%3A").replace("/", "%2F") in link \
            or "sign-ins%2Fcallback" in link
        up.who.write_text("alice-upstream")
        page = browser.open(link, timeout=30).read().decode()
        assert "Signed in to People" in page and "signed in at http://127.0.0.1" in page, page
        assert up.stored() == [f"{APP}~alice"]
        assert await whoami(up, alice) == "you are alice-upstream"
        # bob cannot finish a sign-in alice started: her callback in his browser is
        # refused (no sign-in of his in progress there), and so it is when he has one.
        link = upstream_link(browser, origin, APP)
        alices = callback_of(link)
        bob = ui_browser(up.idp, "bob")
        bob.open(origin + "/ui", timeout=30).read()
        with pytest.raises(urllib.error.HTTPError) as e:
            bob.open(alices, timeout=30)
        assert e.value.code == 400
        upstream_link(bob, origin, APP)
        with pytest.raises(urllib.error.HTTPError) as e:
            bob.open(alices, timeout=30)
        assert e.value.code == 400 and "not started in this browser" in e.value.read().decode()
        assert f"{APP}~bob" not in up.stored()
        await auth_required(up, up.idp.token("bob", "mcp apps:all"))
        # In a browser shared by both, a sign-in alice started cannot be finished once
        # bob has signed in to the UI there.
        link = upstream_link(browser, origin, APP)
        import urllib.request
        [jar] = [h.cookiejar for h in browser.handlers if isinstance(h, urllib.request.HTTPCookieProcessor)]
        for cookie in [c for c in jar if c.name != "aai_upstream"]:
            jar.clear(cookie.domain, cookie.path, cookie.name)
        (up.idp.key_file.parent / "who").write_text("bob")
        browser.open(origin + "/ui/signin?next=/ui", timeout=30).read()
        with pytest.raises(urllib.error.HTTPError) as e:
            browser.open(link, timeout=30)
        assert e.value.code == 400 and "started by someone else" in e.value.read().decode()
        assert f"{APP}~bob" not in up.stored()
        browser = ui_browser(up.idp, "alice")
        # Signing out takes an app id only (a crafted one must not reach another's row).
        page = browser.open(origin + "/ui/sign-ins", timeout=30).read().decode()
        status, page = ui_post(browser, origin, "/ui/sign-ins/remove", csrf=ui_csrf(page), app=f"{APP}~x")
        assert "not an app id" in page
        # alice signs out from her page.
        page = browser.open(origin + "/ui/sign-ins", timeout=30).read().decode()
        status, page = ui_post(browser, origin, "/ui/sign-ins/remove", csrf=ui_csrf(page), app=APP)
        assert status == 200 and "Signed out" in page
        await auth_required(up, alice)


@pytest.mark.parametrize("offered", [True, False], ids=["exchange", "no-exchange"])
async def test_a_server_that_trusts_the_team_gets_each_persons_token_by_exchange(gw, tmp_path, offered):
    """RFC 8693: the upstream server names the team's authorization server, which offers
    token exchange to the gateway's client: alice and bob act as themselves with no
    sign-in of their own. Without the grant, the same call is AUTH_REQUIRED."""
    up_port, gw_port = free_port(), free_port()
    url, audience = f"http://127.0.0.1:{up_port}/mcp", f"http://127.0.0.1:{gw_port}/mcp"
    exchanges = tmp_path / "exchanges.log"
    idp = TeamIdp(tmp_path, audience, env={"TOKEN_EXCHANGE": "1" if offered else "0", "UPSTREAMS": url,
                                           "EXCHANGE_LOG": str(exchanges)})
    log = tmp_path / "server.log"
    server = subprocess.Popen([sys.executable, str(HERE / "oauth_mcp_server.py"), "team", str(log)],
                              env={"TEAM_ISSUER": idp.base, "PORT": str(up_port), "PATH": "/usr/bin:/bin"},
                              stdout=subprocess.PIPE, text=True)
    try:
        assert int(server.stdout.readline()) == up_port
        team_config(gw, idp, audience)
        cfg = json.loads((gw.home / "config.json").read_text())
        cfg["credentials"] = {"store": "file"}
        (gw.home / "config.json").write_text(json.dumps(cfg))
        gw.put("team-server", {
            "schemaVersion": "1.0", "version": "1.0.0", "platform": "linux",
            "app": {"id": APP, "name": {"en": "Team server"}, "defaultLang": "en", "description": "x"},
            "execution": {"type": "mcp", "url": url}})
        up = type("Up", (), {"audience": audience})
        tokens = {p: idp.token(p, "mcp apps:all") for p in ("alice", "bob")}
        with team_web(gw, gw_port):
            if not offered:
                error = await auth_required(up, tokens["alice"])
                assert error.data["person"] == "alice"
                assert not exchanges.exists()
                return
            order = ["alice", "bob", "alice", "bob"]
            for person in order:
                assert await whoami(up, tokens[person]) == f"you are {person}"
        # One exchange per person (the token is kept), for the server, by the gateway's
        # client; the server saw each person as themselves, never the gateway's audience.
        done = entries(exchanges)
        assert sorted(e["sub"] for e in done) == ["alice", "bob"], done
        assert {(e["resource"], e["client"], e["scope"]) for e in done} == {(url, "aai-ui", "mcp")}
        calls = [e for e in entries(log) if e.get("mcp") == "tools/call"]
        assert [c["sub"] for c in calls] == order
        assert not any(tokens[p] in json.dumps(entries(log)) for p in tokens)
        # Nothing was stored: exchanged tokens live in memory only.
        assert not (gw.home / "credentials.json").exists() or json.loads((gw.home / "credentials.json").read_text()) == {}
    finally:
        server.kill()
        server.wait()
        idp.stop()


async def test_a_persons_resources_are_listed_to_them_alone(gw, upstream):
    """The server lists each person's own resources: the tool everyone's guide shows names
    none of them; each person lists and reads their own through it."""
    up = upstream()
    with team_web(gw, up.port):
        for person in ("alice", "bob"):
            assert up.login(person).returncode == 0
        for person in ("alice", "bob"):
            async with session(up.audience, up.idp.token(person, "mcp apps:all")) as s:
                guide = await s.call_tool("aai_guide", {"app": APP})
                text = json.dumps(guide.model_dump())
                assert "mcp.resources.read" in text and "note://" not in text, text
                mine = await s.call_tool("aai_exec", {"app": APP, "tool": "mcp.resources.read", "args": {}})
                listed = mine.structured_content["resources"]
                assert [r["uri"] for r in listed] == [f"note://{person}/diary"]
                read = await s.call_tool("aai_exec", {"app": APP, "tool": "mcp.resources.read",
                                                      "args": {"uri": f"note://{person}/diary"}})
                assert read.structured_content["contents"][0]["text"] == f"read as {person}"



async def test_a_sign_in_started_on_one_replica_finishes_on_the_other(binary, tmp_path, pg):  # noqa: F811
    """Two replicas on one PostgreSQL store: alice's UI sign-in starts on A (its pending
    client kept in the shared store, sealed) and its callback lands on B; her calls on
    either then use it, and `auth status` lists her."""
    import urllib.parse
    from conftest import Gateway
    from test_store import KEY
    from test_team import ui_browser
    a, b = free_port(), free_port()
    audience = f"http://127.0.0.1:{a}/mcp"
    idp = TeamIdp(tmp_path, audience)
    who = tmp_path / "upstream-who"
    who.write_text("alice")
    log = tmp_path / "server.log"
    server = subprocess.Popen([sys.executable, str(HERE / "oauth_mcp_server.py"), "people", str(log)],
                              env={"WHO_FILE": str(who), "PATH": "/usr/bin:/bin"}, stdout=subprocess.PIPE, text=True)
    url = f"http://127.0.0.1:{int(server.stdout.readline())}/mcp"
    homes = []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        home = Gateway(binary, tmp_path / name)
        home.config(web={"auth": {"issuer": idp.base, "audience": audience, "scopes": ["mcp"], "clientId": "aai-ui"}},
                    enableWebUI=True, store={"url": pg.url(), "timeoutSeconds": 3, "connectTimeoutSeconds": 2})
        home.extra_env["AAI_STORE_KEY"] = KEY
        home.put("people", {
            "schemaVersion": "1.0", "version": "1.0.0", "platform": "linux",
            "app": {"id": APP, "name": {"en": "People"}, "defaultLang": "en", "description": "A remote server"},
            "execution": {"type": "mcp", "url": url}})
        homes.append(home)
    try:
        with team_web(homes[0], a, replica="a"), team_web(homes[1], b, replica="b"):
            origin_a, origin_b = f"http://127.0.0.1:{a}", f"http://127.0.0.1:{b}"
            browser = ui_browser(idp, "alice")
            link = upstream_link(browser, origin_a, APP)
            landed = callback_of(link)
            assert landed.startswith(origin_a + "/ui/sign-ins/callback?"), landed
            page = browser.open(origin_b + landed[len(origin_a):], timeout=30).read().decode()
            assert "Signed in to People" in page, page
            token = idp.token("alice", "mcp apps:all")
            for origin in (origin_a, origin_b):
                up = type("Up", (), {"audience": origin + "/mcp"})
                assert await whoami(up, token) == "you are alice"
            status = homes[0].run("auth", "status", APP)
            assert "signed in: alice" in status.stdout, status.stdout + status.stderr
    finally:
        server.kill()
        server.wait()
        idp.stop()
