"""`subscriptions/listen` (MCP 2026-07-28): a client of the stateless revision hears of
list changes on the stream it opened, over stdio and Streamable HTTP, through the Python
SDK's own `listen`. The gateway acknowledges tools and resources list changes (not
prompts, which it does not serve), sends one of each per change, and ends the stream with
its final result when it stops.

Run: python3 -m pytest tests/mcp -q -k subscriptions
"""
import contextlib

import anyio
import pytest

from test_http_transport import web

pytestmark = pytest.mark.anyio


@contextlib.asynccontextmanager
async def http_session(gw):
    from mcp import ClientSession, types
    from mcp.client.streamable_http import streamable_http_client
    with web(gw) as (url, _):
        async with streamable_http_client(url) as (read, write):
            async with ClientSession(read, write,
                                     client_info=types.Implementation(name="listener", version="1")) as s:
                await s.discover()
                yield s


async def next_events(sub, n, timeout=30):
    """The next `n` events of `sub`, as their class names."""
    seen = []
    with anyio.fail_after(timeout):
        async for event in sub:
            seen.append(type(event).__name__)
            if len(seen) == n:
                break
    return seen


@pytest.mark.parametrize("transport", ["stdio", "http"])
async def test_a_2026_client_hears_of_new_apps_on_its_subscription(gw, transport):
    from mcp.client.subscriptions import listen
    gw.add_app("com.example.echo")
    opened = gw.session(discover=True) if transport == "stdio" else http_session(gw)
    async with opened as s:
        assert s.protocol_version == "2026-07-28"
        async with listen(s, tools_list_changed=True, prompts_list_changed=True,
                          resources_list_changed=True) as sub:
            # Prompts are not served: not acknowledged.
            assert sub.honored.tools_list_changed and sub.honored.resources_list_changed
            assert not sub.honored.prompts_list_changed
            await s.list_tools()  # after the first scan: what follows is a change
            gw.add_app("com.example.notes", tools=None)
            assert sorted(await next_events(sub, 2)) == ["ResourcesListChanged", "ToolsListChanged"]
            tools = await s.list_tools()
            assert "app_com_example_notes" in {t.name for t in tools.tools}
            # Another change, another pair: the stream stays open between changes.
            (gw.home / "com.example.notes" / "aai.json").unlink()
            assert sorted(await next_events(sub, 2)) == ["ResourcesListChanged", "ToolsListChanged"]
            assert "app_com_example_notes" not in {t.name for t in (await s.list_tools()).tools}


async def test_a_subscription_asks_only_for_what_it_wants(gw):
    from mcp.client.subscriptions import listen
    gw.add_app("com.example.echo")
    async with gw.session(discover=True) as s:
        async with listen(s, resources_list_changed=True) as sub:
            assert not sub.honored.tools_list_changed
            await s.list_tools()
            gw.add_app("com.example.notes")
            assert await next_events(sub, 1) == ["ResourcesListChanged"]
            # Nothing more for this change: the tool list's news was not asked for.
            with pytest.raises(TimeoutError):
                await next_events(sub, 1, timeout=2)


async def test_the_search_listing_never_announces_a_tool_list_change(gw):
    from mcp.client.subscriptions import listen
    gw.config(exposure="search")
    gw.add_app("com.example.echo")
    async with gw.session(discover=True) as s:
        async with listen(s, tools_list_changed=True, resources_list_changed=True) as sub:
            await s.list_tools()
            gw.add_app("com.example.notes")
            assert await next_events(sub, 1) == ["ResourcesListChanged"]
            with pytest.raises(TimeoutError):
                await next_events(sub, 1, timeout=2)
