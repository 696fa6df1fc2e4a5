"""A gateway over its life: app folders moved in and out of a search directory are seen
by the watcher without the periodic rescan, one change is one reload, a rescan of many
changed files is served in steps, and glibc's malloc keeps to two arenas
(docs/performance.md, "Over a gateway's life", "A rescan in steps, and two malloc
arenas").

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


async def test_a_whole_rescan_of_many_changed_files_is_served_in_steps(gw, tmp_path):
    """A whole scan that reads more than 2,000 changed files serves what it has read
    every 2,000 files, so the old parses go before the next ones are made
    (docs/performance.md, "A rescan in steps"). A symlinked scan path turned to another
    folder changes every file without a file event: the periodic scan finds it."""
    n = 2_100
    for name, description in (("old", "Old text"), ("new", "New text")):
        for i in range(n):
            folder = tmp_path / name / f"com.example.s{i}"
            folder.mkdir(parents=True)
            (folder / "aai.json").write_text(json.dumps({
                "schemaVersion": "1.0", "version": "1.0.0", "platform": "linux",
                "app": {"id": f"com.example.s{i}", "name": {"en": f"S{i}"}, "defaultLang": "en",
                        "description": f"{description} {i}"},
                "execution": {"type": "stdio", "command": "true"},
                "tools": [{"name": "t", "description": "d", "parameters": {"type": "object"}}]}))
    link = tmp_path / "current"
    link.symlink_to(tmp_path / "old")
    # Scans 3 s apart: one of 2,100 unchanged files by a debug build on a loaded machine
    # may take a second, and the next must not start at once and meet the turn half-way.
    gw.config(scanInterval=3, scanPaths=[str(link)])
    log = gw.home / "logs" / "aai-gateway.log"

    async def text(s, app):
        return (await s.call_tool("aai_guide", {"app": app})).content[0].text

    def loads():
        return log.read_text().count("catalog loaded") if log.exists() else 0

    async with gw.session() as s:
        assert "Old text 0" in await text(s, "com.example.s0")
        # Turned just after a periodic scan ends, so that the next one, 3 s later,
        # reads every file of the new folder (one under way would read some of each).
        before = loads()
        with anyio.fail_after(10):
            while loads() == before:
                await anyio.sleep(0.01)
        turned = tmp_path / "turned"
        turned.symlink_to(tmp_path / "new")
        os.replace(turned, link)
        with anyio.fail_after(30):
            while f"New text {n - 1}" not in await text(s, f"com.example.s{n - 1}"):
                await anyio.sleep(0.1)
        assert "New text 0" in await text(s, "com.example.s0")
    found = re.findall(r'catalog loaded apps=\d+ read=(\d+) reused=\d+ files="all" steps=(\d+)',
                       log.read_text())
    # Every file read, in two steps (2,000 then 100).
    assert (str(n), "2") in found, found


def arena_heaps(pid):
    """How many heaps glibc's arenas other than the first hold: 64 MiB-aligned reservations,
    a used part then the reserved rest."""
    spans = []
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            fields = line.split()
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            spans.append((lo, hi, fields[1], len(fields) > 5))
    mib64 = 64 << 20
    return sum(1 for (lo, hi, perm, named), (lo2, hi2, perm2, named2) in zip(spans, spans[1:])
               if perm == "rw-p" and perm2 == "---p" and not named and not named2
               and hi == lo2 and lo % mib64 == 0 and hi2 - lo == mib64)


@pytest.mark.parametrize("limit", [None, "8"])
async def test_glibc_malloc_keeps_to_two_arenas_unless_the_user_says_otherwise(gw, limit):
    if b"libc.so.6" not in gw.binary.read_bytes():
        pytest.skip("not a glibc build: musl's malloc has no arenas")
    from conftest import _processes_of
    gw.add_app("com.example.echo")
    env = {} if limit is None else {"MALLOC_ARENA_MAX": limit}
    async with gw.session(**env) as s:
        # Every kind of thread allocates: the async ones, the scanner, the history writer.
        for i in range(20):
            await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "echo",
                                           "args": {"text": f"hi {i}"}})
        gw.add_app("com.example.echo", description="Edited")
        with anyio.fail_after(10):
            while "Edited" not in (await s.call_tool(
                    "aai_guide", {"app": "com.example.echo"})).content[0].text:
                await anyio.sleep(0.05)
        [pid] = [p for p, cmd in _processes_of(gw.home) if cmd.startswith(str(gw.binary))]
        heaps = arena_heaps(pid)
    if limit is None:
        assert heaps <= 1, heaps
    else:
        # The user's own limit stands (and the count above would have seen more arenas).
        assert heaps >= 2, heaps
