"""A downstream MCP server's resource updates, as the gateway's `resource_updated` event:
a client subscribes to the server's resource through the gateway
(`app:<id>/resources/<its URI>`, namespaced per app) and hears when it changes; a script
waits for it with `waitFor(app, "resource_updated", {uri})`. Against the Python SDK's server
at 2026-07-28 (updates on `subscriptions/listen`) and the reference `server-everything` at
2025-11-25 (`resources/subscribe` and session notifications). Subscribing is asked about
like a call, naming what starts.

Run: python3 -m pytest tests/mcp -q -k resource_events
"""
import sys
import time
from pathlib import Path

import pytest

from conftest import deciding
from test_downstream import everything, exec_, mcp_app
from test_events import updates_of
from test_http import free_port  # noqa: F401
from test_http_transport import web

anyio = pytest.importorskip("anyio")
MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio

NOTES = "dev.mcp.notes"
SERVER = Path(__file__).with_name("resource_server.py")


def notes(gw):
    mcp_app(gw, NOTES, {"command": sys.executable, "args": [str(SERVER)]},
            description="Notes whose resources change")


async def seen_within(seen, n=1, seconds=10):
    with anyio.fail_after(seconds):
        while len(seen) < n:
            await anyio.sleep(0.05)


async def test_a_resource_update_reaches_the_subscribed_client_and_stops_when_it_unsubscribes(gw):
    notes(gw)
    a, b = f"app:{NOTES}/resources/note://a", f"app:{NOTES}/resources/note://b"
    seen = []
    async with gw.session(on_message=updates_of(seen)) as s:
        guide = (await s.call_tool("aai_guide", {"app": NOTES})).content[0].text
        assert "- `resource_updated`: one of the server's resources changed" in guide, guide
        templates = [t.uri_template for t in (await s.list_resource_templates()).resource_templates]
        assert "app:{appId}/resources/{+uri}" in templates
        await s.subscribe_resource(a)
        await exec_(s, NOTES, "write", uri="note://b", text="not watched")
        await exec_(s, NOTES, "write", uri="note://a", text="changed")
        await seen_within(seen)
        assert [uri for _, uri in seen] == [a], "only the resource subscribed to"
        read = (await s.read_resource(a)).contents
        assert [(str(c.uri), c.text) for c in read] == [(a, "changed")], "read through, namespaced"
        assert (await s.read_resource(b)).contents[0].text == "not watched"

        await s.unsubscribe_resource(a)
        await anyio.sleep(0.3)
        seen.clear()
        await exec_(s, NOTES, "write", uri="note://a", text="again")
        await anyio.sleep(1.0)
        assert seen == [], "no update after unsubscribing"


async def test_a_script_waits_for_a_resource_update(gw):
    notes(gw)
    script = """
    const changed = await waitFor("dev.mcp.notes", "resource_updated", {uri: "note://a", timeout: 15000});
    return changed;
    """
    async with gw.session() as s:
        # The server starts and the subscription is in place before the write.
        await exec_(s, NOTES, "write", uri="note://b", text="start it")
        result = {}

        async def run():
            result["r"] = await s.call_tool("aai_run", {"script": script})

        async with anyio.create_task_group() as tg:
            tg.start_soon(run)
            # Written until the script has heard of it (its subscription opens meanwhile).
            with anyio.fail_after(15):
                while "r" not in result:
                    await exec_(s, NOTES, "write", uri="note://a", text="now")
                    await anyio.sleep(0.3)
        r = result["r"]
        assert not r.is_error, r.structured_content
        assert r.structured_content["result"] == {"uri": "note://a"}

        # Without a uri, or on an app that is not an MCP server, the error says what is wrong.
        r = await s.call_tool("aai_run", {"script": 'return await waitFor("dev.mcp.notes", "resource_updated")'})
        assert r.is_error and "give its `uri`" in r.structured_content["error"]["message"]
        r = await s.call_tool("aai_run", {"script": 'return await waitFor("dev.mcp.notes", "nope")'})
        assert "has no event `nope`" in r.structured_content["error"]["message"]


async def test_subscribing_is_asked_about_and_names_what_starts(gw):
    notes(gw)
    gw.config(consent={"mode": "prompt"})
    asked = []
    async with gw.session(elicitation=deciding({"": "deny"}, asked)) as s:
        with pytest.raises(MCPError) as e:
            await s.subscribe_resource(f"app:{NOTES}/resources/note://a")
        assert e.value.error.data["type"] == "PERMISSION_DENIED"
    assert len(asked) == 1 and "resource_updated" in asked[0] and "note://a" in asked[0], asked
    assert str(SERVER) in asked[0], "the question names the command that starts"


async def test_a_server_of_an_earlier_revision_is_subscribed_with_resources_subscribe(gw):
    """server-everything (2025-11-25) takes `resources/subscribe` and, once its
    `toggle-subscriber-updates` tool is called, announces each subscribed resource at once
    and every 5 s."""
    everything(gw)
    uri = "demo://resource/static/document/architecture.md"
    ours = f"app:dev.mcp.everything/resources/{uri}"
    seen = []
    async with gw.session(on_message=updates_of(seen)) as s:
        await s.subscribe_resource(ours)
        await exec_(s, "dev.mcp.everything", "toggle-subscriber-updates")
        await seen_within(seen)
        assert seen[0][1] == ours
        read = (await s.read_resource(ours)).contents
        assert str(read[0].uri) == ours and "architecture" in read[0].text.lower()


async def test_over_http_only_the_subscribed_session_hears_of_the_update(gw):
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    notes(gw)
    a = f"app:{NOTES}/resources/note://a"
    heard_a, heard_b = [], []
    with web(gw) as (url, _):
        async with streamable_http_client(url) as (r1, w1), streamable_http_client(url) as (r2, w2):
            async with ClientSession(r1, w1, message_handler=updates_of(heard_a)) as alice, \
                    ClientSession(r2, w2, message_handler=updates_of(heard_b)) as bob:
                await alice.initialize()
                await bob.initialize()
                await alice.subscribe_resource(a)
                await exec_(bob, NOTES, "write", uri="note://a", text="from bob")
                await seen_within(heard_a)
                await anyio.sleep(0.5)
                assert [u for _, u in heard_a] == [a]
                assert heard_b == [], "the other session did not subscribe"
        started = time.monotonic()
    assert time.monotonic() - started < 20


async def test_a_2026_client_hears_of_resource_updates_on_its_subscription_stream(gw):
    """A client of the stateless revision names the resources on `subscriptions/listen`
    (`resourceSubscriptions`): a downstream resource and an app's event resource alike."""
    from mcp.client.subscriptions import listen
    notes(gw)
    a = f"app:{NOTES}/resources/note://a"
    async with gw.session(discover=True) as s:
        assert s.protocol_version == "2026-07-28"
        async with listen(s, tools_list_changed=True, resource_subscriptions=[a, "x:not-ours"]) as sub:
            assert sub.honored.resource_subscriptions == [a], "only what the gateway serves"
            await exec_(s, NOTES, "write", uri="note://a", text="streamed")
            with anyio.fail_after(10):
                async for event in sub:
                    if type(event).__name__ == "ResourceUpdated":
                        assert event.uri == a
                        break


async def test_a_servers_templates_and_instructions_reach_the_client(gw):
    """server-everything's resource templates are the gateway's own (named for the app), a
    URI one makes reads through, and the server's `instructions` end its guide, quoted."""
    everything(gw)
    async with gw.session() as s:
        guide = (await s.call_tool("aai_guide", {"app": "dev.mcp.everything"})).content[0].text
        assert "## The server's own instructions" in guide
        part = guide.split("## The server's own instructions", 1)[1]
        assert "\n> " in part, "quoted, line by line"
        templates = [t.uri_template for t in (await s.list_resource_templates()).resource_templates]
        ours = "app:dev.mcp.everything/resources/demo://resource/dynamic/text/{resourceId}"
        assert ours in templates, templates
        read = (await s.read_resource("app:dev.mcp.everything/resources/demo://resource/dynamic/text/7")).contents
        assert str(read[0].uri) == "app:dev.mcp.everything/resources/demo://resource/dynamic/text/7"
        assert "7" in read[0].text
        # A URI the server neither lists nor has a template for does not exist.
        with pytest.raises(MCPError) as e:
            await s.read_resource("app:dev.mcp.everything/resources/nowhere://x")
        assert e.value.error.code == -32002, e.value.error
        assert "lists no such resource, nor a template it fits" in e.value.error.message


SUBSCRIBING = Path(__file__).with_name("subscribing_server.py")


def subscribing(gw, app_id="dev.mcp.subs", **env):
    mcp_app(gw, app_id, {"command": sys.executable, "args": [str(SUBSCRIBING)], "env": env},
            description="A server whose subscriptions the test sees")


async def subs_of(s, app="dev.mcp.subs"):
    import json
    r = await exec_(s, app, "subs")
    return json.loads(r.content[0].text)


async def test_a_servers_refusal_never_carries_a_secret(gw):
    gw.config(consent={"mode": "allow"}, secrets={"fromEnvironment": True}, credentials={"store": "file"})
    gw.extra_env["GATEWAY_SECRET"] = "s3cr3t-never-shown"
    subscribing(gw, SERVER_TOKEN="${GATEWAY_SECRET}", REFUSE="1")
    async with gw.session() as s:
        with pytest.raises(MCPError) as e:
            await s.subscribe_resource("app:dev.mcp.subs/resources/note://a")
        assert "denied ***" in str(e.value.error.data) and "s3cr3t" not in str(e.value.error), e.value.error
        r = await s.call_tool("aai_run", {"script": 'await waitFor("dev.mcp.subs", "resource_updated", {uri: "note://a"})'})
        assert "s3cr3t" not in str(r.structured_content), r.structured_content


async def test_a_subscription_ends_with_its_server_and_can_be_made_again(gw):
    """The server crashes: the subscribed client hears one last update (and re-reads), a
    script waiting on it fails at once rather than at its timeout, and subscribing again
    subscribes on the restarted server. A server URI with `/events/` in it is a resource."""
    subscribing(gw)
    a = "app:dev.mcp.subs/resources/note://x/events/today"
    seen = []
    async with gw.session(on_message=updates_of(seen)) as s:
        await s.subscribe_resource(a)
        assert await subs_of(s) == ["note://x/events/today"]
        assert (await s.read_resource(a)).contents[0].text == "content of note://x/events/today"

        async def wait():
            return await s.call_tool("aai_run", {"script":
                'return await waitFor("dev.mcp.subs", "resource_updated", {uri: "note://b", timeout: 20000})'})
        result = {}
        async with anyio.create_task_group() as tg:
            async def run():
                result["r"] = await wait()
            tg.start_soon(run)
            # The script listens (the server was asked for note://b) before the crash.
            with anyio.fail_after(15):
                while "note://b" not in await subs_of(s):
                    await anyio.sleep(0.1)
            started = time.monotonic()
            with pytest.raises(MCPError):
                await exec_(s, "dev.mcp.subs", "crash")
            await seen_within(seen)
        assert time.monotonic() - started < 10, "the waiting script heard the end"
        assert "stopped announcing" in result["r"].structured_content["error"]["message"]
        assert [u for _, u in seen] == [a], "one last update for the subscriber"
        # Subscribing again reaches the restarted server.
        await s.subscribe_resource(a)
        assert await subs_of(s) == ["note://x/events/today"]
        seen.clear()
        await exec_(s, "dev.mcp.subs", "fire", uri="note://x/events/today")
        await seen_within(seen)


async def test_an_http_session_that_ends_ends_its_subscriptions_downstream(gw):
    from mcp import ClientSession
    from mcp.client.streamable_http import streamable_http_client
    subscribing(gw)
    with web(gw) as (url, _):
        async with streamable_http_client(url) as (r1, w1), streamable_http_client(url) as (r2, w2):
            async with ClientSession(r1, w1) as watcher:
                await watcher.initialize()
                await watcher.subscribe_resource("app:dev.mcp.subs/resources/note://a")
                async with ClientSession(r2, w2) as other:
                    await other.initialize()
                    assert await subs_of(other) == ["note://a"]
        async with streamable_http_client(url) as (read, write):
            async with ClientSession(read, write) as later:
                await later.initialize()
                with anyio.fail_after(10):
                    while await subs_of(later) != []:
                        await anyio.sleep(0.3)
