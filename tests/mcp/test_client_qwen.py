"""Qwen Code, the real binary (tests/mcp/clients, on Node 22), driven against the gateway:
`aai-gateway clients add qwen` writes `mcpServers.aai = {command, args, trust: true}` into
`~/.qwen/settings.json` and `qwen mcp list` shows it connected; in headless `qwen -p` a
scripted loopback model (`model_standin.py`, OpenAI Chat Completions through
OPENAI_BASE_URL) calls aai_search, aai_guide and aai_exec and reads their results; the
entry's `trust` is what lets a headless run use the gateway's tools (without it Qwen Code
declines them itself); a call nobody allowed reaches the model as CONSENT_REQUIRED with the
grant command, which, run, lets the repeated call through; an app added while a session
runs.

Qwen Code names an MCP server's tools `mcp__<server>__<tool>` and keeps them behind its
`tool_search` (the first turn offers its own tools only); a call by that name runs.

Offline: HOME is the test's, the provider is loopback (OPENAI_BASE_URL, selectedType
"openai"), usage statistics, telemetry and update checks are off in its settings.
"""
import json

from agent_clients import AgentClient, gateway_log, grant_command, run_pasted, wait_until
from model_standin import standin

ECHO = {"app": "com.example.echo", "tool": "echo", "args": {"text": "hello from qwen"}}
RUN = ["-p", "Use the aai gateway to echo a greeting.", "--output-format", "json"]
SETTINGS = {
    "security": {"auth": {"selectedType": "openai"}},
    "model": {"name": "standin-model"},
    "privacy": {"usageStatisticsEnabled": False},
    "telemetry": {"enabled": False},
    "general": {"disableAutoUpdate": True, "disableUpdateNag": True},
}


def three_calls(text="All done."):
    return [{"tool": "mcp__aai__aai_search", "arguments": {"query": "echo"}},
            {"tool": "mcp__aai__aai_guide", "arguments": {"app": "com.example.echo", "tool": "echo"}},
            {"tool": "mcp__aai__aai_exec", "arguments": ECHO},
            {"text": text}]


def qwen(gw, tmp_path, *add):
    agent = AgentClient(gw, tmp_path, "qwen")
    (agent.home / ".qwen").mkdir()
    (agent.home / ".qwen" / "settings.json").write_text(json.dumps(SETTINGS, indent=2) + "\n")
    agent.add_gateway("qwen", *add)
    return agent


def env_for(agent, url="http://127.0.0.1:9"):
    return agent.env(OPENAI_BASE_URL=f"{url}/v1", OPENAI_API_KEY="sk-standin", OPENAI_MODEL="standin-model")


def conversation(model):
    """The conversation's turns (Qwen Code's structured-output side request, which offers
    only `respond_in_schema`, left out)."""
    return [t for t in model.turns() if model.tools_offered(t) != ["respond_in_schema"]]


def test_clients_add_then_qwen_mcp_list_shows_it_connected(gw, tmp_path):
    gw.add_app("com.example.echo")
    agent = qwen(gw, tmp_path)
    settings = json.loads((agent.home / ".qwen" / "settings.json").read_text())
    assert {k: settings[k] for k in SETTINGS} == SETTINGS, "clients add kept the user's settings"
    assert settings["mcpServers"]["aai"] == {"command": str(gw.binary.resolve()),
                                             "args": ["--home", str(gw.home)], "trust": True}, settings
    out = agent.run(["mcp", "list"], env=env_for(agent), timeout=180)
    assert out.code == 0, out
    line = next((l for l in out.out.splitlines() if "aai:" in l), None)
    assert line is not None and line.rstrip().endswith("Connected"), out


def test_search_guide_and_exec_reach_the_model(gw, tmp_path):
    gw.config(consent={"mode": "prompt"}, logLevel="debug")
    gw.add_app("com.example.echo")
    agent = qwen(gw, tmp_path)
    granted = agent.gateway("consent", "grant", "com.example.echo", "--tool", "echo",
                            "--caller", "qwen-cli-mcp-client-aai@stdio", "--start")
    assert granted.returncode == 0, granted.stderr
    with standin(tmp_path / "model", three_calls()) as model:
        out = agent.run(RUN, env=env_for(agent, model.url), timeout=300)
        assert out.code == 0, out
        assert json.loads(out.out)[-1]["result"] == "All done.", out
        assert [t["index"] for t in conversation(model)] == [0, 1, 2, 3]
        results = model.tool_results()
    assert [r["error"] for r in results] == [False, False, False], results
    search, guide, called = (r["text"] for r in results)
    assert "com.example.echo" in search, search
    assert "### `echo`" in guide and "`text` (string, required)" in guide, guide
    assert json.loads(called.split("\n", 1)[0])["echo"]["text"] == "hello from qwen", called


def test_without_trust_qwen_declines_the_gateways_tools_itself(gw, tmp_path):
    """`clients add qwen --no-allow-tools`: no `trust`, and Qwen Code's headless run refuses
    every tool of the gateway before the gateway hears of it."""
    gw.add_app("com.example.echo")
    agent = qwen(gw, tmp_path, "--no-allow-tools")
    settings = json.loads((agent.home / ".qwen" / "settings.json").read_text())
    assert "trust" not in settings["mcpServers"]["aai"], settings
    script = [{"tool": "mcp__aai__aai_exec", "arguments": ECHO}, {"text": "Done."}]
    with standin(tmp_path / "model", script) as model:
        out = agent.run(RUN, env=env_for(agent, model.url), timeout=300)
        assert out.code == 0, out
        (result,) = model.tool_results()
    assert "requires permission" in result["text"] and "declined" in result["text"], result


def test_a_call_nobody_allowed_tells_the_model_the_grant_command_and_runs_after_it(gw, tmp_path):
    gw.config(consent={"mode": "prompt"}, logLevel="debug")
    gw.add_app("com.example.echo")
    agent = qwen(gw, tmp_path)
    script = [{"tool": "mcp__aai__aai_exec", "arguments": ECHO}, {"text": "Done."}]
    with standin(tmp_path / "model", script) as model:
        out = agent.run(RUN, env=env_for(agent, model.url), timeout=300)
        assert out.code == 0, out
        refused = model.tool_results()[-1]
    text = refused["text"]
    assert "CONSENT_REQUIRED" in text or "Consent required" in text, text
    command = grant_command(text)
    assert command.startswith(f"aai-gateway --home {gw.home} consent grant com.example.echo --tool echo"), command
    granted = run_pasted(gw, command)
    assert granted.returncode == 0, granted.stderr
    with standin(tmp_path / "model2", script) as model:
        out = agent.run(RUN, env=env_for(agent, model.url), timeout=300)
        assert out.code == 0, out
        ran = model.tool_results()[-1]
    assert json.loads(ran["text"].split("\n", 1)[0])["echo"]["text"] == "hello from qwen", ran


def test_an_app_added_mid_session(gw, tmp_path):
    """An app added while `qwen -p` runs: the gateway's search finds it in the same
    session, and `aai_exec` reaches it; Qwen Code does not list the tools again on
    notifications/tools/list_changed, so the new app's own `app_…` tool is unknown to it
    until the next session."""
    gw.config(logLevel="info")
    gw.add_app("com.example.echo")
    agent = qwen(gw, tmp_path)
    script = [{"tool": "mcp__aai__aai_search", "arguments": {"query": "weather"}},
              {"tool": "mcp__aai__aai_search", "arguments": {"query": "weather"}, "wait_for": "go"},
              {"tool": "mcp__aai__app_com_example_weather", "arguments": {}},
              {"text": "Done."}]
    with standin(tmp_path / "model", script) as model:
        proc = agent.start(RUN, env=env_for(agent, model.url))
        wait_until(lambda: model.reached(1), timeout=180, what="the second turn")
        gw.add_app("com.example.weather", description="Weather forecasts")
        wait_until(lambda: "apps=3" in gateway_log(gw), timeout=60, what="the gateway to load the new app")
        model.release("go")
        out = agent.finish(proc, timeout=300)
        assert out.code == 0, out
        results = model.tool_results()
    assert "com.example.weather" not in results[0]["text"], results[0]
    assert "com.example.weather" in results[1]["text"], results[1]
    assert "not found on MCP server" in results[2]["text"], results[2]
