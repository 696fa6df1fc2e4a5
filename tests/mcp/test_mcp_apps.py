"""MCP Apps through the gateway: the official example servers from npm
(`@modelcontextprotocol/server-basic-vanillajs`, `server-system-monitor`) declare each
tool's interactive view in `_meta.ui`; the gateway keeps it, names its `ui://` resource
for the app (`ui://<app id>/…`, so two servers never collide), reads that resource through
to the server, and a call the view makes back is a call like any other (consent, history).

Verified here: what a host receives and reads (tools/list in `flat` exposure, the guide
and the call's result in `progressive`, `resources/read` of the view). Not verified: a
host rendering the view in a browser.

Run: python3 -m pytest tests/mcp -q -k mcp_apps
"""
import pytest

from conftest import deciding
from test_downstream import NODE_MODULES, exec_, mcp_app, need_npm_peer
from test_history import wait_for

MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio

BASIC = NODE_MODULES / "@modelcontextprotocol" / "server-basic-vanillajs" / "dist" / "index.js"
MONITOR = NODE_MODULES / "@modelcontextprotocol" / "server-system-monitor" / "dist" / "index.js"


def apps(gw):
    need_npm_peer(BASIC)
    need_npm_peer(MONITOR)
    mcp_app(gw, "dev.mcp.clock", {"command": "node", "args": [str(BASIC), "--stdio"]},
            description="The MCP Apps basic example: the server's time, with a view")
    mcp_app(gw, "dev.mcp.monitor", {"command": "node", "args": [str(MONITOR), "--stdio"]},
            description="The MCP Apps system monitor example")


async def the_servers_own_view(path, uri):
    """The view as the server itself gives it (the Python SDK spoken to it directly)."""
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client
    params = StdioServerParameters(command="node", args=[str(path), "--stdio"])
    async with stdio_client(params) as (read, write):
        async with ClientSession(read, write) as s:
            await s.initialize()
            return (await s.read_resource(uri)).contents[0]


async def test_in_flat_exposure_each_tool_keeps_its_view_named_for_its_app(gw):
    apps(gw)
    gw.config(exposure="flat")
    async with gw.session() as s:
        # Listed once (a first call lists a server's tools; flat lists those known).
        await exec_(s, "dev.mcp.clock", "get-time")
        await exec_(s, "dev.mcp.monitor", "get-system-info")
        tools = {t.name: t for t in (await s.list_tools()).tools}
        clock = next(t for n, t in tools.items() if n.endswith("get-time"))
        assert clock.meta["ui"]["resourceUri"] == "ui://dev.mcp.clock/get-time/mcp-app.html"
        assert clock.meta["ui/resourceUri"] == "ui://dev.mcp.clock/get-time/mcp-app.html"
        info = next(t for n, t in tools.items() if n.endswith("get-system-info"))
        assert info.meta["ui"]["resourceUri"] == "ui://dev.mcp.monitor/system-monitor/mcp-app.html"
        poll = next(t for n, t in tools.items() if n.endswith("poll-system-stats"))
        assert poll.meta == {"ui": {"visibility": ["app"]}}, "an app-only tool says so"

        # The view read through the gateway is the server's, byte for byte.
        ours = (await s.read_resource("ui://dev.mcp.clock/get-time/mcp-app.html")).contents
        theirs = await the_servers_own_view(BASIC, "ui://get-time/mcp-app.html")
        assert len(ours) == 1 and ours[0].text == theirs.text and len(theirs.text) > 10_000
        assert str(ours[0].uri) == "ui://dev.mcp.clock/get-time/mcp-app.html"
        assert ours[0].mime_type == theirs.mime_type == "text/html;profile=mcp-app"
        # Another app's name does not reach this server's view.
        with pytest.raises(MCPError):
            await s.read_resource("ui://dev.mcp.nothing/get-time/mcp-app.html")


async def test_in_progressive_exposure_the_guide_and_the_result_carry_the_view(gw):
    apps(gw)
    async with gw.session() as s:
        guide = (await s.call_tool("aai_guide", {"app": "dev.mcp.clock"})).content[0].text
        assert "## Interactive views (1)" in guide
        assert "- `get-time`: `ui://dev.mcp.clock/get-time/mcp-app.html`" in guide
        r = await exec_(s, "dev.mcp.clock", "get-time")
        assert r.meta["ui"]["resourceUri"] == "ui://dev.mcp.clock/get-time/mcp-app.html"
        assert r.structured_content["time"].endswith("Z")


async def test_a_call_the_view_makes_back_is_asked_about_and_recorded(gw):
    """The view polls its app-only tool through the host: to the gateway that is a
    `tools/call` like any other."""
    apps(gw)
    gw.config(exposure="flat", consent={"mode": "prompt"})
    asked = []
    async with gw.session(elicitation=deciding({"": "once"}, asked), client_name="host") as s:
        await exec_(s, "dev.mcp.monitor", "get-system-info")
        poll = next(t.name for t in (await s.list_tools()).tools if t.name.endswith("poll-system-stats"))
        r = await s.call_tool(poll, {})
        assert not r.is_error and "memory" in r.structured_content
    assert any("`poll-system-stats`" in q for q in asked), asked
    rows = wait_for(gw, 2)
    assert {h["tool"] for h in rows} >= {"get-system-info", "poll-system-stats"}
