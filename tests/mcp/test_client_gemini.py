"""Gemini CLI, the real binary (tests/mcp/clients), driven against the gateway: `aai-gateway
clients add gemini` sets it up and `gemini mcp list` shows it connected; in headless
`gemini -p` runs a scripted loopback model (`model_standin.py`, the Gemini API through
GOOGLE_GEMINI_BASE_URL) calls aai_search, aai_guide and aai_exec and reads their results; a
call nobody allowed reaches the model as CONSENT_REQUIRED with the grant command, which,
run, lets the repeated call through; an app added while a session runs reaches the
model's tool list in that session (`notifications/tools/list_changed`).

Offline: HOME is the test's; `~/.gemini/settings.json` picks API-key authentication and
turns usage statistics, telemetry and auto-update off before the gateway is added (which
keeps those keys); the model is loopback. Gemini CLI suppresses every MCP server, the
user's too, in a folder it does not trust ("Disabled" in `mcp list`; `-p` exits 55): the
test trusts its work folder in `~/.gemini/trustedFolders.json`, as a user does once.
"""
import json
import re

import pytest

from agent_clients import (AgentClient, gateway_log, grant_command, listed_tools, protocol_versions, run_pasted,
                           wait_until)
from conftest import alive
from model_standin import standin

ECHO = {"app": "com.example.echo", "tool": "echo", "args": {"text": "hello from gemini"}}
RUN = ["-p", "Use the aai gateway to echo a greeting.", "--output-format", "json"]
CALLER = "gemini-cli-mcp-client@stdio"

SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}},
    "privacy": {"usageStatisticsEnabled": False},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False},
    "telemetry": {"enabled": False},
}


def gemini(gw, tmp_path, trusted=True, *add):
    agent = AgentClient(gw, tmp_path, "gemini")
    folder = agent.home / ".gemini"
    folder.mkdir()
    (folder / "settings.json").write_text(json.dumps(SETTINGS, indent=2))
    if trusted:
        (folder / "trustedFolders.json").write_text(json.dumps({str(agent.work): "TRUST_FOLDER"}))
    agent.add_gateway("gemini", *add)
    return agent


def env_for(agent, url=None):
    env = agent.env(GEMINI_API_KEY="standin-gemini-key")
    if url:
        env["GOOGLE_GEMINI_BASE_URL"] = url
    return env


def three_calls(text="All done."):
    return [{"tool": "mcp_aai_aai_search", "arguments": {"query": "echo"}},
            {"tool": "mcp_aai_aai_guide", "arguments": {"app": "com.example.echo", "tool": "echo"}},
            {"tool": "mcp_aai_aai_exec", "arguments": ECHO},
            {"text": text}]


def inner(text):
    """A tool result's text without the <untrusted_context> wrapping Gemini CLI adds."""
    return re.sub(r"^<untrusted_context>\n|\n</untrusted_context>$", "", text)


def test_clients_add_then_gemini_mcp_list_shows_it_connected(gw, tmp_path):
    gw.add_app("com.example.echo")
    agent = gemini(gw, tmp_path)
    settings = json.loads((agent.home / ".gemini" / "settings.json").read_text())
    assert {k: settings[k] for k in SETTINGS} == SETTINGS, "clients add kept the user's settings"
    assert settings["mcpServers"]["aai"]["args"] == ["--home", str(gw.home)], settings
    out = agent.run(["mcp", "list"], env=env_for(agent), timeout=180)
    assert out.code == 0, out
    line = next((l for l in (out.out + out.err).splitlines() if "aai:" in l), None)
    assert line is not None, out
    assert str(gw.binary) in line and "Connected" in line, line


def test_an_untrusted_folder_disables_the_gateway(gw, tmp_path):
    """What a user meets first: Gemini CLI lists the server as disabled until the folder
    is trusted."""
    agent = gemini(gw, tmp_path, trusted=False)
    out = agent.run(["mcp", "list"], env=env_for(agent), timeout=180)
    line = next((l for l in (out.out + out.err).splitlines() if "aai:" in l), None)
    assert line is not None and "Disabled" in line, out


def test_search_guide_and_exec_reach_the_model(gw, tmp_path):
    gw.config(consent={"mode": "prompt"}, logLevel="debug")
    gw.add_app("com.example.echo")
    agent = gemini(gw, tmp_path)
    granted = agent.gateway("consent", "grant", "com.example.echo", "--tool", "echo", "--caller", CALLER, "--start")
    assert granted.returncode == 0, granted.stderr
    with standin(tmp_path / "model", three_calls()) as model:
        out = agent.run(RUN, env=env_for(agent, model.url), timeout=300)
        assert out.code == 0, out
        assert json.loads(out.out)["response"] == "All done.", out
        turns = model.turns()
        assert [t["index"] for t in turns] == [0, 1, 2, 3], [t["index"] for t in turns]
        results = model.tool_results()
    assert [(r["name"], r["error"]) for r in results] == [
        ("mcp_aai_aai_search", False), ("mcp_aai_aai_guide", False), ("mcp_aai_aai_exec", False)], results
    search, guide, call = (inner(r["text"]) for r in results)
    assert "com.example.echo" in search, search
    assert "### `echo`" in guide and "`text` (string, required)" in guide, guide
    assert json.loads(call)["echo"]["text"] == "hello from gemini", call
    # Every tool the gateway lists reached the model as `mcp_aai_<name>` with its schema;
    # Gemini CLI adds a `wait_for_previous` flag of its own to each (and takes it out of
    # the arguments again), and changes nothing else.
    offered = {d["name"]: without_wait_flag(d["parametersJsonSchema"])
               for t in turns[0]["body"]["tools"] for d in t.get("functionDeclarations", [])
               if d["name"].startswith("mcp_aai_")}
    listed = listed_tools(gw, "gemini-cli-mcp-client")
    assert set(offered) == {f"mcp_aai_{n}" for n in listed}, offered
    for name, schema in listed.items():
        assert offered[f"mcp_aai_{name}"] == schema, (name, offered[f"mcp_aai_{name}"], schema)
    assert protocol_versions(gw) == ["2025-06-18"], protocol_versions(gw)


def without_wait_flag(schema):
    schema = json.loads(json.dumps(schema))
    props = schema.get("properties", {})
    assert props.pop("wait_for_previous")["type"] == "boolean", schema
    if not props:
        del schema["properties"]
    return schema


def test_a_call_nobody_allowed_tells_the_model_the_grant_command_and_runs_after_it(gw, tmp_path):
    """Gemini CLI declares no elicitation: the call fails with CONSENT_REQUIRED, and the
    model reads its whole message (grant command, web UI link) in the tool's error."""
    gw.config(consent={"mode": "prompt"}, logLevel="debug")
    gw.add_app("com.example.echo")
    agent = gemini(gw, tmp_path)
    with standin(tmp_path / "model", three_calls()) as model:
        out = agent.run(RUN, env=env_for(agent, model.url), timeout=300)
        assert out.code == 0, out
        refused = model.tool_results()[-1]
    assert refused["error"], refused
    text = refused["text"]
    assert "Consent required" in text and "Permission denied" not in text, text
    assert re.search(r"approve it at http://127\.0\.0\.1:\d+/ui/consent\?pending=\d+", text), text
    command = grant_command(text)
    assert command == (f"aai-gateway --home {gw.home} consent grant com.example.echo --tool echo"
                       f" --caller {CALLER} --start"), command
    granted = run_pasted(gw, command)
    assert granted.returncode == 0, granted.stderr
    with standin(tmp_path / "model2", three_calls()) as model:
        out = agent.run(RUN, env=env_for(agent, model.url), timeout=300)
        assert out.code == 0, out
        call = model.tool_results()[-1]
    assert not call["error"] and json.loads(inner(call["text"]))["echo"]["text"] == "hello from gemini", call


def test_an_app_added_during_a_session_reaches_the_model(gw, tmp_path):
    """One `gemini -p` run: after its first aai_search the test adds an app; Gemini CLI
    hears `notifications/tools/list_changed`, lists the tools again, and the next turn
    offers the new app's tool; aai_search finds it without a restart."""
    gw.config(logLevel="debug")
    gw.add_app("com.example.echo")
    agent = gemini(gw, tmp_path)
    script = [{"tool": "mcp_aai_aai_search", "arguments": {"query": "zebra"}},
              {"tool": "mcp_aai_aai_search", "arguments": {"query": "zebra"}, "wait_for": "go"},
              {"text": "Found it."}]
    new_tool = "mcp_aai_app_com_example_zebra"
    with standin(tmp_path / "model", script) as model:
        proc = agent.start(RUN, env=env_for(agent, model.url))
        try:
            wait_until(lambda: model.reached(1), 180, "the turn after the first search")
            lists_before = gateway_log(gw).count("ListToolsRequest")
            gw.add_app("com.example.zebra", name={"en": "Zebra"}, description="Stripes on demand")
            try:
                wait_until(lambda: gateway_log(gw).count("ListToolsRequest") > lists_before, 90,
                           "Gemini CLI to list the tools again")
            finally:
                model.release("go")
            out = agent.finish(proc, 300)
        finally:
            agent.finish(proc, 0)
        assert out.code == 0, out
        turns = model.turns()
        first, last = model.tool_results(turns[-1])
        offered_first, offered_last = model.tools_offered(turns[0]), model.tools_offered(turns[-1])
    assert "com.example.zebra" not in first["text"], first
    assert "com.example.zebra" in last["text"], last
    assert new_tool not in offered_first, offered_first
    assert new_tool in offered_last, offered_last


def test_a_slow_call_past_the_servers_timeout_is_cancelled_and_its_process_stopped(gw, tmp_path):
    """The entry's `timeout` (ms): Gemini CLI gives up on a call after it; the gateway hears
    the cancellation and stops the tool's process."""
    gw.config(logLevel="debug")
    gw.add_app("com.example.echo")
    agent = gemini(gw, tmp_path)
    path = agent.home / ".gemini" / "settings.json"
    settings = json.loads(path.read_text())
    settings["mcpServers"]["aai"]["timeout"] = 5000
    path.write_text(json.dumps(settings))
    pidfile = tmp_path / "hang.pid"
    script = [{"tool": "mcp_aai_aai_exec",
               "arguments": {"app": "com.example.echo", "tool": "hang", "args": {"pidfile": str(pidfile)}}},
              {"text": "Gave up."}]
    with standin(tmp_path / "model", script) as model:
        out = agent.run(RUN, env=env_for(agent, model.url), timeout=300)
        assert out.code == 0, out
        result = model.tool_results()[-1]
    assert result["error"], result
    pids = [int(p) for p in pidfile.read_text().split()]
    wait_until(lambda: not any(alive(p) for p in pids), 30, "the hung tool's processes to be stopped")
    assert "CancelledNotification" in gateway_log(gw), gateway_log(gw)[-3000:]


def test_without_trust_a_headless_run_never_sees_the_gateways_tools(gw, tmp_path):
    """`clients add gemini --no-allow-tools` leaves out the entry's `trust`: Gemini CLI
    then leaves every tool of the server out of a headless run (it could not ask), so the
    model is never offered them and a call reads "not found"."""
    gw.add_app("com.example.echo")
    agent = gemini(gw, tmp_path, True, "--no-allow-tools")
    assert "trust" not in json.loads((agent.home / ".gemini" / "settings.json").read_text())["mcpServers"]["aai"]
    script = [{"tool": "mcp_aai_aai_search", "arguments": {"query": "echo"}}, {"text": "Done."}]
    with standin(tmp_path / "model", script) as model:
        out = agent.run(RUN, env=env_for(agent, model.url), timeout=300)
        assert out.code == 0, out
        (result,) = model.tool_results()
        offered = model.tools_offered(model.turns()[0])
    assert not any(n.startswith("mcp_aai_") for n in offered), offered
    assert result["error"] and "not found" in result["text"], result
