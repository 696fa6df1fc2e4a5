"""Per-client visibility (config `clients`, docs/config.md): two clients connected at once
over HTTP; what one may not see is not listed, searched, guided, read or callable for it,
and asking for it by id gives the error of an app that does not exist. The other client
sees and calls everything.

Run: python3 -m pytest tests/mcp -q -k visibility
"""
import contextlib

import pytest

from test_http_transport import web

MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio


@contextlib.asynccontextmanager
async def client(url, name):
    from mcp import ClientSession, types
    from mcp.client.streamable_http import streamable_http_client
    async with streamable_http_client(url) as (read, write):
        async with ClientSession(read, write, client_info=types.Implementation(name=name, version="1")) as s:
            await s.initialize()
            yield s


async def error_of(coro):
    with pytest.raises(MCPError) as e:
        await coro
    return e.value.error


async def test_a_hidden_app_and_tool_are_invisible_to_one_client_and_usable_by_another(gw):
    gw.add_app("com.example.echo", description="Echoes text")
    gw.add_app("com.example.notes", description="Keeps notes")
    gw.config(clients={
        "agent-a": {"apps": {"deny": ["com.example.notes"]}, "tools": {"deny": ["com.example.echo:sleep"]}},
        "*": {"apps": {"deny": ["com.example.never"]}},
    })
    with web(gw) as (url, _):
        async with client(url, "agent-a") as a, client(url, "agent-b") as b:
            # Listed: agent-a has no notes app; agent-b has both.
            tools_a = [t.name for t in (await a.list_tools()).tools]
            tools_b = [t.name for t in (await b.list_tools()).tools]
            assert "app_com_example_notes" not in tools_a and "app_com_example_echo" in tools_a
            assert {"app_com_example_notes", "app_com_example_echo"} <= set(tools_b)
            # Searched.
            found = await a.call_tool("aai_search", {"query": "notes"})
            assert "com.example.notes" not in found.content[0].text
            found = await b.call_tool("aai_search", {"query": "notes"})
            assert "com.example.notes" in found.content[0].text
            # Guided and called: the error of an app that does not exist, nothing more.
            hidden = await error_of(a.call_tool("aai_guide", {"app": "com.example.notes"}))
            unknown = await error_of(a.call_tool("aai_guide", {"app": "com.example.nothere"}))
            assert hidden.code == unknown.code and hidden.data["type"] == "APP_NOT_FOUND"
            assert "com.example.notes" not in hidden.message.replace("`com.example.notes`", "", 1)
            near = await error_of(a.call_tool("aai_exec", {"app": "com.example.note", "tool": "echo",
                                                           "args": {"text": "x"}}))
            assert "com.example.notes" not in str(near.message) + str(near.data), "not even suggested"
            called = await error_of(a.call_tool("aai_exec", {"app": "com.example.notes", "tool": "echo",
                                                             "args": {"text": "x"}}))
            assert called.data["type"] == "APP_NOT_FOUND"
            r = await b.call_tool("aai_exec", {"app": "com.example.notes", "tool": "echo", "args": {"text": "x"}})
            assert not r.is_error
            # A hidden tool: not in agent-a's guide, not callable; agent-b calls it.
            guide_a = (await a.call_tool("aai_guide", {"app": "com.example.echo"})).content[0].text
            assert "`sleep`" not in guide_a and "`echo`" in guide_a
            denied = await error_of(a.call_tool("aai_exec", {"app": "com.example.echo", "tool": "sleep",
                                                             "args": {"seconds": 0}}))
            assert denied.data["type"] == "TOOL_NOT_FOUND"
            r = await b.call_tool("aai_exec", {"app": "com.example.echo", "tool": "sleep", "args": {"seconds": 0}})
            assert not r.is_error
            # Colon spellings and resources follow the same view.
            denied = await error_of(a.call_tool("com.example.notes:echo", {"text": "x"}))
            assert denied.data["type"] == "APP_NOT_FOUND"
            uris_a = [str(r.uri) for r in (await a.list_resources()).resources]
            assert "app:com.example.notes" not in uris_a and "app:com.example.echo" in uris_a
            await error_of(a.read_resource("app:com.example.notes"))
            assert (await b.read_resource("app:com.example.notes")).contents
            # The descriptor as written would name the hidden tool: agent-a reads the model
            # of what it may see instead.
            shown = (await a.read_resource("app:com.example.echo")).contents[0].text
            assert '"sleep"' not in shown and '"echo"' in shown
            assert '"sleep"' in (await b.read_resource("app:com.example.echo")).contents[0].text
        # The web UI shows the effective state on each app's page.
        from test_ui import get, ui_of
        notes = get(ui_of(url) + "/apps/com.example.notes").text
        assert "the app is hidden from `agent-a`" in notes.replace("&#96;", "`"), notes
        echo = get(ui_of(url) + "/apps/com.example.echo").text.replace("&#96;", "`")
        assert "`sleep` is hidden from `agent-a`" in echo


def test_bad_client_rules_are_reported(gw):
    gw.config(clients={"x": {"tools": {"deny": ["no-colon"]}, "apps": {"allow": "notalist"}}})
    out = gw.run("--scan")
    text = out.stdout + out.stderr
    assert out.returncode != 0, text
    assert "no-colon" in text and "/clients/x/apps/allow" in text, text


async def test_an_allow_listed_client_adds_no_web_app_and_the_command_line_sees_all(gw):
    gw.add_app("com.example.echo")
    gw.config(clients={"agent-c": {"apps": {"allow": ["com.example.echo"]}},
                       "*": {"apps": {"deny": ["com.example.echo"]}}})
    with web(gw) as (url, _):
        async with client(url, "agent-c") as c:
            refused = await error_of(c.call_tool("web_discover", {"url": "https://example.com"}))
            assert refused.data["type"] == "PERMISSION_DENIED" and "allows it a list" in refused.message
    # The rules are per MCP client: the user's own `call` is not bound by them.
    out = gw.run("call", "com.example.echo", "echo", '{"text": "mine"}')
    assert out.returncode == 0, out.stdout + out.stderr
