"""Codex, the real binary (tests/mcp/clients), driven against the gateway: `aai-gateway
clients add codex` writes `[mcp_servers.aai]` into `$CODEX_HOME/config.toml` and `codex mcp
list` shows it; in `codex exec` a scripted loopback model (`model_standin.py`, the OpenAI
Responses API through a custom `[model_providers.standin]` with a loopback `base_url`)
calls aai_search, aai_guide and aai_exec and reads their results; Codex's own approval of
MCP tool calls is what `clients add` turns off (`default_tools_approval_mode = "approve"`);
a call nobody allowed reaches the model as CONSENT_REQUIRED with the grant command, which,
run, lets the repeated call through; an app added while a session runs.

Codex offers an MCP server's tools to the model as one Responses `namespace` tool
(`mcp__aai`) whose functions are the gateway's tools by their own names; a call names the
namespace and the function.

Offline: HOME and CODEX_HOME are the test's, the provider is loopback, update checks and
analytics are off (`check_for_update_on_startup = false`, `[analytics] enabled = false`).
"""
import json
import re

import pytest

from agent_clients import AgentClient, gateway_log, grant_command, run_pasted, wait_until
from model_standin import standin

ECHO = {"app": "com.example.echo", "tool": "echo", "args": {"text": "hello from codex"}}
PROMPT = ["exec", "--skip-git-repo-check", "Use the aai gateway to echo a greeting."]


def call(tool, arguments, **extra):
    return {"tool": tool, "namespace": "mcp__aai", "arguments": arguments, **extra}


def three_calls(text="All done."):
    return [call("aai_search", {"query": "echo"}),
            call("aai_guide", {"app": "com.example.echo", "tool": "echo"}),
            call("aai_exec", ECHO),
            {"text": text}]


class Codex:
    """Codex with its CODEX_HOME in the test's HOME, its provider the standin at `url`."""

    def __init__(self, gw, tmp_path, url, *add_args):
        self.agent = AgentClient(gw, tmp_path, "codex")
        self.config_home = self.agent.home / ".codex"
        self.config_home.mkdir()
        self.config = self.config_home / "config.toml"
        self.config.write_text(f'''model = "standin-model"
model_provider = "standin"
check_for_update_on_startup = false

[model_providers.standin]
name = "standin"
base_url = "{url}/v1"
wire_api = "responses"
env_key = "STANDIN_API_KEY"

[analytics]
enabled = false
''')
        self.added = self.agent.add_gateway("codex", *add_args)

    def env(self):
        return self.agent.env(CODEX_HOME=str(self.config_home), STANDIN_API_KEY="sk-standin")

    def run(self, args=PROMPT, timeout=240):
        return self.agent.run(args, env=self.env(), timeout=timeout)


def output(result):
    """What a tool returned, from Codex's tool output text ("Wall time: …\nOutput:\n…")."""
    text = result["text"]
    return text.split("Output:\n", 1)[1] if "Output:\n" in text else text


def echoed(result):
    return json.loads(output(result))["echo"]["text"]


def namespace_tools(turn):
    """The functions of the `mcp__aai` namespace tool a turn offered: name -> parameters."""
    ns = next(t for t in turn["body"]["tools"] if t.get("name") == "mcp__aai")
    assert ns["type"] == "namespace", ns
    return {f["name"]: f["parameters"] for f in ns["tools"]}


def listed_tools(gw):
    """The gateway's tools as a client sees them: name -> input schema."""
    import anyio

    async def go():
        async with gw.session() as s:
            return {t.name: t.input_schema for t in (await s.list_tools()).tools}
    return anyio.run(go)


def test_clients_add_then_codex_mcp_list_shows_it(gw, tmp_path):
    gw.add_app("com.example.echo")
    codex = Codex(gw, tmp_path, "http://127.0.0.1:9")
    text = codex.config.read_text()
    assert text.startswith('model = "standin-model"'), "the user's settings stay first"
    assert (f'[mcp_servers.aai]\ncommand = "{gw.binary.resolve()}"\nargs = ["--home", "{gw.home}"]\n'
            'default_tools_approval_mode = "approve"\n') in text, text
    out = codex.run(["mcp", "list", "--json"], timeout=120)
    assert out.code == 0, out
    servers = {s["name"]: s for s in json.loads(out.out)}
    assert servers["aai"]["enabled"] is True, servers
    assert servers["aai"]["transport"]["command"] == str(gw.binary.resolve()), servers
    assert servers["aai"]["transport"]["args"] == ["--home", str(gw.home)], servers


def test_search_guide_and_exec_reach_the_model(gw, tmp_path):
    gw.config(consent={"mode": "prompt"}, logLevel="debug")
    gw.add_app("com.example.echo")
    with standin(tmp_path / "model", three_calls()) as model:
        codex = Codex(gw, tmp_path, model.url)
        granted = codex.agent.gateway("consent", "grant", "com.example.echo", "--tool", "echo",
                                      "--caller", "codex-mcp-client@stdio", "--start")
        assert granted.returncode == 0, granted.stderr
        out = codex.run()
        assert out.code == 0, out
        assert out.out.strip().endswith("All done."), out
        turns = model.turns()
        assert [t["index"] for t in turns] == [0, 1, 2, 3], [t["index"] for t in turns]
        results = model.tool_results()
    assert len(results) == 3, results
    search, guide = output(results[0]), output(results[1])
    assert "com.example.echo" in search, search
    assert "### `echo`" in guide and "`text` (string, required)" in guide, guide
    assert echoed(results[2]) == "hello from codex", results[2]
    # Every tool the gateway lists reached the model in Codex's namespace, by its own name
    # and with the gateway's own schema.
    offered = namespace_tools(turns[0])
    assert set(offered) == set(listed_tools(gw)), (sorted(offered), sorted(listed_tools(gw)))
    for name, schema in listed_tools(gw).items():
        assert offered[name].get("required") == schema.get("required"), name
        assert set(offered[name].get("properties", {})) == set(schema.get("properties", {})), name


def test_codex_asks_for_mcp_calls_unless_clients_add_allowed_them(gw, tmp_path):
    """Without `default_tools_approval_mode = "approve"` (`clients add codex
    --no-allow-tools`), `codex exec` refuses the gateway's tools itself: its approval
    policy is "never" and MCP calls need approval."""
    gw.add_app("com.example.echo")
    with standin(tmp_path / "model", [call("aai_exec", ECHO), {"text": "Done."}]) as model:
        codex = Codex(gw, tmp_path, model.url, "--no-allow-tools")
        assert "default_tools_approval_mode" not in codex.config.read_text()
        out = codex.run()
        assert out.code == 0, out
        refused = model.tool_results()
    assert len(refused) == 1 and "requires approval" in refused[0]["text"], refused
    # Allowed through `clients add` (the entry is there: only the approval mode is added).
    again = codex.agent.add_gateway("codex")
    assert "default_tools_approval_mode" in again.stdout
    with standin(tmp_path / "model2", [call("aai_exec", ECHO), {"text": "Done."}]) as model:
        config = codex.config.read_text()
        codex.config.write_text(re.sub(r'base_url = "[^"]*"', f'base_url = "{model.url}/v1"', config))
        out = codex.run()
        assert out.code == 0, out
        ran = model.tool_results()
    assert echoed(ran[0]) == "hello from codex", ran


def test_a_call_nobody_allowed_tells_the_model_the_grant_command_and_runs_after_it(gw, tmp_path):
    gw.config(consent={"mode": "prompt"}, logLevel="debug")
    gw.add_app("com.example.echo")
    with standin(tmp_path / "model", [call("aai_exec", ECHO), {"text": "Done."}]) as model:
        codex = Codex(gw, tmp_path, model.url)
        out = codex.run()
        assert out.code == 0, out
        refused = model.tool_results()[-1]
    text = refused["text"]
    # codex exec (approval policy never) declines the gateway's form without showing it: a denial (nothing
    # remembered), whose message says how the user can allow the call.
    assert "Permission denied" in text and "they can allow it by running" in text, text
    command = grant_command(text)
    assert command.startswith(f"aai-gateway --home {gw.home} consent grant com.example.echo --tool echo"), command
    granted = run_pasted(gw, command)
    assert granted.returncode == 0, granted.stderr
    with standin(tmp_path / "model2", [call("aai_exec", ECHO), {"text": "Done."}]) as model:
        config = codex.config.read_text()
        codex.config.write_text(re.sub(r'base_url = "[^"]*"', f'base_url = "{model.url}/v1"', config))
        out = codex.run()
        assert out.code == 0, out
        ran = model.tool_results()[-1]
    assert echoed(ran) == "hello from codex", ran


def test_an_app_added_mid_session(gw, tmp_path):
    """An app added while `codex exec` runs: the gateway's search finds it in the same
    session. Codex does not act on notifications/tools/list_changed: the tools it offers
    the model (the `mcp__aai` namespace) stay those of the session's start."""
    gw.config(logLevel="info")
    gw.add_app("com.example.echo")
    script = [call("aai_search", {"query": "weather"}),
              call("aai_search", {"query": "weather"}, wait_for="go"),
              {"text": "Done."}]
    with standin(tmp_path / "model", script) as model:
        codex = Codex(gw, tmp_path, model.url)
        proc = codex.agent.start(PROMPT, env=codex.env())
        wait_until(lambda: model.reached(1), timeout=180, what="the second turn")
        gw.add_app("com.example.weather", description="Weather forecasts")
        wait_until(lambda: "apps=3" in gateway_log(gw), timeout=60, what="the gateway to load the new app")
        model.release("go")
        out = codex.agent.finish(proc, timeout=240)
        assert out.code == 0, out
        turns = model.turns()
        results = model.tool_results()
    assert "com.example.weather" not in output(results[0]), results[0]
    assert "com.example.weather" in output(results[1]), results[1]
    before, after = namespace_tools(turns[0]), namespace_tools(turns[-1])
    assert "app_com_example_weather" not in before
    assert "app_com_example_weather" not in after, "Codex refreshed its tool list mid-session"
