"""Claude Code, the real binary (tests/mcp/clients), driven against the gateway: `aai-gateway
clients add claude-code` sets it up and `claude mcp list` shows it connected; in headless
`claude -p` runs a scripted loopback model (`model_standin.py`, Anthropic Messages through
ANTHROPIC_BASE_URL) calls aai_search, aai_guide and aai_exec and reads their results; a call
nobody allowed reaches the model as CONSENT_REQUIRED with the grant command, which, run,
lets the repeated call through; Claude Code's `Elicitation` hook answers the consent form
headless (a decline stays a denial); an app added while a session runs reaches the model's
tool list in that session (MCP 2026-07-28 `subscriptions/listen`); MCP_TOOL_TIMEOUT cancels a
hung call and the gateway stops its process; the `mcp__aai` permission `clients add` writes
is what lets `claude -p` call the gateway without `--allowedTools`.

Offline: HOME is the test's, the model is loopback, nonessential traffic, telemetry and the
auto-updater are off (CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC, DISABLE_TELEMETRY,
DISABLE_AUTOUPDATER). ENABLE_TOOL_SEARCH=false makes Claude Code send every MCP tool with
its schema in each request (by default it defers them behind its ToolSearch tool), so the
tests can read what reached the model.
"""
import json
import re
import shlex

import pytest

from agent_clients import (AgentClient, gateway_log, grant_command, listed_tools, protocol_versions, run_pasted,
                           wait_until)
from conftest import alive
from model_standin import standin

ECHO = {"app": "com.example.echo", "tool": "echo", "args": {"text": "hello from claude"}}
RUN = ["-p", "Use the aai gateway to echo a greeting.", "--allowedTools", "mcp__aai", "--output-format", "json"]


def claude(gw, tmp_path):
    agent = AgentClient(gw, tmp_path, "claude")
    agent.add_gateway("claude-code")
    return agent


def env_for(agent, url=None):
    env = agent.env(ANTHROPIC_API_KEY="sk-ant-standin", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
                    DISABLE_TELEMETRY="1", DISABLE_AUTOUPDATER="1", DISABLE_ERROR_REPORTING="1",
                    ENABLE_TOOL_SEARCH="false")
    if url:
        env["ANTHROPIC_BASE_URL"] = url
    return env


def three_calls(text="All done."):
    return [{"tool": "mcp__aai__aai_search", "arguments": {"query": "echo"}},
            {"tool": "mcp__aai__aai_guide", "arguments": {"app": "com.example.echo", "tool": "echo"}},
            {"tool": "mcp__aai__aai_exec", "arguments": ECHO},
            {"text": text}]


def test_clients_add_then_claude_mcp_list_shows_it_connected(gw, tmp_path):
    gw.add_app("com.example.echo")
    agent = claude(gw, tmp_path)
    entry = json.loads((agent.home / ".claude.json").read_text())["mcpServers"]["aai"]
    assert (entry["command"], entry["args"]) == (str(gw.binary), ["--home", str(gw.home)]), entry
    out = agent.run(["mcp", "list"], env=env_for(agent), timeout=180)
    assert out.code == 0, out
    line = next((l for l in out.out.splitlines() if l.startswith("aai:")), None)
    assert line is not None, out
    assert str(gw.binary) in line and str(gw.home) in line, line
    assert "Connected" in line, line


def test_search_guide_and_exec_reach_the_model(gw, tmp_path):
    gw.config(consent={"mode": "prompt"}, logLevel="debug")
    gw.add_app("com.example.echo")
    agent = claude(gw, tmp_path)
    granted = agent.gateway("consent", "grant", "com.example.echo", "--tool", "echo",
                            "--caller", "claude-code@stdio", "--start")
    assert granted.returncode == 0, granted.stderr
    with standin(tmp_path / "model", three_calls()) as model:
        out = agent.run(RUN, env=env_for(agent, model.url), timeout=240)
        assert out.code == 0, out
        assert json.loads(out.out)["result"] == "All done.", out
        turns = model.turns()
        assert [t["index"] for t in turns] == [0, 1, 2, 3], [t["index"] for t in turns]
        results = model.tool_results()
    assert [r["error"] for r in results] == [False, False, False], results
    search, guide, call = (r["text"] for r in results)
    assert "com.example.echo" in search, search
    assert "### `echo`" in guide and "`text` (string, required)" in guide, guide
    assert json.loads(call)["echo"]["text"] == "hello from claude", call
    # Every tool the gateway lists reached the model under Claude Code's `mcp__aai__` name
    # with the gateway's own schema: nothing refused, renamed or rewritten.
    listed = listed_tools(gw, "claude-code")
    offered = {t["name"]: t.get("input_schema") for t in turns[0]["body"]["tools"] if t["name"].startswith("mcp__aai__")}
    assert offered == {f"mcp__aai__{n}": schema for n, schema in listed.items()}
    # Claude Code speaks the stateless revision: server/discover, no initialize.
    assert protocol_versions(gw) == ["2026-07-28"], protocol_versions(gw)


def test_a_call_nobody_allowed_tells_the_model_the_grant_command_and_runs_after_it(gw, tmp_path):
    """Claude Code in -p mode cancels the consent form without showing it: the model reads
    CONSENT_REQUIRED with the grant command (and the web UI's link), not a denial."""
    gw.config(consent={"mode": "prompt"}, logLevel="debug")
    gw.add_app("com.example.echo")
    agent = claude(gw, tmp_path)
    with standin(tmp_path / "model", three_calls()) as model:
        out = agent.run(RUN, env=env_for(agent, model.url), timeout=240)
        assert out.code == 0, out
        refused = model.tool_results()[-1]
    assert refused["error"], refused
    text = refused["text"]
    assert "Consent required" in text and "Permission denied" not in text, text
    assert re.search(r"approve it at http://127\.0\.0\.1:\d+/ui/consent\?pending=\d+", text), text
    command = grant_command(text)
    assert command == (f"aai-gateway --home {gw.home} consent grant com.example.echo --tool echo"
                       " --caller claude-code@stdio --start"), command
    # The gateway asked the client first (an input-required round, which it cancelled).
    assert '"consent": Object {"action": String("cancel")}' in gateway_log(gw)
    granted = run_pasted(gw, command)
    assert granted.returncode == 0, granted.stderr
    with standin(tmp_path / "model2", three_calls()) as model:
        out = agent.run(RUN, env=env_for(agent, model.url), timeout=240)
        assert out.code == 0, out
        call = model.tool_results()[-1]
    assert not call["error"] and json.loads(call["text"])["echo"]["text"] == "hello from claude", call


def test_an_app_added_during_a_session_reaches_the_model(gw, tmp_path):
    """One `claude -p` run: after its first aai_search the test adds an app; Claude Code
    hears of the change (`subscriptions/listen`), lists the tools again, and the next turn
    offers the new app's tool; aai_search finds it without a restart."""
    gw.config(logLevel="debug")
    gw.add_app("com.example.echo")
    agent = claude(gw, tmp_path)
    script = [{"tool": "mcp__aai__aai_search", "arguments": {"query": "zebra"}},
              {"tool": "mcp__aai__aai_search", "arguments": {"query": "zebra"}, "wait_for": "go"},
              {"text": "Found it."}]
    new_tool = "mcp__aai__app_com_example_zebra"
    with standin(tmp_path / "model", script) as model:
        proc = agent.start(RUN, env=env_for(agent, model.url))
        try:
            wait_until(lambda: model.reached(1), 180, "the turn after the first search")
            lists_before = gateway_log(gw).count("ListToolsRequest")
            gw.add_app("com.example.zebra", name={"en": "Zebra"}, description="Stripes on demand")
            # The client lists the tools again once it hears of the change; give it time.
            try:
                wait_until(lambda: gateway_log(gw).count("ListToolsRequest") > lists_before, 90,
                           "Claude Code to list the tools again")
            finally:
                model.release("go")
            out = agent.finish(proc, 240)
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


def test_a_slow_call_past_claude_codes_tool_timeout_is_cancelled_and_its_process_stopped(gw, tmp_path):
    """MCP_TOOL_TIMEOUT: Claude Code gives up on a call after it; the gateway hears the
    cancellation and stops the tool's process."""
    gw.config(logLevel="debug")
    gw.add_app("com.example.echo")
    agent = claude(gw, tmp_path)
    pidfile = tmp_path / "hang.pid"
    script = [{"tool": "mcp__aai__aai_exec",
               "arguments": {"app": "com.example.echo", "tool": "hang", "args": {"pidfile": str(pidfile)}}},
              {"text": "Gave up."}]
    with standin(tmp_path / "model", script) as model:
        out = agent.run(RUN, env=env_for(agent, model.url) | {"MCP_TOOL_TIMEOUT": "5000"}, timeout=240)
        assert out.code == 0, out
        result = model.tool_results()[-1]
    assert result["error"], result
    pids = [int(p) for p in pidfile.read_text().split()]
    wait_until(lambda: not any(alive(p) for p in pids), 30, "the hung tool's processes to be stopped")
    log = gateway_log(gw)
    assert "CancelledNotification" in log or "notifications/cancelled" in log, log[-3000:]



@pytest.mark.parametrize("allow", [True, False], ids=["allowed", "no-allow-tools"])
def test_the_permission_clients_add_writes_lets_a_headless_run_call_the_gateway(gw, tmp_path, allow):
    """Without `--allowedTools`: `clients add` allows `mcp__aai` in Claude Code's
    settings.json, so `claude -p` may call the gateway; with `--no-allow-tools` Claude Code
    refuses the call itself (it cannot ask in -p mode) and the model reads why."""
    gw.add_app("com.example.echo")
    agent = AgentClient(gw, tmp_path, "claude")
    agent.add_gateway("claude-code", *([] if allow else ["--no-allow-tools"]))
    script = [{"tool": "mcp__aai__aai_search", "arguments": {"query": "echo"}}, {"text": "Done."}]
    with standin(tmp_path / "model", script) as model:
        out = agent.run(RUN[:2] + ["--output-format", "json"], env=env_for(agent, model.url), timeout=240)
        assert out.code == 0, out
        (result,) = model.tool_results()
    if allow:
        assert not result["error"] and "com.example.echo" in result["text"], result
    else:
        assert result["error"] and "com.example.echo" not in result["text"], result
        assert "permission" in result["text"].lower(), result


HOOK = """import json, sys
question = json.load(sys.stdin)
with open(sys.argv[1], "a") as f:
    f.write(json.dumps(question) + "\\n")
action, content = json.loads(sys.argv[2])
out = {"hookEventName": "Elicitation", "action": action}
if content is not None:
    out["content"] = content
print(json.dumps({"hookSpecificOutput": out}))
"""


def answering_hook(agent, tmp_path, action, content=None):
    """An `Elicitation` hook in Claude Code's settings.json that answers every MCP
    elicitation with `action` (and `content`), recording each question in asked.jsonl:
    how a headless Claude Code answers a form."""
    import sys
    script = tmp_path / "hook.py"
    script.write_text(HOOK)
    asked = tmp_path / "asked.jsonl"
    path = agent.home / ".claude" / "settings.json"
    settings = json.loads(path.read_text())
    command = " ".join(shlex.quote(w) for w in [sys.executable, str(script), str(asked), json.dumps([action, content])])
    settings["hooks"] = {"Elicitation": [{"matcher": "aai", "hooks": [{"type": "command", "command": command}]}]}
    path.write_text(json.dumps(settings, indent=2))
    return asked


@pytest.mark.parametrize("answer", ["decline", "tool"])
def test_an_elicitation_hook_answers_the_consent_form(gw, tmp_path, answer):
    """Claude Code's `Elicitation` hook answers the gateway's consent form headless: a
    decline is a denial the model reads as such (nothing remembered);
    "Always allow this tool" runs the call and is remembered for claude-code@stdio."""
    gw.config(consent={"mode": "prompt"}, logLevel="debug")
    gw.add_app("com.example.echo")
    agent = claude(gw, tmp_path)
    if answer == "decline":
        asked = answering_hook(agent, tmp_path, "decline")
    else:
        asked = answering_hook(agent, tmp_path, "accept", {"decision": answer})
    with standin(tmp_path / "model", three_calls()) as model:
        out = agent.run(RUN, env=env_for(agent, model.url), timeout=240)
        assert out.code == 0, out
        result = model.tool_results()[-1]
    questions = [json.loads(l) for l in asked.read_text().splitlines()]
    assert len(questions) == 1, questions
    assert questions[0]["mcp_server_name"] == "aai"
    assert "wants to run `echo` of Echo (com.example.echo)" in questions[0]["message"], questions
    assert "adapter.py" in questions[0]["message"], "the question names the command it starts"
    grants = json.loads(agent.gateway("consent", "list", "--json").stdout)["grants"]
    if answer == "decline":
        # A denial, nothing remembered; like every declined form, it says how the user
        # could allow the call (some clients decline forms they never showed).
        assert result["error"] and "Permission denied" in result["text"], result
        assert "If the user was shown no question" in result["text"], result
        assert grants == [], grants
    else:
        assert not result["error"] and json.loads(result["text"])["echo"]["text"] == "hello from claude", result
        assert ("claude-code@stdio", "com.example.echo", "echo") in [(g["caller"], g["app"], g["tool"]) for g in grants]
