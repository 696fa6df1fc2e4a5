"""The version rules (docs/descriptors.md, Versions): `validate NEW --against OLD` reports
each change with the semver bump it needs and fails when the version was not bumped
enough; a hot reload that breaks agents without a MAJOR bump is logged as a warning.

Run: python3 -m pytest tests/mcp -q -k versions
"""
import json

import pytest

from conftest import tool

anyio = pytest.importorskip("anyio")

pytestmark = pytest.mark.anyio


def release(version, tools):
    return {"schemaVersion": "1.0", "version": version, "platform": "linux",
            "app": {"id": "com.example.notes", "name": {"en": "Notes"}, "defaultLang": "en",
                    "description": "Notes"},
            "execution": {"type": "stdio", "command": "notes-adapter"}, "tools": tools}


V1 = [tool("create", {"title": {"type": "string"}}, ["title"]), tool("delete", {"id": {"type": "string"}}, ["id"])]


def write(tmp_path, name, doc):
    path = tmp_path / name
    path.write_text(json.dumps(doc))
    return str(path)


def test_a_removed_tool_released_as_minor_is_caught(gw, tmp_path):
    old = write(tmp_path, "old.json", release("1.0.0", V1))
    new = write(tmp_path, "new.json", release("1.1.0", V1[:1]))
    out = gw.run("validate", new, "--against", old)
    assert out.returncode == 1, out
    assert "MAJOR  tool `delete` (linux) was removed" in out.stdout
    assert "error: the changes need a MAJOR bump, but 1.0.0 → 1.1.0 is a MINOR bump" in out.stdout
    report = json.loads(gw.run("validate", new, "--against", old, "--json").stdout)
    assert report["enough"] is False and report["needed"] == "MAJOR" and report["made"] == "MINOR"
    assert report["changes"] == [{"bump": "MAJOR", "what": "tool `delete` (linux) was removed"}]
    # The same change as 2.0.0 passes.
    new = write(tmp_path, "new2.json", release("2.0.0", V1[:1]))
    out = gw.run("validate", new, "--against", old)
    assert out.returncode == 0 and "ok: 1.0.0 → 2.0.0 is a MAJOR bump; the changes need MAJOR" in out.stdout


def test_minor_and_patch_changes_and_bad_input(gw, tmp_path):
    old = write(tmp_path, "old.json", release("1.0.0", V1))
    added = V1 + [tool("search", {"q": {"type": "string"}})]
    added[0] = tool("create", {"title": {"type": "string"}, "tags": {"type": "array"}}, ["title"])
    out = gw.run("validate", write(tmp_path, "minor.json", release("1.1.0", added)), "--against", old)
    assert out.returncode == 0, out.stdout
    assert "MINOR  tool `search` (linux) was added" in out.stdout
    assert "MINOR  optional parameter `tags` of tool `create` (linux) was added" in out.stdout
    reworded = json.loads(json.dumps(V1))
    reworded[1]["description"] = "Delete a note for good"
    out = gw.run("validate", write(tmp_path, "same.json", release("1.0.0", reworded)), "--against", old)
    assert out.returncode == 1 and "PATCH  the description of tool `delete` (linux) changed" in out.stdout
    out = gw.run("validate", write(tmp_path, "lower.json", release("0.9.0", V1)), "--against", old)
    assert out.returncode == 1 and "lower than the old 1.0.0" in out.stdout
    out = gw.run("validate", str(tmp_path / "missing.json"), "--against", old)
    assert out.returncode == 1 and "cannot read the file" in out.stderr
    out = gw.run("validate", old, old, "--against", old)
    assert out.returncode == 2 and "give one file" in out.stderr


async def test_a_hot_reload_that_breaks_agents_without_a_major_bump_is_logged(gw):
    gw.put("com.example.notes", release("1.0.0", V1))
    async with gw.session() as s:
        guide = (await s.call_tool("aai_guide", {"app": "com.example.notes"})).content[0].text
        assert "`delete`" in guide
        gw.put("com.example.notes", release("1.0.1", V1[:1]))
        with anyio.fail_after(15):
            while "`delete`" in (await s.call_tool("aai_guide", {"app": "com.example.notes"})).content[0].text:
                await anyio.sleep(0.1)
    log = (gw.home / "logs" / "aai-gateway.log").read_text()
    assert ("the reloaded descriptor breaks agents (tool `delete` (linux) was removed) but its version "
            "went from 1.0.0 to 1.0.1 without a MAJOR bump") in log
