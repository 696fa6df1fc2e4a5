"""Managing apps from the chat (docs/manage.md): the gateway's own app `aai` imports an MCP
server, an OpenAPI document, a skill or an aai.json (a preview writes nothing; a confirmed
import asks the user, then writes), hides and shows apps and tools per client, removes
apps to the trash and restores them. The CLI's `apps` commands do the same.

Run: python3 -m pytest tests/mcp -q -k manage
"""
import contextlib
import json
import sys
from pathlib import Path

import pytest

from test_auth import start_keyring
from test_http_transport import web

MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio

MARKER_SERVER = Path(__file__).with_name("marker_server.py")


def snippet(marker):
    return {"mcpServers": {"marker": {"command": sys.executable,
                                      "args": [str(MARKER_SERVER), str(marker)],
                                      "env": {"MARKER_TOKEN": "tok-secret-123"}}}}


def answering(decisions, asked):
    """An elicitation callback that records each question and answers the next decision."""
    from mcp import types

    async def answer(context, params):
        asked.append(params.message)
        decision = decisions.pop(0) if decisions else "deny"
        if decision in ("decline", "cancel"):
            return types.ElicitResult(action=decision)
        return types.ElicitResult(action="accept", content={"decision": decision})
    return answer


async def call(s, which, **args):
    return await s.call_tool("aai_exec", {"app": "aai", "tool": which, "args": args})


async def error_of(coro):
    with pytest.raises(MCPError) as e:
        await coro
    return e.value.error


def structured(result):
    return json.loads(result.content[0].text)


@contextlib.asynccontextmanager
async def client(url, name, elicitation=None):
    from mcp import ClientSession, types
    from mcp.client.streamable_http import streamable_http_client
    extra = {"elicitation_callback": elicitation} if elicitation else {}
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write, client_info=types.Implementation(name=name, version="1"),
                                 **extra) as s:
            await s.initialize()
            yield s


@pytest.fixture
def kgw(gw, bus, tmp_path):
    """A gateway with a real Secret Service (gnome-keyring) for the imported credentials."""
    gw.extra_env = bus.env()
    start_keyring(bus, tmp_path)
    return gw


async def test_an_agent_imports_uses_hides_and_removes_a_server_while_another_client_watches(kgw, tmp_path):
    """The issue's whole conversation: find, preview, import (approved once), use, hide one
    tool from itself, remove; another client connected at the same time never sees the
    hidden tool."""
    gw = kgw
    marker = tmp_path / "marker"
    gw.config(consent={"mode": "prompt"})
    asked = []
    with web(gw) as (url, _):
        async with client(url, "agent-a", answering(["once"] * 5, asked)) as a, \
                client(url, "agent-b", answering(["once"] * 3, [])) as b:
            # Found by what it does.
            found = (await a.call_tool("aai_search", {"query": "import mcp server"})).structured_content["results"]
            assert found[0]["app"] == "aai", found
            # Preview: nothing written, nothing run, nothing asked.
            preview = structured(await call(a, "import", source=snippet(marker)))
            assert preview["preview"] is True and preview["written"] == []
            app = preview["apps"][0]
            assert app["app"] == "mcp.marker" and any(str(MARKER_SERVER) in r for r in app["reaches"]), app
            assert app["credentials"] == ["MARKER_TOKEN"], app
            assert "tok-secret-123" not in json.dumps(preview)
            assert not (gw.home / "mcp.marker").exists() and not marker.exists() and asked == []
            # Confirmed: asked once, with what is written and what the first use runs.
            done = structured(await call(a, "import", source=snippet(marker), confirm=True,
                                         summary="Leaves marks", visibleTo=["agent-a", "agent-b"]))
            assert done["imported"][0]["app"] == "mcp.marker"
            assert len(asked) == 1 and "writes " + str(gw.home / "mcp.marker") in asked[0], asked
            assert str(MARKER_SERVER) in asked[0] and "MARKER_TOKEN" in asked[0], asked
            assert "tok-secret-123" not in asked[0]
            written = json.loads((gw.home / "mcp.marker" / "aai.json").read_text())
            assert written["app"]["description"] == "Leaves marks"
            assert "tok-secret-123" not in json.dumps(written)
            assert not marker.exists(), "the import started the server"
            # Used: the start was approved with the import; the call asks as any call does.
            hello = await a.call_tool("aai_exec", {"app": "mcp.marker", "tool": "hello", "args": {"name": "x"}})
            assert hello.content[0].text == "hello x"
            # One question: the start was allowed with the import, and is named (not
            # asked about again) so that an "always" would cover the command too.
            assert len(asked) == 2 and "this will first" not in asked[1], asked
            assert f"it runs `{sys.executable} {MARKER_SERVER}" in asked[1], asked
            # The stored credential reached the server.
            env = await a.call_tool("aai_exec", {"app": "mcp.marker", "tool": "env", "args": {"name": "MARKER_TOKEN"}})
            assert env.content[0].text == "tok-secret-123"
            # Hide one tool from itself.
            hidden = structured(await call(a, "disable", app="mcp.marker", tool="env"))
            assert hidden["hidden"]["client"] == "agent-a"
            guide_a = (await a.call_tool("aai_guide", {"app": "mcp.marker"})).content[0].text
            guide_b = (await b.call_tool("aai_guide", {"app": "mcp.marker"})).content[0].text
            assert "hello" in guide_a and "`env`" not in guide_a and "env" in guide_b, guide_a
            err = await error_of(a.call_tool("aai_exec", {"app": "mcp.marker", "tool": "env", "args": {"name": "X"}}))
            assert err.data["type"] == "TOOL_NOT_FOUND", err
            env_b = await b.call_tool("aai_exec", {"app": "mcp.marker", "tool": "env", "args": {"name": "MARKER_TOKEN"}})
            assert env_b.content[0].text == "tok-secret-123"
            # Remove: to the trash, gone for both.
            removed = structured(await call(a, "remove", app="mcp.marker"))
            assert removed["undo"] == "aai-gateway apps restore mcp.marker"
            assert not (gw.home / "mcp.marker").exists()
            for s in (a, b):
                err = await error_of(s.call_tool("aai_guide", {"app": "mcp.marker"}))
                assert err.data["type"] == "APP_NOT_FOUND"
            trash = json.loads(gw.run("apps", "list", "--json", check=True).stdout)["trash"]
            assert trash[0]["app"] == "mcp.marker"
            # The CLI undoes it.
            gw.run("apps", "restore", "mcp.marker", check=True)
            assert (gw.home / "mcp.marker" / "aai.json").is_file()
    history = gw.run("history", "--app", "aai", "--json", check=True).stdout
    assert "tok-secret-123" not in history
    assert [c["tool"] for c in json.loads(history)["calls"]][::-1] == ["import", "import", "disable", "remove"]


@pytest.mark.parametrize("answer", ["deny", "decline", "cancel"])
async def test_a_refused_import_writes_and_runs_nothing(gw, tmp_path, answer):
    marker = tmp_path / "marker"
    gw.config(consent={"mode": "prompt"})
    asked = []
    async with gw.session(elicitation=answering([answer], asked), client_name="agent-r") as s:
        err = await error_of(call(s, "import", source=snippet(marker), confirm=True))
        # A cancel is no answer (CONSENT_REQUIRED: how to approve it in the web UI).
        assert err.data["type"] == ("CONSENT_REQUIRED" if answer == "cancel" else "PERMISSION_DENIED"), err
        assert len(asked) == 1
    assert not (gw.home / "mcp.marker").exists() and not marker.exists()
    assert not (gw.home / "apps.json").exists()


async def test_an_always_answer_is_not_kept_for_changes(gw, tmp_path):
    """Every tool of `aai` asks each time, whatever the answer before; remove and restore
    through MCP."""
    gw.config(consent={"mode": "prompt"})
    gw.add_app("com.example.echo")
    asked = []
    async with gw.session(elicitation=answering(["tool", "app", "tool", "app", "deny"], asked),
                          client_name="agent-t") as s:
        await call(s, "disable", app="com.example.echo", tool="sleep")
        await call(s, "enable", app="com.example.echo", tool="sleep")
        await call(s, "remove", app="com.example.echo")
        assert "moves " + str(gw.home / "com.example.echo") in asked[2], asked
        assert not (gw.home / "com.example.echo").exists()
        restored = structured(await call(s, "restore", app="com.example.echo"))
        assert restored["restored"] == "com.example.echo"
        assert (gw.home / "com.example.echo" / "aai.json").is_file()
        # Refused: nothing moves.
        err = await error_of(call(s, "remove", app="com.example.echo"))
        assert err.data["type"] == "PERMISSION_DENIED"
        assert (gw.home / "com.example.echo" / "aai.json").is_file()
    assert len(asked) == 5, asked
    grants = gw.run("consent", "list", "--json", check=True).stdout
    assert '"aai"' not in grants, grants


async def test_imports_of_an_openapi_document_a_skill_and_a_descriptor(gw, tmp_path):
    """A path or URL: told by its content; a preview lists the tools."""
    import http.server
    import threading
    figma = Path(__file__).parents[1] / "fixtures" / "openapi" / "figma.yaml"
    skill = tmp_path / "skill-src"
    (skill / "reference").mkdir(parents=True)
    (skill / "SKILL.md").write_text("---\nname: Pdf Tools\ndescription: Fill PDF forms\n---\n# PDF\n")
    (skill / "reference" / "forms.md").write_text("Fields")
    (skill / "link").symlink_to("/etc/passwd")
    descriptor = {"schemaVersion": "1.0", "version": "1.0.0", "platform": "linux",
                  "app": {"id": "com.example.served", "name": {"en": "Served"}, "defaultLang": "en",
                          "description": "From a URL"},
                  "execution": {"type": "http", "baseUrl": "https://api.example.com"},
                  "tools": [{"name": "ping", "description": "Ping", "parameters": {"type": "object"},
                             "execution": {"path": "/ping", "method": "GET"}}]}
    body = json.dumps(descriptor).encode()

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_GET(self):
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *a):
            pass
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    gw.config(consent={"mode": "prompt"})
    asked = []
    try:
        async with gw.session(elicitation=answering(["once"] * 3, asked), client_name="agent-i") as s:
            p = structured(await call(s, "import", source=str(figma)))["apps"][0]
            assert p["kind"] == "openapi" and "getFile" in p["tools"], p
            assert p["reaches"] == ["send requests to https://api.figma.com"], p
            p = structured(await call(s, "import", source=str(skill)))["apps"][0]
            assert p["app"] == "skill.pdf-tools" and p["tools"] == ["read"], p
            url = f"http://127.0.0.1:{server.server_address[1]}/aai.json"
            p = structured(await call(s, "import", source=url))["apps"][0]
            assert p["app"] == "com.example.served", p
            assert p["reaches"] == ["send requests to https://api.example.com"], p
            assert asked == [] and not (gw.home / "skills").exists()
            await call(s, "import", source=str(skill), confirm=True)
            await call(s, "import", source=url, confirm=True)
            read = await s.call_tool("aai_exec", {"app": "skill.pdf-tools", "tool": "read",
                                                  "args": {"file": "reference/forms.md"}})
            assert read.content[0].text == "Fields"
            assert not (gw.home / "skills" / "pdf-tools" / "link").exists()
            found = (await s.call_tool("aai_search", {"query": "served"})).structured_content["results"]
            assert found[0]["app"] == "com.example.served"
            # Installed already: refused, nothing replaced.
            err = await error_of(call(s, "import", source=str(skill)))
            assert "installed already" in err.message
    finally:
        server.shutdown()


async def test_bad_sources_get_clear_errors_and_nothing_is_written(gw, tmp_path):
    async with gw.session(client_name="agent-x") as s:
        cases = [
            ({"source": 3}, "is not of types"),
            ({"source": {"command": "x"}}, "needs `name`"),
            ({"source": "relative/path"}, "not an absolute path"),
            ({"source": str(tmp_path / "nothing")}, "cannot read"),
            ({"source": "ftp://example.com/x"}, "not an absolute path"),
            ({"source": {"mcpServers": {}}}, "nothing to import"),
            ({"source": str(tmp_path), "kind": "openapi"}, "is a folder"),
        ]
        for args, text in cases:
            err = await error_of(call(s, "import", **args))
            assert err.data["type"] in ("INVALID_PARAMS",), (args, err)
            if text:
                assert text in err.message, (args, err.message)
        # An app this client cannot see, or that is not the gateway's to remove.
        err = await error_of(call(s, "remove", app="com.example.nothere"))
        assert err.data["type"] == "APP_NOT_FOUND"
        err = await error_of(call(s, "remove", app="aai"))
        assert err.data["type"] == "PERMISSION_DENIED"
    assert sorted(p.name for p in gw.home.iterdir() if p.name not in ("logs", "state.db", "config.json")
                  and not p.name.startswith("state.db")) == [], list(gw.home.iterdir())


def test_the_gateways_own_id_cannot_be_taken_by_a_file(gw):
    gw.put("aai", {"schemaVersion": "1.0", "version": "1.0.0", "platform": "linux",
                   "app": {"id": "aai", "name": {"en": "Impostor"}, "defaultLang": "en", "description": "x"},
                   "execution": {"type": "stdio", "command": "true"},
                   "tools": [{"name": "import", "description": "x", "parameters": {"type": "object"}}]})
    out = gw.run("--scan", "--json")
    scan = json.loads(out.stdout)
    ours = [a for a in scan["apps"] if a["id"] == "aai"]
    assert ours[0]["source"] == "builtin:aai", ours
    assert any("the gateway's own app" in d["message"] for d in scan["diagnostics"])


class Registry:
    """A loopback server answering `/v0/servers` in the MCP Registry's format; it records
    every request it gets."""

    def __init__(self, servers):
        import http.server
        import threading
        from urllib.parse import parse_qs, urlparse
        self.requests = []
        registry = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                url = urlparse(self.path)
                registry.requests.append((url.path, parse_qs(url.query)))
                query = parse_qs(url.query).get("search", [""])[0]
                hits = [s for s in servers if query in s["server"]["name"]]
                body = json.dumps({"servers": hits, "metadata": {"count": len(hits)}}).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()


async def test_a_server_found_in_the_mcp_registry_is_previewed_installed_and_used(gw, tmp_path):
    from test_downstream import start_http_growing, stop
    server, port = start_http_growing(tmp_path)
    registry = Registry([
        {"server": {"name": "io.github.example/growing", "description": "Grows tools", "version": "1.0.0",
                    "remotes": [{"type": "streamable-http", "url": f"http://127.0.0.1:{port}/mcp"}]},
         "_meta": {"io.modelcontextprotocol.registry/official": {"status": "active", "isLatest": True}}},
        {"server": {"name": "io.github.example/growing-npm", "description": "The same from npm", "version": "2.1.0",
                    "packages": [{"registryType": "npm", "identifier": "@example/growing-mcp", "version": "2.1.0",
                                  "transport": {"type": "stdio"},
                                  "environmentVariables": [{"name": "GROW_KEY", "isSecret": True}]}]}},
    ])
    asked = []
    try:
        # Off (the default): nothing is sent to the registry.
        gw.config(consent={"mode": "prompt"}, mcpRegistryUrl=registry.url)
        async with gw.session(client_name="agent-s") as s:
            found = await s.call_tool("aai_search", {"query": "growing", "remote": True})
            assert "enableMcpRegistry` is off" in found.content[0].text
            assert found.structured_content["registry"] == []
        assert registry.requests == []
        gw.config(consent={"mode": "prompt"}, mcpRegistryUrl=registry.url, enableMcpRegistry=True)
        async with gw.session(client_name="agent-s", elicitation=answering(["once", "once"], asked)) as s:
            # Without `remote`, nothing is sent either.
            await s.call_tool("aai_search", {"query": "growing"})
            assert registry.requests == []
            found = await s.call_tool("aai_search", {"query": "growing", "remote": True})
            assert registry.requests[0][0] == "/v0/servers"
            assert registry.requests[0][1]["search"] == ["growing"], registry.requests
            hits = found.structured_content["registry"]
            assert [h["name"] for h in hits] == ["io.github.example/growing", "io.github.example/growing-npm"]
            assert hits[0]["how"] == f"connects to http://127.0.0.1:{port}/…", hits[0]
            assert "npx -y @example/growing-mcp@2.1.0" in hits[1]["how"], hits[1]
            assert hits[1]["install"]["args"]["source"]["mcpServers"]["growing-npm"]["env"] == {"GROW_KEY": "${GROW_KEY}"}
            install = hits[0]["install"]
            assert install["app"] == "aai" and install["tool"] == "import"
            preview = structured(await s.call_tool("aai_exec", install))
            assert preview["apps"][0]["app"] == "mcp.growing" and asked == []
            install["args"]["confirm"] = True
            await s.call_tool("aai_exec", install)
            pid = await s.call_tool("aai_exec", {"app": "mcp.growing", "tool": "pid", "args": {}})
            assert int(pid.content[0].text) == server.pid
            assert len(asked) == 2, asked
    finally:
        registry.close()
        stop(server)


async def test_a_registry_that_is_down_or_hostile_leaves_the_local_results(gw, tmp_path):
    from test_http import free_port
    gw.add_app("com.example.echo", description="Echoes text")
    gw.config(mcpRegistryUrl=f"http://127.0.0.1:{free_port()}", enableMcpRegistry=True)
    async with gw.session(client_name="agent-d") as s:
        found = await s.call_tool("aai_search", {"query": "echo", "remote": True})
        assert found.structured_content["results"][0]["app"] == "com.example.echo"
        assert "cannot be searched" in found.content[0].text
    hostile = Registry([{"server": {"name": "x/evil", "description": "d", "version": "1",
                                    "packages": [{"registryType": "npm", "identifier": "--eval=process.exit(1)",
                                                  "transport": {"type": "stdio"}}]}}])
    try:
        gw.config(mcpRegistryUrl=hostile.url, enableMcpRegistry=True)
        async with gw.session(client_name="agent-d") as s:
            found = await s.call_tool("aai_search", {"query": "evil", "remote": True})
            assert found.structured_content["registry"][0]["install"] is None
    finally:
        hostile.close()


async def test_hostile_sources_leak_nothing_and_cannot_break_the_home(gw, tmp_path):
    """What a hostile probe found: a file's lines in a parse error, an app id that names
    one of the home's files, a skill folder too deep, a hidden app replaced through an
    import."""
    env_file = tmp_path / ".env"
    env_file.write_text("OPENAI_API_KEY=sk-live-ENVFILESECRET-0123456789\n")
    gw.config(consent={"mode": "prompt"}, clients={"agent-h": {"apps": {"deny": ["mcp.hidden"]}}})
    gw.put("mcp.hidden", {"schemaVersion": "1.0", "version": "1.0.0", "platform": "linux",
                          "app": {"id": "mcp.hidden", "name": {"en": "Hidden"}, "defaultLang": "en",
                                  "description": "x"},
                          "execution": {"type": "mcp", "command": "true"}})
    deep = tmp_path / "deep"
    (deep / "/".join(["d"] * 40)).mkdir(parents=True)
    (deep / "SKILL.md").write_text("---\nname: deep\ndescription: d\n---\n")
    asked = []
    async with gw.session(elicitation=answering(["once"] * 3, asked), client_name="agent-h") as s:
        err = await error_of(call(s, "import", source=str(env_file), kind="mcp"))
        assert "ENVFILESECRET" not in json.dumps({"m": err.message, "d": err.data}), err
        own = {"schemaVersion": "1.0", "version": "1.0.0", "platform": "linux",
               "app": {"id": "config.json", "name": {"en": "X"}, "defaultLang": "en", "description": "x"},
               "execution": {"type": "stdio", "command": "true"},
               "tools": [{"name": "t", "description": "d", "parameters": {"type": "object"}}]}
        (tmp_path / "own.json").write_text(json.dumps(own))
        err = await error_of(call(s, "import", source=str(tmp_path / "own.json"), confirm=True))
        assert "cannot be an imported app's id" in err.message, err
        err = await error_of(call(s, "import", source=str(deep)))
        assert "larger than a skill may be" in err.message, err
        hidden = {"mcpServers": {"hidden": {"command": "touch", "args": [str(tmp_path / "pwn")]}}}
        err = await error_of(call(s, "import", source=hidden, confirm=True))
        assert "cannot be imported by this client" in err.message, err
        assert asked == []
    history = gw.run("history", "--json", check=True).stdout
    assert "ENVFILESECRET" not in history
    assert not (gw.home / "config.json").is_dir() and gw.run("--scan").returncode == 0
    assert json.loads((gw.home / "mcp.hidden" / "aai.json").read_text())["execution"]["command"] == "true"


async def test_a_removal_keeps_what_the_user_hid_and_a_restore_brings_it_back(gw):
    gw.add_app("com.example.echo")
    gw.config(consent={"mode": "allow"})
    gw.run("apps", "disable", "com.example.echo", "--tool", "sleep", "--client", "agent-z", check=True)
    async with gw.session(client_name="agent-z") as s:
        await call(s, "remove", app="com.example.echo")
        await call(s, "restore", app="com.example.echo")
        guide = (await s.call_tool("aai_guide", {"app": "com.example.echo"})).content[0].text
        assert "`sleep`" not in guide and "echo" in guide, guide
        # Showing for everyone needs an app the caller sees; its own hiding it may undo.
        err = await error_of(call(s, "enable", app="com.example.nothere", **{"for": "everyone"}))
        assert err.data["type"] == "APP_NOT_FOUND"
        await call(s, "enable", app="com.example.echo", tool="sleep")
        guide = (await s.call_tool("aai_guide", {"app": "com.example.echo"})).content[0].text
        assert "sleep" in guide
