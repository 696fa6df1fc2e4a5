"""Built-in apps against real, unmodified desktop programs on a private session bus:
dunst (org.freedesktop.Notifications, under Xvfb) and mpv with mpv-mpris (MPRIS). Effects
are checked with the programs' own tools (dunstctl, playerctl).

Run: python3 -m pytest tests/mcp -q -k desktop
"""
import inspect
import json
import math
import os
import shutil
import struct
import subprocess
import time
import wave

import pytest

from conftest import need_peer

anyio = pytest.importorskip("anyio")
pytestmark = pytest.mark.anyio


def wait_for_name(bus, name, proc, seconds=15):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        names = subprocess.run(["busctl", f"--address={bus.address}", "list", "--acquired", "--no-legend"],
                               capture_output=True, text=True).stdout
        if any(line.split()[0] == name for line in names.splitlines() if line.strip()):
            return
        assert proc.poll() is None, f"{proc.args[0]} exited with {proc.returncode}"
        time.sleep(0.1)
    raise TimeoutError(name)


@pytest.fixture
def desktop(gw, bus, tmp_path):
    for tool in ["Xvfb", "dunst", "dunstctl", "mpv", "playerctl"]:
        need_peer(shutil.which(tool) is not None, f"{tool} (Debian packages xvfb dunst mpv mpv-mpris playerctl)")
    need_peer(os.path.exists("/usr/lib/mpv-mpris/mpris.so"), "mpv-mpris (Debian package mpv-mpris)")
    number = next(n for n in range(200 + os.getpid() % 300, 1000)
                  if not os.path.exists(f"/tmp/.X{n}-lock") and not os.path.exists(f"/tmp/.X11-unix/X{n}"))
    display = f":{number}"
    xvfb = subprocess.Popen(["Xvfb", display, "-screen", "0", "1024x768x24", "-nolisten", "tcp"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 15
    while not os.path.exists(f"/tmp/.X11-unix/X{number}"):
        assert xvfb.poll() is None and time.monotonic() < deadline, "Xvfb did not start"
        time.sleep(0.05)
    env = {**os.environ, **bus.env(), "DISPLAY": display}
    procs = [xvfb]
    gw.extra_env = bus.env()

    class Desktop:
        def __init__(self):
            self.env = env

        def start(self, args, name):
            p = subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            procs.append(p)
            wait_for_name(bus, name, p)
            return p

        def run(self, *args):
            return subprocess.run(args, env=env, capture_output=True, text=True, timeout=20).stdout.strip()

    yield Desktop()
    for p in reversed(procs):
        p.kill()
        p.wait()


async def until(check, seconds=10):
    """Polls `check` (a function or a coroutine function) until it is true: the desktop
    services apply what they are asked in their own time."""
    deadline = time.monotonic() + seconds
    while True:
        done = check()
        if inspect.isawaitable(done):
            done = await done
        if done:
            return
        assert time.monotonic() < deadline, f"not within {seconds} s"
        await anyio.sleep(0.1)


async def call(s, app, tool, **args):
    r = await s.call_tool("aai_exec", {"app": app, "tool": tool, "args": args})
    return json.loads(r.content[0].text) if r.content[0].text[:1] in "[{0123456789-\"tn" else r.content[0].text


async def test_desktop_notifications_through_dunst(gw, desktop):
    desktop.start(["dunst"], "org.freedesktop.Notifications")
    async with gw.session() as s:
        names = [t.name for t in (await s.list_tools()).tools]
        assert "app_org_freedesktop_Notifications" in names
        search = await s.call_tool("aai_search", {"query": "通知"})
        assert search.structured_content["results"][0]["app"] == "org.freedesktop.Notifications"
        info = await call(s, "org.freedesktop.Notifications", "server_info")
        assert info[0] == "dunst"
        nid = await call(s, "org.freedesktop.Notifications", "notify", summary="Build finished",
                         body="All 42 tests passed", hints={"urgency": {"$type": "y", "value": 2}})
        assert isinstance(nid, int) and nid > 0
        await until(lambda: desktop.run("dunstctl", "count", "displayed") == "1")
        await call(s, "org.freedesktop.Notifications", "close", id=nid)
        await until(lambda: desktop.run("dunstctl", "count", "displayed") == "0")
        history = json.loads(desktop.run("dunstctl", "history"))
        summaries = [n["summary"]["data"] for n in history["data"][0]]
        assert "Build finished" in summaries


def tone(path, seconds=30):
    with wave.open(str(path), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(8000)
        w.writeframes(b"".join(struct.pack("<h", int(8000 * math.sin(i / 8000 * 2 * math.pi * 440)))
                               for i in range(8000 * seconds)))


async def test_mpris_player_through_mpv(gw, desktop, tmp_path):
    track = tmp_path / "tone.wav"
    tone(track)
    desktop.start(["mpv", "--no-config", "--script=/usr/lib/mpv-mpris/mpris.so", "--idle=yes", "--pause",
                   "--ao=null", "--vo=null", "--no-terminal", "--loop-file=inf", str(track)],
                  "org.mpris.MediaPlayer2.mpv")
    app = "org.mpris.MediaPlayer2.mpv"
    async with gw.session() as s:
        guide = (await s.call_tool("aai_guide", {"app": "mpv"})).content[0].text
        assert guide.startswith("# Media player (mpv)")
        assert await call(s, app, "status") == "Paused"
        await call(s, app, "play")
        await until(lambda: desktop.run("playerctl", "-p", "mpv", "status") == "Playing")
        assert await call(s, app, "status") == "Playing"
        await call(s, app, "pause")
        await until(lambda: desktop.run("playerctl", "-p", "mpv", "status") == "Paused")
        before = await call(s, app, "position")
        await call(s, app, "seek", offset=5_000_000)

        async def moved():
            return await call(s, app, "position") - before >= 4_500_000
        await until(moved)
        track_info = await call(s, app, "current_track")
        assert track_info["mpris:length"] >= 29_000_000
        await call(s, app, "set_position", track_id=track_info["mpris:trackid"], position=1_000_000)

        async def at_one_second():
            return abs(await call(s, app, "position") - 1_000_000) < 500_000
        await until(at_one_second)
        await call(s, app, "toggle")
        await until(lambda: desktop.run("playerctl", "-p", "mpv", "status") == "Playing")


def test_scan_lists_built_ins_when_present(gw, desktop):
    desktop.start(["dunst"], "org.freedesktop.Notifications")
    out = gw.run("--scan", "--json")
    scan = json.loads(out.stdout)
    notif = [a for a in scan["apps"] if a["id"] == "org.freedesktop.Notifications"]
    assert notif and notif[0]["source"] == "builtin:notifications"
    assert notif[0]["bindings"][0]["usable"] is True
    assert notif[0]["bindings"][0]["tools"] == ["notify", "close", "capabilities", "server_info"]


async def test_a_player_started_later_is_announced_and_removed_when_it_quits(gw, desktop, tmp_path):
    import anyio

    track = tmp_path / "tone.wav"
    tone(track, seconds=5)
    changes = []

    async def on_message(message):
        if getattr(getattr(message, "root", message), "method", "") == "notifications/tools/list_changed":
            changes.append(time.monotonic())

    async with gw.session(on_message=on_message) as s:
        names = [t.name for t in (await s.list_tools()).tools]
        assert "app_org_mpris_MediaPlayer2_mpv" not in names
        player = desktop.start(["mpv", "--no-config", "--script=/usr/lib/mpv-mpris/mpris.so", "--idle=yes",
                                "--pause", "--ao=null", "--vo=null", "--no-terminal", str(track)],
                               "org.mpris.MediaPlayer2.mpv")
        with anyio.fail_after(10):
            while not changes:
                await anyio.sleep(0.05)
        names = [t.name for t in (await s.list_tools()).tools]
        assert "app_org_mpris_MediaPlayer2_mpv" in names
        assert await call(s, "org.mpris.MediaPlayer2.mpv", "status") == "Paused"
        player.kill()
        player.wait()
        # Announced again, and gone from the list (mpv's start may have been announced twice).
        with anyio.fail_after(10):
            while len(changes) < 2 or "app_org_mpris_MediaPlayer2_mpv" in [
                    t.name for t in (await s.list_tools()).tools]:
                await anyio.sleep(0.05)
