"""The watcher over a gateway's life: app folders moved in and out of a search directory
are seen without the periodic rescan, and one change is one reload
(docs/performance.md, "Over a gateway's life").

Run: python3 -m pytest tests/mcp -q -k watch
"""
import json
import os
import re

import anyio
import pytest

MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio


async def guide(s, app):
    """Whether `app` is served."""
    try:
        r = await s.call_tool("aai_guide", {"app": app})
    except MCPError as e:
        assert "App not found" in str(e), e
        return False
    return not r.is_error


async def test_an_app_folder_moved_in_and_out_is_seen_by_the_watcher_alone(gw, tmp_path):
    gw.config(scanInterval=0)  # the watcher alone
    gw.add_app("com.example.echo")
    doc = json.loads((gw.home / "com.example.echo" / "aai.json").read_text())
    doc["app"]["id"] = "com.example.moved"
    outside = tmp_path / "elsewhere" / "com.example.moved"
    outside.mkdir(parents=True)
    (outside / "aai.json").write_text(json.dumps(doc))
    log = gw.home / "logs" / "aai-gateway.log"
    async with gw.session() as s:
        assert await guide(s, "com.example.echo")
        assert not await guide(s, "com.example.moved")
        # Moved in whole (a rename: no event names its aai.json).
        os.rename(outside, gw.home / "com.example.moved")
        with anyio.fail_after(10):
            while not await guide(s, "com.example.moved"):
                await anyio.sleep(0.05)
        r = await s.call_tool("aai_exec", {"app": "com.example.moved", "tool": "echo",
                                           "args": {"text": "hi"}})
        assert r.structured_content["echo"]["text"] == "hi"
        # Moved out again.
        os.rename(gw.home / "com.example.moved", outside)
        with anyio.fail_after(10):
            while await guide(s, "com.example.moved"):
                await anyio.sleep(0.05)
        assert await guide(s, "com.example.echo")
        # Each move was one reload of the files it touched, not a scan of every file.
        loads = re.findall(r'catalog loaded apps=\d+ (read=\d+ reused=\d+ files="\w+")', log.read_text())
        assert loads[-2:] == ['read=1 reused=1 files="touched"',
                              'read=0 reused=1 files="touched"'], loads


async def test_a_home_also_reached_through_a_symlinked_scan_path_is_still_watched(gw, tmp_path):
    """Two names of one folder: it is searched once, under the home, but the watcher may
    name its files through the other (the later watch of a folder wins)."""
    link = tmp_path / "home-again"
    link.symlink_to(gw.home)
    gw.config(scanInterval=0, scanPaths=[str(link)])
    gw.add_app("com.example.echo")
    async with gw.session() as s:
        assert await guide(s, "com.example.echo")
        # An edit in a folder already watched (a new folder would rescan everything).
        gw.add_app("com.example.echo", description="Edited later")
        with anyio.fail_after(10):
            while "Edited later" not in (await s.call_tool(
                    "aai_guide", {"app": "com.example.echo"})).content[0].text:
                await anyio.sleep(0.05)
