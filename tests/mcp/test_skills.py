"""Agent Skills as apps (docs/skills.md): a `SKILL.md` folder in `$AAI_HOME/skills/` or
`~/.claude/skills/` becomes the app `skill.<name>`; its guide is the front matter; `read`
returns the body, one section or one nested file; a `file` that leaves the folder is
refused.

Run: python3 -m pytest tests/mcp -q -k skills
"""
import json

import pytest

MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio

SKILL = """---
name: pdf-tools
description: >
  Fill in PDF forms and
  extract their text
---

# PDF tools

Use these steps for any PDF.

## Filling forms

Read `reference/forms.md` first.

## Extracting text

Run the extractor.
"""


def write_skill(root, folder, text, files=None):
    d = root / folder
    d.mkdir(parents=True)
    (d / "SKILL.md").write_text(text)
    for name, content in (files or {}).items():
        (d / name).parent.mkdir(parents=True, exist_ok=True)
        (d / name).write_text(content)
    return d


async def test_a_skill_folder_is_an_app_whose_tool_reads_it(gw):
    write_skill(gw.home / "skills", "pdf", SKILL, {"reference/forms.md": "Field names: …", "scripts/fill.py": "print()"})
    # Claude Code's skills folder is searched too.
    write_skill(gw.tmp / ".claude" / "skills", "notes", "---\nname: meeting-notes\ndescription: Write meeting notes\n---\nBody.\n")
    # A folder without front matter is left out; a second `pdf-tools` does not replace the first.
    write_skill(gw.tmp / ".claude" / "skills", "broken", "no front matter here")
    write_skill(gw.tmp / ".claude" / "skills", "pdf-again", "---\nname: pdf-tools\ndescription: Another\n---\nOther.\n")
    async with gw.session() as s:
        found = (await s.call_tool("aai_search", {"query": "pdf forms"})).structured_content["results"]
        assert found[0]["app"] == "skill.pdf-tools", found
        assert found[0]["description"] == "Fill in PDF forms and extract their text"
        guide = (await s.call_tool("aai_guide", {"app": "skill.pdf-tools"})).content[0].text
        assert "Filling forms" in guide and "reference/forms.md" in guide, guide
        read = lambda **args: s.call_tool("aai_exec", {"app": "skill.pdf-tools", "tool": "read", "args": args})
        body = (await read()).content[0].text
        assert body.startswith("# PDF tools") and "name: pdf-tools" not in body
        section = (await read(section="filling forms")).content[0].text
        assert section.startswith("## Filling forms") and "Extracting" not in section
        assert (await read(file="reference/forms.md")).content[0].text == "Field names: …"
        for bad in ["../../etc/passwd", "/etc/passwd", "reference/../../SKILL.md"]:
            with pytest.raises(MCPError) as e:
                await read(file=bad)
            assert e.value.error.data["type"] == "INVALID_PARAMS" and "not a file of this skill" in e.value.error.message
        with pytest.raises(MCPError) as e:
            await read(section="nope")
        assert "`Filling forms`" in e.value.error.data["detail"]
        notes = (await s.call_tool("aai_exec", {"app": "skill.meeting-notes", "tool": "read", "args": {}})).content[0].text
        assert notes.strip() == "Body."
        # The resource is the descriptor the gateway wrote for it.
        described = json.loads((await s.read_resource("app:skill.pdf-tools")).contents[0].text)
        assert described["execution"]["type"] == "skill"
        apps = [t.name for t in (await s.list_tools()).tools]
        assert not any("broken" in a for a in apps)


async def test_skill_md_itself_stays_inside_its_folder(gw, tmp_path):
    """SKILL.md gets the checks a `file` gets: a link out of the folder (made after the
    scan) and a FIFO are refused at once, never read or waited on; headings inside code
    fences are not listed as sections."""
    import os
    d = write_skill(gw.home / "skills", "swap", "---\nname: swap\ndescription: d\n---\n# Real\n\n```\n# Fenced\n```\n")
    async with gw.session() as s:
        guide = (await s.call_tool("aai_guide", {"app": "skill.swap"})).content[0].text
        assert "`Real`" in guide and "Fenced" not in guide.split("Sections:", 1)[1].split("\n")[0]
        outside = tmp_path / "outside.md"
        outside.write_text("---\nname: x\n---\nSECRET OUTSIDE")
        (d / "SKILL.md").unlink()
        (d / "SKILL.md").symlink_to(outside)
        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", {"app": "skill.swap", "tool": "read", "args": {}})
        assert "SECRET" not in str(e.value.error) and e.value.error.data["type"] == "INVALID_PARAMS"
        (d / "SKILL.md").unlink()
        os.mkfifo(d / "SKILL.md")
        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", {"app": "skill.swap", "tool": "read", "args": {}})
        assert e.value.error.data["type"] == "INVALID_PARAMS"
