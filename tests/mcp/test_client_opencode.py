"""opencode, the real binary (tests/mcp/clients), as an MCP client of the gateway (not the
ACP agent of test_coding_agent.py): `aai-gateway clients add opencode` writes `mcp.aai =
{type: "local", command: [...], enabled: true}` into `~/.config/opencode/opencode.json` and
`opencode mcp list` shows it connected; in `opencode run` a scripted loopback model
(`model_standin.py`, OpenAI Chat Completions through an `@ai-sdk/openai-compatible`
provider whose `baseURL` is loopback) calls aai_search, aai_guide and aai_exec and reads
their results; a call nobody allowed reaches the model as CONSENT_REQUIRED with the grant
command, which, run, lets the repeated call through; an app added while a session runs.

opencode names an MCP server's tools `<server>_<tool>` (`aai_aai_search`) and runs them
without a question of its own (its default permission for MCP tools is "allow"), so
`clients add opencode` has nothing to offer there.

Offline: HOME and the XDG folders are the test's, the provider is loopback, auto-update,
the models.dev fetch, sharing, default plugins and LSP downloads are off (OPENCODE_DISABLE_*).
"""
import json
import re

from agent_clients import AgentClient, gateway_log, grant_command, run_pasted, wait_until
from model_standin import standin

ECHO = {"app": "com.example.echo", "tool": "echo", "args": {"text": "hello from opencode"}}
PROMPT = ["run", "Use the aai gateway to echo a greeting."]


def three_calls(text="All done."):
    return [{"tool": "aai_aai_search", "arguments": {"query": "echo"}},
            {"tool": "aai_aai_guide", "arguments": {"app": "com.example.echo", "tool": "echo"}},
            {"tool": "aai_aai_exec", "arguments": ECHO},
            {"text": text}]


class Opencode:
    """opencode with its user config in the test's XDG_CONFIG_HOME, its model the standin."""

    def __init__(self, gw, tmp_path, url):
        self.agent = AgentClient(gw, tmp_path, "opencode")
        folder = self.agent.home / ".config" / "opencode"
        folder.mkdir(parents=True)
        # opencode installs @opencode-ai/plugin into its config folder in the background
        # unless its lock file already names it and node_modules exists.
        (folder / "node_modules").mkdir()
        (folder / "package-lock.json").write_text(json.dumps(
            {"lockfileVersion": 3, "packages": {"": {"dependencies": {"@opencode-ai/plugin": "*"}}}}))
        (self.agent.home / "tmp").mkdir(exist_ok=True)
        self.config = folder / "opencode.json"
        self.url = url
        self.config.write_text(json.dumps({
            "$schema": "https://opencode.ai/config.json",
            "autoupdate": False, "share": "disabled",
            "model": "standin/standin-model", "small_model": "standin/standin-model",
            "enabled_providers": ["standin"],
            "provider": {"standin": {
                "npm": "@ai-sdk/openai-compatible", "name": "Standin",
                "options": {"baseURL": f"{url}/v1", "apiKey": "sk-standin"},
                "models": {"standin-model": {"name": "Standin", "tool_call": True}},
            }},
        }, indent=2) + "\n")
        self.added = self.agent.add_gateway("opencode")

    def env(self):
        return self.agent.env(
            OPENCODE_DISABLE_AUTOUPDATE="1", OPENCODE_DISABLE_MODELS_FETCH="1", OPENCODE_DISABLE_SHARE="1",
            OPENCODE_DISABLE_DEFAULT_PLUGINS="1", OPENCODE_DISABLE_LSP_DOWNLOAD="1",
            OPENCODE_DISABLE_CLAUDE_CODE="1", OPENCODE_DISABLE_EXTERNAL_SKILLS="1",
            OPENCODE_MODELS_URL=self.url, npm_config_registry=f"{self.url}/npm/")

    def run(self, args=PROMPT, timeout=240):
        return self.agent.run(args, env=self.env(), timeout=timeout)


def test_clients_add_then_opencode_mcp_list_shows_it_connected(gw, tmp_path):
    gw.add_app("com.example.echo")
    opencode = Opencode(gw, tmp_path, "http://127.0.0.1:9")
    value = json.loads(opencode.config.read_text())
    assert value["mcp"]["aai"] == {"type": "local", "enabled": True,
                                   "command": [str(gw.binary.resolve()), "--home", str(gw.home)]}, value
    assert value["provider"]["standin"]["options"]["apiKey"] == "sk-standin", "the user's settings stay"
    out = opencode.run(["mcp", "list"], timeout=180)
    assert out.code == 0, out
    text = re.sub(r"\x1b\[[0-9;]*m", "", out.out + out.err)
    line = next((l for l in text.splitlines() if " aai " in f" {l} " or "aai" in l.split()), None)
    assert line is not None, out
    assert "connected" in line.lower(), out


def test_search_guide_and_exec_reach_the_model(gw, tmp_path):
    gw.config(consent={"mode": "prompt"}, logLevel="debug")
    gw.add_app("com.example.echo")
    with standin(tmp_path / "model", three_calls()) as model:
        opencode = Opencode(gw, tmp_path, model.url)
        granted = opencode.agent.gateway("consent", "grant", "com.example.echo", "--tool", "echo",
                                         "--caller", "opencode@stdio", "--start")
        assert granted.returncode == 0, granted.stderr
        out = opencode.run()
        assert out.code == 0, out
        assert "All done." in out.out, out
        turns = model.turns()
        results = model.tool_results()
    assert [t["index"] for t in turns] == [0, 1, 2, 3], [t["index"] for t in turns]
    assert [r["error"] for r in results] == [False, False, False], results
    search, guide, called = (r["text"] for r in results)
    assert "com.example.echo" in search, search
    assert "### `echo`" in guide and "`text` (string, required)" in guide, guide
    assert json.loads(called)["echo"]["text"] == "hello from opencode", called
    offered = {t["function"]["name"]: t["function"]["parameters"] for t in turns[0]["body"]["tools"]
               if t["function"]["name"].startswith("aai_")}
    assert {"aai_aai_search", "aai_aai_guide", "aai_aai_exec", "aai_app_com_example_echo"} <= set(offered), offered


def test_a_call_nobody_allowed_tells_the_model_the_grant_command_and_runs_after_it(gw, tmp_path):
    gw.config(consent={"mode": "prompt"}, logLevel="debug")
    gw.add_app("com.example.echo")
    script = [{"tool": "aai_aai_exec", "arguments": ECHO}, {"text": "Done."}]
    with standin(tmp_path / "model", script) as model:
        opencode = Opencode(gw, tmp_path, model.url)
        out = opencode.run()
        assert out.code == 0, out
        refused = model.tool_results()[-1]
    text = refused["text"]
    assert "CONSENT_REQUIRED" in text or "Consent required" in text, text
    command = grant_command(text)
    assert command.startswith(f"aai-gateway --home {gw.home} consent grant com.example.echo --tool echo"), command
    granted = run_pasted(gw, command)
    assert granted.returncode == 0, granted.stderr
    with standin(tmp_path / "model2", script) as model:
        opencode.url = model.url
        config = json.loads(opencode.config.read_text())
        config["provider"]["standin"]["options"]["baseURL"] = f"{model.url}/v1"
        opencode.config.write_text(json.dumps(config, indent=2) + "\n")
        out = opencode.run()
        assert out.code == 0, out
        ran = model.tool_results()[-1]
    assert json.loads(ran["text"])["echo"]["text"] == "hello from opencode", ran


def test_an_app_added_mid_session(gw, tmp_path):
    """An app added while `opencode run` runs: the gateway's search finds it, and opencode
    refreshes its tool list on notifications/tools/list_changed."""
    gw.config(logLevel="info")
    gw.add_app("com.example.echo")
    script = [{"tool": "aai_aai_search", "arguments": {"query": "weather"}},
              {"tool": "aai_aai_search", "arguments": {"query": "weather"}, "wait_for": "go"},
              {"text": "Done."}]
    with standin(tmp_path / "model", script) as model:
        opencode = Opencode(gw, tmp_path, model.url)
        proc = opencode.agent.start(PROMPT, env=opencode.env())
        wait_until(lambda: model.reached(1), timeout=180, what="the second turn")
        gw.add_app("com.example.weather", description="Weather forecasts")
        wait_until(lambda: "apps=3" in gateway_log(gw), timeout=60, what="the gateway to load the new app")
        model.release("go")
        out = opencode.agent.finish(proc, timeout=240)
        assert out.code == 0, out
        turns = model.turns()
        results = model.tool_results()
    assert "com.example.weather" not in results[0]["text"], results[0]
    assert "com.example.weather" in results[1]["text"], results[1]
    # opencode lists the tools again on notifications/tools/list_changed: the new app's
    # tool is offered from the turn after it appeared.
    names = [[t["function"]["name"] for t in turn["body"]["tools"]] for turn in turns]
    assert "aai_app_com_example_weather" not in names[0], names[0]
    assert "aai_app_com_example_weather" in names[-1], names[-1]
