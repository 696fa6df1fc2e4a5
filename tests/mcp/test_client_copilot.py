"""GitHub Copilot CLI, the real binary (tests/mcp/clients), driven against the gateway
offline: `aai-gateway clients add copilot` writes `mcpServers.aai = {type: "local",
command, args, tools: ["*"]}` into `~/.copilot/mcp-config.json` and `copilot mcp get aai`
reads it back; in headless `copilot -p` a scripted loopback model (`model_standin.py`,
OpenAI Chat Completions through its own BYOK settings: COPILOT_OFFLINE=true,
COPILOT_PROVIDER_BASE_URL, no GitHub sign-in) calls aai_search, aai_guide and aai_exec and
reads their results; a call nobody allowed reaches the model as CONSENT_REQUIRED with the
grant command, which, run, lets the repeated call through; an app added while a session
runs.

Copilot CLI names an MCP server's tools `<server>-<tool>` (`aai-aai_search`). It asks
before each of them and keeps no user-level setting that allows a server's tools (only
`--allow-tool aai` on the command line, or "always" at its own prompt, kept per folder):
`clients add copilot` has no permission to offer, and the headless runs here pass
`--allow-tool aai`.

Offline: HOME is the test's; COPILOT_OFFLINE=true turns off GitHub authentication,
telemetry, the GitHub MCP server and auto-update; --disable-builtin-mcps,
--no-auto-update and --disable-client-telemetry say the same on the command line.
"""
import json

import pytest

from agent_clients import AgentClient, gateway_log, grant_command, run_pasted, wait_until
from model_standin import standin

ECHO = {"app": "com.example.echo", "tool": "echo", "args": {"text": "hello from copilot"}}
FLAGS = ["--no-auto-update", "--disable-client-telemetry", "--disable-builtin-mcps", "--no-custom-instructions"]
RUN = ["-p", "Use the aai gateway to echo a greeting.", "--allow-tool", "aai", *FLAGS]


def three_calls(text="All done."):
    return [{"tool": "aai-aai_search", "arguments": {"query": "echo"}},
            {"tool": "aai-aai_guide", "arguments": {"app": "com.example.echo", "tool": "echo"}},
            {"tool": "aai-aai_exec", "arguments": ECHO},
            {"text": text}]


def copilot(gw, tmp_path):
    agent = AgentClient(gw, tmp_path, "copilot")
    agent.add_gateway("copilot")
    return agent


def env_for(agent, url="http://127.0.0.1:9"):
    return agent.env(COPILOT_OFFLINE="true", COPILOT_AUTO_UPDATE="false", COPILOT_PROVIDER_BASE_URL=f"{url}/v1",
                     COPILOT_PROVIDER_TYPE="openai", COPILOT_PROVIDER_API_KEY="sk-standin",
                     COPILOT_MODEL="standin-model")


def test_clients_add_then_copilot_reads_the_entry(gw, tmp_path):
    agent = copilot(gw, tmp_path)
    entry = json.loads((agent.home / ".copilot" / "mcp-config.json").read_text())["mcpServers"]["aai"]
    assert entry == {"type": "local", "command": str(gw.binary.resolve()), "args": ["--home", str(gw.home)],
                     "tools": ["*"]}, entry
    out = agent.run(["mcp", "get", "aai"], env=env_for(agent), timeout=120)
    assert out.code == 0, out
    assert "Status: Enabled" in out.out and f"Command: {gw.binary.resolve()} --home {gw.home}" in out.out, out
    assert "Source: User" in out.out, out


def test_search_guide_and_exec_reach_the_model(gw, tmp_path):
    gw.config(consent={"mode": "prompt"}, logLevel="debug")
    gw.add_app("com.example.echo")
    agent = copilot(gw, tmp_path)
    granted = agent.gateway("consent", "grant", "com.example.echo", "--tool", "echo",
                            "--caller", "copilot-cli@stdio", "--start")
    assert granted.returncode == 0, granted.stderr
    with standin(tmp_path / "model", three_calls()) as model:
        out = agent.run(RUN, env=env_for(agent, model.url), timeout=300)
        assert out.code == 0, out
        assert "All done." in out.out, out
        turns = model.turns()
        results = model.tool_results()
    assert [t["index"] for t in turns] == [0, 1, 2, 3], [t["index"] for t in turns]
    search, guide, called = (r["text"] for r in results)
    assert "com.example.echo" in search, search
    assert "### `echo`" in guide and "`text` (string, required)" in guide, guide
    assert '"text":"hello from copilot"' in called, called
    offered = {t["function"]["name"] for t in turns[0]["body"]["tools"]}
    assert {"aai-aai_search", "aai-aai_guide", "aai-aai_exec", "aai-aai_batch", "aai-app_com_example_echo"} <= offered


def test_without_allow_tool_copilot_refuses_the_gateways_tools_itself(gw, tmp_path):
    gw.add_app("com.example.echo")
    agent = copilot(gw, tmp_path)
    script = [{"tool": "aai-aai_exec", "arguments": ECHO}, {"text": "Done."}]
    with standin(tmp_path / "model", script) as model:
        out = agent.run(["-p", "Echo a greeting.", *FLAGS], env=env_for(agent, model.url), timeout=300)
        assert out.code == 0, out
        (result,) = model.tool_results()
    assert "Permission denied because no interactive user response was available" in result["text"], result


def test_a_call_nobody_allowed_tells_the_model_the_grant_command_and_runs_after_it(gw, tmp_path):
    gw.config(consent={"mode": "prompt"}, logLevel="debug")
    gw.add_app("com.example.echo")
    agent = copilot(gw, tmp_path)
    script = [{"tool": "aai-aai_exec", "arguments": ECHO}, {"text": "Done."}]
    with standin(tmp_path / "model", script) as model:
        out = agent.run(RUN, env=env_for(agent, model.url), timeout=300)
        assert out.code == 0, out
        refused = model.tool_results()[-1]
    text = refused["text"]
    # copilot -p declines the gateway's form without showing it: a denial (nothing
    # remembered), whose message says how the user can allow the call.
    assert "Permission denied" in text and "they can allow it by running" in text, text
    command = grant_command(text)
    assert command.startswith(f"aai-gateway --home {gw.home} consent grant com.example.echo --tool echo"), command
    granted = run_pasted(gw, command)
    assert granted.returncode == 0, granted.stderr
    with standin(tmp_path / "model2", script) as model:
        out = agent.run(RUN, env=env_for(agent, model.url), timeout=300)
        assert out.code == 0, out
        ran = model.tool_results()[-1]
    assert '"text":"hello from copilot"' in ran["text"], ran


def test_an_app_added_mid_session(gw, tmp_path):
    """An app added while `copilot -p` runs: the gateway's search finds it, and Copilot CLI
    (on the 2026-07-28 revision, listening through subscriptions/listen) offers the new
    app's tool from the next turn."""
    gw.config(logLevel="info")
    gw.add_app("com.example.echo")
    agent = copilot(gw, tmp_path)
    script = [{"tool": "aai-aai_search", "arguments": {"query": "weather"}},
              {"tool": "aai-aai_search", "arguments": {"query": "weather"}, "wait_for": "go"},
              {"text": "Done."}]
    with standin(tmp_path / "model", script) as model:
        proc = agent.start(RUN, env=env_for(agent, model.url))
        wait_until(lambda: model.reached(1), timeout=180, what="the second turn")
        gw.add_app("com.example.weather", description="Weather forecasts")
        wait_until(lambda: "apps=3" in gateway_log(gw), timeout=60, what="the gateway to load the new app")
        model.release("go")
        out = agent.finish(proc, timeout=300)
        assert out.code == 0, out
        turns = model.turns()
        results = model.tool_results()
    assert "com.example.weather" not in results[0]["text"], results[0]
    assert "com.example.weather" in results[1]["text"], results[1]
    names = [{t["function"]["name"] for t in turn["body"]["tools"]} for turn in turns]
    assert "aai-app_com_example_weather" not in names[0], names[0]
    assert "aai-app_com_example_weather" in names[-1], names[-1]
