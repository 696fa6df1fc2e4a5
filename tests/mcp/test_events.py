"""Apps' events, from real desktop programs on a private session bus: dunst's
`NotificationClosed` and mpv's MPRIS track changes (a `PropertiesChanged` of `Metadata`),
delivered to an MCP client subscribed to the event's resource and to a script's
`waitFor`. Subscribing is asked about like a call.

Run: python3 -m pytest tests/mcp -q -k events
"""
import json
import time

import pytest

from conftest import deciding
from test_desktop import call, desktop, tone, until  # noqa: F401  (desktop is a fixture)

anyio = pytest.importorskip("anyio")
MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio

NOTIFICATIONS = "org.freedesktop.Notifications"
MPV = "org.mpris.MediaPlayer2.mpv"


def updates_of(seen):
    async def on_message(message):
        root = getattr(message, "root", message)
        if getattr(root, "method", "") == "notifications/resources/updated":
            seen.append((time.monotonic(), root.params.uri))
    return on_message


def start_mpv(desktop, tmp_path, tracks=2):
    files = []
    for i in range(tracks):
        f = tmp_path / f"track{i}.wav"
        tone(f, seconds=30)
        files.append(str(f))
    desktop.start(["mpv", "--no-config", "--script=/usr/lib/mpv-mpris/mpris.so", "--idle=yes", "--pause",
                   "--ao=null", "--vo=null", "--no-terminal", *files], MPV)


async def test_a_closed_notification_reaches_the_subscribed_client(gw, desktop):
    desktop.start(["dunst"], NOTIFICATIONS)
    uri = f"app:{NOTIFICATIONS}/events/closed"
    seen = []
    async with gw.session(on_message=updates_of(seen)) as s:
        guide = (await s.call_tool("aai_guide", {"app": NOTIFICATIONS})).content[0].text
        assert "## Events (2)" in guide and "- `closed`: A notification was closed" in guide
        templates = (await s.list_resource_templates()).resource_templates
        assert "app:{appId}/events/{event}" in [t.uri_template for t in templates]
        await s.subscribe_resource(uri)
        nid = await call(s, NOTIFICATIONS, "notify", summary="Watch me")
        await until(lambda: desktop.run("dunstctl", "count", "displayed") == "1")
        desktop.run("dunstctl", "close")
        with anyio.fail_after(10):
            while not seen:
                await anyio.sleep(0.05)
        assert seen[0][1] == uri
        body = json.loads((await s.read_resource(uri)).contents[0].text)
        assert body["app"] == NOTIFICATIONS and body["event"] == "closed"
        # [id, reason]: 2 is "dismissed by the user".
        assert body["recent"][-1]["data"] == [nid, 2], body
        assert body["recent"][-1]["seq"] >= 1
        # Unsubscribed: the next close is not told.
        await s.unsubscribe_resource(uri)
        count = len(seen)
        await call(s, NOTIFICATIONS, "notify", summary="Again")
        await until(lambda: desktop.run("dunstctl", "count", "displayed") == "1")
        desktop.run("dunstctl", "close")
        await until(lambda: desktop.run("dunstctl", "count", "displayed") == "0")
        await anyio.sleep(0.5)
        assert len(seen) == count
        # An event the app does not have, and an app without events.
        with pytest.raises(MCPError, match="has no event `nope`") as refused:
            await s.subscribe_resource(f"app:{NOTIFICATIONS}/events/nope")
        assert "its events: action, closed" in json.dumps(refused.value.error.data)


async def test_a_track_change_reaches_a_subscriber_and_a_waiting_script(gw, desktop, tmp_path):
    start_mpv(desktop, tmp_path)
    uri = f"app:{MPV}/events/track_changed"
    seen = []
    async with gw.session(on_message=updates_of(seen)) as s:
        await s.subscribe_resource(uri)
        first = await call(s, MPV, "current_track")

        async def skip_soon():
            await anyio.sleep(1.0)
            desktop.run("playerctl", "-p", "mpv", "next")

        async with anyio.create_task_group() as tg:
            tg.start_soon(skip_soon)
            # Metadata may change for the playing track too (mpv announces more of it as it
            # loads): the script waits until another track plays.
            script = f"""
            const before = {json.dumps(first["mpris:trackid"])};
            for (;;) {{
              const track = await waitFor("{MPV}", "track_changed", {{timeout: 15000}});
              if (track["mpris:trackid"] !== before) return track;
            }}
            """
            r = await s.call_tool("aai_run", {"script": script})
        out = r.structured_content
        assert not r.is_error, out
        track = out["result"]
        assert track["mpris:trackid"] != first["mpris:trackid"], (first, track)
        assert track["xesam:url"].endswith("track1.wav") or "track1" in json.dumps(track)
        with anyio.fail_after(10):
            while not seen:
                await anyio.sleep(0.05)
        assert seen[0][1] == uri
        # A burst of changes is coalesced: at most one notification per 250 ms. The burst
        # runs on a thread: `desktop.run` blocks, and a blocked loop would stamp the
        # notifications that queued meanwhile with the time it woke, not when they came.
        def burst():
            for _ in range(4):
                desktop.run("playerctl", "-p", "mpv", "previous")
                desktop.run("playerctl", "-p", "mpv", "next")

        await anyio.to_thread.run_sync(burst)
        await anyio.sleep(1.5)
        times = [t for t, _ in seen]
        gaps = [b - a for a, b in zip(times, times[1:])]
        assert all(g >= 0.2 for g in gaps), gaps
        body = json.loads((await s.read_resource(uri)).contents[0].text)
        assert 2 <= len(body["recent"]) <= 16

        # waitFor gives up after its timeout with TIMEOUT, and the run goes on.
        script = f"""
        try {{ await waitFor("{MPV}", "playback_changed", {{timeout: 300}}); }}
        catch (e) {{ return e.code; }}
        """
        r = await s.call_tool("aai_run", {"script": script})
        assert r.structured_content["result"] == "TIMEOUT", r.structured_content


async def test_listening_is_asked_about_like_a_call(gw, desktop):
    desktop.start(["dunst"], NOTIFICATIONS)
    gw.config(consent={"mode": "prompt"})
    asked = []
    elicit = deciding({"`closed`": "deny", "`action`": "once"}, asked)
    async with gw.session(client_name="watcher", elicitation=elicit) as s:
        with pytest.raises(MCPError, match="PERMISSION_DENIED|denied"):
            await s.subscribe_resource(f"app:{NOTIFICATIONS}/events/closed")
        assert "watcher wants to watch the event `closed` of Desktop notifications" in asked[0], asked
        await s.subscribe_resource(f"app:{NOTIFICATIONS}/events/action")
        script = f'try {{ await waitFor("{NOTIFICATIONS}", "closed", {{timeout: 100}}); }} catch (e) {{ return e.code; }}'
        r = await s.call_tool("aai_run", {"script": script})
        assert r.structured_content["result"] == "PERMISSION_DENIED", r.structured_content
        assert len(asked) == 3, asked
