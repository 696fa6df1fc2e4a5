"""The first hour of a new user: the README's Notes example works on any machine (its
commands, as written, against a fresh home), and `--scan` says when a command an adapter
or a server starts is not found, without running it.

Run: python3 -m pytest tests/mcp -q -k first_hour
"""
import json
import shutil
import subprocess

from conftest import ROOT


def test_the_readmes_notes_example_works_as_written(gw, tmp_path):
    readme = (ROOT / "README.md").read_text()
    assert "cp -r fixtures/notes ~/.aai/org.example.notes" in readme
    shutil.copytree(ROOT / "fixtures" / "notes", gw.home / "org.example.notes")
    scan = gw.run("--scan", check=True).stdout
    line = next(l for l in scan.splitlines() if l.startswith("org.example.notes"))
    assert " yes " in line, scan
    assert "0 commands not found" in scan, scan
    added = gw.run("call", "org.example.notes", "addNote", '{"text": "buy milk"}', check=True)
    assert json.loads(added.stdout) == {"added": "buy milk"}
    listed = gw.run("call", "org.example.notes", "listNotes", check=True)
    assert json.loads(listed.stdout) == {"notes": ["buy milk"]}


def test_scan_names_a_command_that_is_found_nowhere_and_runs_nothing(gw, tmp_path):
    marker = tmp_path / "ran"
    doc = json.loads((ROOT / "fixtures" / "notes" / "aai.json").read_text())
    doc["app"]["id"] = "org.example.gone"
    doc["execution"] = {"type": "stdio", "command": "notes-aai-adapter-nowhere"}
    gw.put("org.example.gone", doc)
    server = {**doc, "app": {**doc["app"], "id": "org.example.server"},
              "execution": {"type": "mcp", "command": "./not-here.sh"}}
    server.pop("tools")
    gw.put("org.example.server", server)
    # A relative command that is there and runnable is found (it is never run).
    script = gw.home / "org.example.here" / "adapter.sh"
    script.parent.mkdir()
    script.write_text(f"#!/bin/sh\ntouch {marker}\n")
    script.chmod(0o755)
    gw.put("org.example.here", {**doc, "app": {**doc["app"], "id": "org.example.here"},
                                "execution": {"type": "stdio", "command": "./adapter.sh"}})
    scan = gw.run("--scan").stdout
    rows = {l.split()[0]: l for l in scan.splitlines() if l.startswith("org.example.")}
    assert " no " in rows["org.example.gone"] and " no " in rows["org.example.server"], scan
    assert " yes " in rows["org.example.here"], scan
    assert "2 commands not found" in scan, scan
    assert "org.example.gone: not usable here: its command `notes-aai-adapter-nowhere` is not found on PATH" in scan
    assert "org.example.server: not usable here: its command `./not-here.sh` is not found (" in scan
    usable = {a["id"]: a["bindings"][0]["usable"]
              for a in json.loads(gw.run("--scan", "--json", check=True).stdout)["apps"]}
    assert usable["org.example.gone"] is False and usable["org.example.here"] is True
    assert not marker.exists(), "nothing was run to look"


def test_the_readme_keeps_its_first_hour_and_names_every_client(gw):
    """The README's first commands, how to add the gateway to a client (every client
    `clients` knows, by name) and how to write an `aai.json` stay in it."""
    readme = (ROOT / "README.md").read_text()
    for heading in ("## Install and run", "### From source", "## Use it from an MCP client",
                    "## Writing an `aai.json`", "## Configuration"):
        assert f"\n{heading}" in readme, heading
    assert "\ntests/run\n" in readme, "the one command that runs all tests"
    known = json.loads(gw.run("clients", "--json", check=True).stdout)["clients"]
    section = readme.split("## Use it from an MCP client", 1)[1].split("\n## ", 1)[0]
    missing = [c["name"] for c in known if c["name"] not in section]
    assert not missing, missing


def test_the_readmes_first_command_builds_from_this_tree():
    """No release is published: the README's first command must work from a checkout
    (build and scan with the built-in defaults), and the package one-liners come after,
    marked as waiting for a release."""
    readme = (ROOT / "README.md").read_text()
    install = readme.split("\n## Install and run", 1)[1].split("\n## ", 1)[0]
    first_block = install.split("```sh\n", 1)[1].split("```", 1)[0]
    assert first_block.splitlines()[0].startswith("cargo run --release --locked -p aai-gateway -- --scan"), first_block
    assert "a C compiler" in install.split("```sh", 1)[0], "what the build needs, before it"
    packages = install.index("npx -y aai-gateway")
    assert install.rfind("once a release is out", 0, packages) != -1, "the packages wait for a release"
