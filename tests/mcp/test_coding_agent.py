"""A real coding agent behind the gateway: OpenCode (npm `opencode-linux-x64`, run as
`opencode acp`) as an ACP app, its model a loopback fake of an OpenAI-compatible service
(`fake_llm.py`) whose scripted answers make it write a file, run a shell command, then
answer. The agent's permission requests reach the MCP client as consent questions; what
it was allowed to do happens in the call's folder.

OpenCode is kept off the network: the provider is the fake (`@ai-sdk/openai-compatible`,
built into the binary), models.dev, autoupdate, sharing, default plugins and LSP
downloads are turned off by their environment variables, and its background install of
`@opencode-ai/plugin` into its config folder is skipped by a seeded lock file (with npm's
registry pointed at the fake in case that changes). Its config, data, cache and state
folders are the test's own.

Install: npm ci --prefix tests/mcp/agents
Run: python3 -m pytest tests/mcp/test_coding_agent.py -q
"""
import contextlib
import json
from pathlib import Path

import pytest

from conftest import ROOT, deciding, need_peer, running
from fake_llm import fake_llm

anyio = pytest.importorskip("anyio")
pytest.importorskip("mcp", reason="PyPI package mcp is not installed")

pytestmark = pytest.mark.anyio

OPENCODE = ROOT / "tests" / "mcp" / "agents" / "node_modules" / "opencode-linux-x64" / "bin" / "opencode"
APP = "dev.opencode.test"
FINAL = "Done: notes.txt is written and out.txt says hi."


def opencode_app(gw, base: Path, llm_url: str):
    """OpenCode as the ACP app APP, with its own folders under `base` and the fake LLM as
    its only provider; editing files and running commands ask first."""
    need_peer(OPENCODE.exists(), "npm opencode-linux-x64 (npm ci --prefix tests/mcp/agents)")
    config = base / "config"
    # OpenCode installs @opencode-ai/plugin into each config folder in the background
    # unless its lock file already names it and node_modules exists.
    (config / "opencode" / "node_modules").mkdir(parents=True)
    (config / "opencode" / "package-lock.json").write_text(json.dumps(
        {"lockfileVersion": 3, "packages": {"": {"dependencies": {"@opencode-ai/plugin": "*"}}}}))
    # The binary unpacks a native library into its temporary folder at each start and
    # leaves it there: the test's own folder, not /tmp.
    (base / "tmp").mkdir()
    settings = base / "opencode.json"
    settings.write_text(json.dumps({
        "autoupdate": False,
        "share": "disabled",
        "model": "fake/fake-model",
        "small_model": "fake/fake-model",
        "enabled_providers": ["fake"],
        "provider": {"fake": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Fake LLM",
            "options": {"baseURL": f"{llm_url}/v1", "apiKey": "fake-key"},
            "models": {"fake-model": {"name": "Fake model", "tool_call": True}},
        }},
        "permission": {"edit": "ask", "bash": "ask", "webfetch": "deny"},
    }))
    env = {
        "OPENCODE_CONFIG": str(settings), "TMPDIR": str(base / "tmp"),
        "XDG_CONFIG_HOME": str(config), "XDG_DATA_HOME": str(base / "data"),
        "XDG_CACHE_HOME": str(base / "cache"), "XDG_STATE_HOME": str(base / "state"),
        "OPENCODE_DISABLE_AUTOUPDATE": "1", "OPENCODE_DISABLE_MODELS_FETCH": "1",
        "OPENCODE_DISABLE_SHARE": "1", "OPENCODE_DISABLE_DEFAULT_PLUGINS": "1",
        "OPENCODE_DISABLE_LSP_DOWNLOAD": "1", "OPENCODE_DISABLE_CLAUDE_CODE": "1",
        "OPENCODE_DISABLE_EXTERNAL_SKILLS": "1", "OPENCODE_DISABLE_PROJECT_CONFIG": "1",
        "OPENCODE_MODELS_URL": llm_url, "npm_config_registry": f"{llm_url}/npm/",
    }
    gw.put(APP, {
        "schemaVersion": "1.0", "version": "1.0.0", "platform": "linux",
        "app": {"id": APP, "name": {"en": "OpenCode"}, "defaultLang": "en",
                "description": "A coding agent that edits files and runs commands"},
        "execution": {"type": "acp", "start": {"command": str(OPENCODE), "args": ["acp"], "env": env}},
        "tools": [{"name": "ask", "description": "Give the agent a task in plain language",
                   "parameters": {"type": "object", "properties": {"prompt": {"type": "string"}},
                                  "required": ["prompt"]}}],
    })


async def test_opencode_edits_and_runs_a_command_with_the_users_consent(gw, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    script = [
        {"tool": "write", "arguments": {"filePath": str(work / "notes.txt"), "content": "written by the agent\n"}},
        {"tool": "bash", "arguments": {"command": "echo hi > out.txt", "description": "Write hi to out.txt"}},
        {"text": FINAL},
    ]
    with fake_llm(tmp_path / "llm", script) as (url, requests):
        opencode_app(gw, tmp_path / "opencode", url)
        gw.config(consent={"mode": "prompt"})
        asked = []
        elicit = deciding({"": "once"}, asked)

        seen = []

        async def on_progress(progress, total, message):
            seen.append(message)

        async with gw.session(elicitation=elicit) as s:
            with anyio.fail_after(60):
                r = await s.call_tool("aai_exec", {"app": APP, "tool": "ask", "args": {
                    "prompt": "Write notes.txt, then put hi into out.txt", "cwd": str(work)}},
                    progress_callback=on_progress)
            assert not r.is_error, r.content[0].text
            assert FINAL in r.content[0].text
            assert FINAL in "".join(m or "" for m in seen), "the answer was streamed as progress"
            structured = r.structured_content
            assert structured["stopReason"] == "end_turn"
            calls = structured["toolCalls"]
            assert [(c["kind"], c["status"]) for c in calls] == [("edit", "completed"), ("execute", "completed")], calls
            assert any("echo hi > out.txt" in c["title"] for c in calls), calls

            assert any("`ask/edit`" in q for q in asked), asked
            assert any("`ask/execute`" in q and "echo hi > out.txt" in q for q in asked), asked
            assert (work / "notes.txt").read_text() == "written by the agent\n"
            assert (work / "out.txt").read_text() == "hi\n"
            assert len(running(tmp_path, str(OPENCODE))) == 1, "the agent runs until the gateway stops"

        turns = [q for q in requests() if q["method"] == "POST" and not q["side"]]
        assert len(turns) == 3, "one model turn per tool call and one for the answer"
        users = [m["content"] for m in turns[0]["body"]["messages"] if m["role"] == "user"]
        assert any("Write notes.txt, then put hi into out.txt" in str(u) for u in users), users
        assert all(q["path"].startswith("/v1/") for q in requests()), "OpenCode asked the fake for nothing else"


async def test_a_refused_command_is_not_run(gw, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    script = [
        {"tool": "bash", "arguments": {"command": "echo hi > out.txt", "description": "Write hi to out.txt"}},
        {"text": "I was not allowed to run it."},
    ]
    with fake_llm(tmp_path / "llm", script) as (url, requests):
        opencode_app(gw, tmp_path / "opencode", url)
        gw.config(consent={"mode": "prompt"})
        asked = []
        elicit = deciding({"`ask/execute`": "deny", "": "once"}, asked)

        async with gw.session(elicitation=elicit) as s:
            with anyio.fail_after(60):
                r = await s.call_tool("aai_exec", {"app": APP, "tool": "ask", "args": {
                    "prompt": "Put hi into out.txt", "cwd": str(work)}})
        assert not r.is_error, r.content[0].text
        assert any("`ask/execute`" in q and "echo hi > out.txt" in q for q in asked), asked
        assert not (work / "out.txt").exists(), "a refused command must not run"
        calls = r.structured_content["toolCalls"]
        assert [(c["kind"], c["status"]) for c in calls] == [("execute", "failed")], calls


async def test_a_command_still_running_when_the_client_leaves_is_stopped(gw, tmp_path):
    """OpenCode runs commands in a session of their own (setsid), outside the agent's
    process group; the gateway still stops them when it exits. (With a call in flight
    the gateway outlives the closed stdin for rmcp's drain of up to 5 s, so here it is
    the SDK's SIGTERM, 2 s after closing, that ends it.)"""
    work = tmp_path / "work"
    work.mkdir()
    script = [{"tool": "bash", "arguments": {"command": "sleep 97", "description": "Wait", "timeout": 600000}},
              {"text": "Slept."}]
    with fake_llm(tmp_path / "llm", script) as (url, requests):
        opencode_app(gw, tmp_path / "opencode", url)
        async with anyio.create_task_group() as tg:
            async with gw.session() as s:
                async def call():
                    with contextlib.suppress(Exception):  # the connection closes under it
                        await s.call_tool("aai_exec", {"app": APP, "tool": "ask", "args": {
                            "prompt": "Wait a while", "cwd": str(work)}})
                tg.start_soon(call)
                with anyio.fail_after(30):
                    while not running(tmp_path, "sleep 97"):
                        await anyio.sleep(0.05)
            tg.cancel_scope.cancel()
        with anyio.move_on_after(5):
            while running(tmp_path, "sleep 97") or running(tmp_path, str(OPENCODE)):
                await anyio.sleep(0.05)
        assert not running(tmp_path, "sleep 97"), "the agent's command outlived the gateway"
        assert not running(tmp_path, str(OPENCODE))
