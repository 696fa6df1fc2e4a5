"""ACP agents as apps (`execution.type: "acp"`), driven through `aai_exec` by the Python
SDK client: the `agent` example of the Rust `agent-client-protocol` crate (it echoes the
prompt), the TypeScript example agent of npm `@zed-industries/agent-client-protocol` (it
streams, reports tool calls and asks permission to edit), and scripted agents of our own
(`acp_scripted_agent.py`: not signed in, asking permission in a loop, closing its output,
never starting). Then the ways an agent goes wrong: it crashes mid-prompt, it hangs, the
call is cancelled, the gateway is killed; nothing may be left running.

Run: python3 -m pytest tests/mcp -q
"""
import contextlib
import json
import os
import signal
import sys
from pathlib import Path

import pytest

from conftest import ROOT, alive, deciding, need_peer, running

anyio = pytest.importorskip("anyio")
MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio

ECHO_AGENT = ROOT / "target" / "test-peers" / "acp" / "bin" / "agent"
NODE_MODULES = ROOT / "tests" / "mcp" / "peers" / "node_modules"
TSX = NODE_MODULES / ".bin" / "tsx"
TS_AGENT = NODE_MODULES / "@zed-industries" / "agent-client-protocol" / "typescript" / "examples" / "agent.ts"
SCRIPTED_AGENT = Path(__file__).with_name("acp_scripted_agent.py")

ASK = {"name": "ask", "description": "Give the agent a task in plain language",
       "parameters": {"type": "object", "properties": {"prompt": {"type": "string"}}, "required": ["prompt"]}}
REVIEW = {"name": "review", "description": "Review a file for bugs and say what to fix",
          "parameters": {"type": "object", "properties": {"file": {"type": "string"},
                                                          "strict": {"type": "boolean"}}, "required": ["file"]}}


def acp_app(gw, app_id, command, args=(), tools=(ASK,), description="A coding agent", timeout_ms=None):
    execution = {"type": "acp", "start": {"command": str(command), "args": [str(a) for a in args]}}
    if timeout_ms:
        execution["timeout"] = timeout_ms
    gw.put(app_id, {
        "schemaVersion": "1.0", "version": "1.0.0", "platform": "linux",
        "app": {"id": app_id, "name": {"en": app_id.split(".")[-1].title()}, "defaultLang": "en",
                "description": description},
        "execution": execution, "tools": list(tools),
    })


def echo_agent(gw, app_id="dev.acp.echo"):
    need_peer(ECHO_AGENT.exists(), "the `agent` example of crates.io agent-client-protocol "
                                   "(cargo install … --root target/test-peers/acp, see tests/install-peers)")
    acp_app(gw, app_id, ECHO_AGENT, tools=(ASK, REVIEW), description="Echoes what it is told")


def ts_agent(gw, app_id="dev.acp.example", **extra):
    need_peer(TS_AGENT.exists() and TSX.exists(), "npm @zed-industries/agent-client-protocol and tsx "
                                                  "(npm ci --prefix tests/mcp/peers)")
    acp_app(gw, app_id, TSX, [TS_AGENT], description="A coding agent that edits configuration files", **extra)


async def wait_until(check, seconds=10.0):
    with anyio.fail_after(seconds):
        while not check():
            await anyio.sleep(0.05)


async def ask(s, app, prompt, on_progress=None, **args):
    return await s.call_tool("aai_exec", {"app": app, "tool": "ask", "args": {"prompt": prompt, **args}},
                             progress_callback=on_progress)


async def test_a_prompt_is_echoed_streamed_and_its_session_continued(gw, tmp_path):
    echo_agent(gw)
    seen = []

    async def on_progress(progress, total, message):
        seen.append(message)

    async with gw.session() as s:
        r = await ask(s, "dev.acp.echo", "hello, agent ✓", on_progress=on_progress)
        assert not r.is_error
        assert r.content[0].text.startswith("Client sent: hello, agent ✓")
        session = r.structured_content["sessionId"]
        assert r.structured_content["stopReason"] == "end_turn"
        assert "".join(seen) == "Client sent: hello, agent ✓", "every chunk arrived as progress"

        again = await ask(s, "dev.acp.echo", "second", sessionId=session)
        assert again.structured_content["sessionId"] == session
        fresh = await ask(s, "dev.acp.echo", "third")
        assert fresh.structured_content["sessionId"] != session
    assert len(running(tmp_path, str(ECHO_AGENT))) == 0


async def test_a_tool_without_prompt_sends_its_description_and_arguments(gw):
    echo_agent(gw)
    async with gw.session() as s:
        r = await s.call_tool("aai_exec", {"app": "dev.acp.echo", "tool": "review",
                                           "args": {"file": "src/main.rs", "strict": True}})
        text = r.content[0].text
        assert text.startswith("Client sent: Review a file for bugs and say what to fix")
        assert '"file": "src/main.rs"' in text and '"strict": true' in text


async def test_the_guide_offers_session_and_folder(gw):
    echo_agent(gw)
    async with gw.session() as s:
        guide = (await s.call_tool("aai_guide", {"app": "dev.acp.echo"})).content[0].text
        assert "`sessionId` (string)" in guide and "`cwd` (string)" in guide


async def test_concurrent_first_calls_share_one_start(gw, tmp_path):
    echo_agent(gw)
    async with gw.session() as s:
        results = {}

        async def one(i):
            results[i] = await ask(s, "dev.acp.echo", f"call {i}")

        async with anyio.create_task_group() as tg:
            for i in range(8):
                tg.start_soon(one, i)
        for i, r in results.items():
            assert r.content[0].text.startswith(f"Client sent: call {i}")
        assert len({r.structured_content["sessionId"] for r in results.values()}) == 8
        assert len(running(tmp_path, str(ECHO_AGENT))) == 1


async def test_bad_arguments_are_refused_before_the_agent_runs(gw, tmp_path):
    echo_agent(gw)
    async with gw.session() as s:
        for cwd in ("relative/dir", str(tmp_path / "missing")):
            with pytest.raises(MCPError) as e:
                await ask(s, "dev.acp.echo", "x", cwd=cwd)
            assert e.value.error.data["type"] == "INVALID_PARAMS" and "`cwd`" in e.value.error.data["detail"]
        with pytest.raises(MCPError) as e:
            await ask(s, "dev.acp.echo", "x", sessionId="no-such-session")
        assert e.value.error.data["type"] == "INVALID_PARAMS" and "no-such-session" in e.value.error.data["detail"]
        with pytest.raises(MCPError) as e:
            await ask(s, "dev.acp.echo", 42)
        assert e.value.error.data["type"] == "INVALID_PARAMS"


async def test_search_finds_the_agent_and_a_permission_request_reaches_the_user(gw, tmp_path):
    ts_agent(gw)
    gw.config(consent={"mode": "prompt"})
    asked, seen = [], []

    async def on_progress(progress, total, message):
        seen.append(message)

    elicit = deciding({"`ask/edit`": "once", "`ask`": "once"}, asked)
    async with gw.session(elicitation=elicit) as s:
        found = (await s.call_tool("aai_search", {"query": "coding agent"})).content[0].text
        assert "dev.acp.example" in found
        guide = (await s.call_tool("aai_guide", {"app": "dev.acp.example"})).content[0].text
        assert "`prompt` (string, required)" in guide

        r = await ask(s, "dev.acp.example", "update the config", on_progress=on_progress, cwd=str(tmp_path))
        assert not r.is_error
        assert "successfully updated the configuration" in r.content[0].text
        calls = r.structured_content["toolCalls"]
        assert [(c["title"], c["kind"], c["status"]) for c in calls] == [
            ("Reading project files", "read", "completed"),
            ("Modifying critical configuration file", "edit", "completed")]
        assert len(seen) == 3 and "successfully updated" in seen[-1], "streamed as it came"
        permission = [q for q in asked if "`ask/edit`" in q]
        assert len(permission) == 1 and "Modifying critical configuration file" in permission[0]

        again = await ask(s, "dev.acp.example", "and again", sessionId=r.structured_content["sessionId"])
        assert again.structured_content["sessionId"] == r.structured_content["sessionId"]


async def test_a_refused_permission_reaches_the_agent_as_its_reject_option(gw):
    ts_agent(gw)
    gw.config(consent={"mode": "prompt"})
    asked = []
    async with gw.session(elicitation=deciding({"`ask/edit`": "deny", "`ask`": "once"}, asked)) as s:
        r = await ask(s, "dev.acp.example", "update the config")
        assert "prefer not to make that change" in r.content[0].text
        assert "successfully updated" not in r.content[0].text
        statuses = {c["title"]: c["status"] for c in r.structured_content["toolCalls"]}
        assert statuses["Modifying critical configuration file"] != "completed"


async def test_without_a_consent_channel_the_permission_is_refused_not_left_hanging(gw):
    ts_agent(gw)
    gw.config(consent={"mode": "prompt"})
    asked = []
    # First the user allows `ask` for this client for good, and refuses the edit...
    async with gw.session(elicitation=deciding({"`ask/edit`": "deny", "`ask`": "tool"}, asked)) as s:
        await ask(s, "dev.acp.example", "warm up")
    # ...then a client that cannot ask may call `ask`, and the agent's request is refused.
    async with gw.session() as s:
        with anyio.fail_after(30):
            r = await ask(s, "dev.acp.example", "update the config")
        assert "prefer not to make that change" in r.content[0].text


async def test_an_agent_that_needs_a_login_says_so(gw):
    acp_app(gw, "dev.acp.login", sys.executable, [SCRIPTED_AGENT, "login"])
    async with gw.session() as s:
        with anyio.fail_after(20):
            with pytest.raises(MCPError) as e:
                await ask(s, "dev.acp.login", "hello")
        assert e.value.error.data["type"] == "AUTH_REQUIRED"
        assert "Log in with Example" in e.value.error.data["detail"]


async def prompt_and_signal(s, tmp_path, signum):
    """Starts a prompt to the example agent, sends `signum` to the agent's processes once
    its first chunk arrives, and returns the call's error."""
    first_chunk, errors = anyio.Event(), []

    async def on_progress(progress, total, message):
        first_chunk.set()

    async def prompt():
        try:
            await ask(s, "dev.acp.example", "update the config", on_progress=on_progress)
        except MCPError as e:
            errors.append(e.error)

    async with anyio.create_task_group() as tg:
        tg.start_soon(prompt)
        with anyio.fail_after(30):
            await first_chunk.wait()
        for pid in running(tmp_path, str(TS_AGENT)):
            with contextlib.suppress(ProcessLookupError):  # reaped since it was listed
                os.kill(pid, signum)
    assert errors, "the call failed"
    return errors[0]


async def test_an_agent_that_crashes_mid_prompt_fails_the_call_and_is_started_again(gw, tmp_path):
    ts_agent(gw)
    async with gw.session() as s:
        error = await prompt_and_signal(s, tmp_path, signal.SIGKILL)
        assert error.data["type"] == "APP_NOT_RUNNING", error
        r = await ask(s, "dev.acp.example", "once more")
        assert "successfully updated" in r.content[0].text


async def test_a_hung_agent_times_out_and_is_stopped(gw, tmp_path):
    # The timeout covers starting the agent under tsx too: room for a cold start.
    ts_agent(gw, timeout_ms=6000)
    async with gw.session() as s:
        error = await prompt_and_signal(s, tmp_path, signal.SIGSTOP)
        assert error.data["type"] == "TIMEOUT", error
        await wait_until(lambda: not running(tmp_path, str(TS_AGENT)), 15)


async def test_a_cancelled_call_cancels_the_turn_and_keeps_the_agent(gw, tmp_path):
    ts_agent(gw)
    async with gw.session() as s:
        # Cancelled once the turn is under way (its first chunk came), not at a fixed time
        # that a slow start of the agent could outlast.
        first_chunk = anyio.Event()

        async def on_progress(progress, total, message):
            first_chunk.set()

        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: ask(s, "dev.acp.example", "update the config", on_progress=on_progress))
            with anyio.fail_after(30):
                await first_chunk.wait()
            await anyio.sleep(0.5)
            tg.cancel_scope.cancel()
        before = running(tmp_path, str(TS_AGENT))
        assert before
        # The agent ends the cancelled turn (within its next step), so it is kept.
        await anyio.sleep(6)
        assert running(tmp_path, str(TS_AGENT)) == before
        r = await ask(s, "dev.acp.example", "again")
        assert "successfully updated" in r.content[0].text
    log = (gw.home / "logs" / "aai-gateway.log").read_text()
    assert "stopping it" not in log, "the agent ended the cancelled turn by itself"


async def test_a_killed_gateway_leaves_no_agent_behind(gw, tmp_path):
    ts_agent(gw)
    import subprocess
    env = gw.env()
    proc = subprocess.Popen([str(gw.binary), "--home", str(gw.home), "call", "dev.acp.example", "ask",
                             '{"prompt": "update the config"}'], env=env, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    try:
        await wait_until(lambda: running(tmp_path, str(TS_AGENT)), 30)
        await anyio.sleep(0.5)
        proc.kill()
        proc.wait()
        await wait_until(lambda: not running(tmp_path, str(TS_AGENT)), 15)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


async def test_a_coding_agent_on_path_is_offered_as_a_built_in_app(gw, tmp_path):
    need_peer(ECHO_AGENT.exists(), "the `agent` example of crates.io agent-client-protocol")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # Stands in for OpenCode: `opencode acp` runs the echo agent (the extra argument names
    # the test's folder, so the no-orphans check sees the process).
    fake = bin_dir / "opencode"
    fake.write_text(f'#!/bin/sh\n[ "$1" = acp ] || exit 2\nexec {ECHO_AGENT} "{tmp_path}"\n')
    fake.chmod(0o755)
    path = f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}"
    async with gw.session(PATH=path) as s:
        found = (await s.call_tool("aai_search", {"query": "coding agent"})).content[0].text
        assert "ai.opencode" in found and "OpenCode" in found
        guide = (await s.call_tool("aai_guide", {"app": "ai.opencode"})).content[0].text
        assert "asks the user before it edits" in guide and "### `ask`" in guide
        r = await ask(s, "ai.opencode", "what is in this folder?", cwd=str(tmp_path))
        assert r.content[0].text.startswith("Client sent: what is in this folder?")
    async with gw.session() as s:
        found = (await s.call_tool("aai_search", {"query": "coding agent"})).content[0].text
        assert "ai.opencode" not in found, "not on PATH, not offered"


async def test_permission_requests_are_capped_cleaned_and_never_asked_without_options(gw):
    acp_app(gw, "dev.acp.asker", sys.executable, [SCRIPTED_AGENT, "asks", 25])
    gw.config(consent={"mode": "prompt"})
    asked = []
    async with gw.session(elicitation=deciding({"`ask/edit`": "once", "`ask`": "once"}, asked)) as s:
        with anyio.fail_after(60):
            r = await ask(s, "dev.acp.asker", "edit everything")
    outcomes = json.loads(r.content[0].text.split("\n\n")[0])
    edits = [q for q in asked if "`ask/edit`" in q]
    assert len(edits) == 20, "at most 20 questions in one turn"
    assert outcomes[:20] == [{"outcome": "selected", "optionId": "yes"}] * 20
    assert outcomes[20:25] == [{"outcome": "selected", "optionId": "no"}] * 5, "the rest rejected unasked"
    assert outcomes[25] == {"outcome": "cancelled"}, "no options: cancelled, not asked"
    assert "no options" not in "".join(asked)
    for q in edits:
        assert not any(c in q for c in "\x1b\r\x07"), repr(q)
        assert "edit file" in q


async def test_an_agent_that_closes_its_output_is_stopped_at_once(gw, tmp_path):
    pidfile = tmp_path / "closes.pid"
    acp_app(gw, "dev.acp.closes", sys.executable, [SCRIPTED_AGENT, "closes", pidfile])
    async with gw.session() as s:
        with anyio.fail_after(30):
            with pytest.raises(MCPError) as e:
                await ask(s, "dev.acp.closes", "hello")
        assert e.value.error.data["type"] in ("APP_NOT_RUNNING", "AUTOMATION_FAILED"), e.value.error
        pid = int(pidfile.read_text())
        # Stopped without waiting for another call.
        await wait_until(lambda: not alive(pid), 10)


async def test_an_agent_that_never_starts_is_bounded_by_the_calls_timeout_and_started_once(gw, tmp_path):
    acp_app(gw, "dev.acp.silent", sys.executable, [SCRIPTED_AGENT, "silent", tmp_path], timeout_ms=1500)
    errors = []

    async def one(s):
        try:
            await ask(s, "dev.acp.silent", "hello")
        except MCPError as e:
            errors.append(e.error)

    async with gw.session() as s:
        with anyio.fail_after(20):
            async with anyio.create_task_group() as tg:
                for _ in range(3):
                    tg.start_soon(one, s)
    assert len(errors) == 3 and all(e.data["type"] == "APP_NOT_RUNNING" for e in errors), errors
    assert all("within 1 s" in e.data["detail"] for e in errors), errors[0]
    log = (gw.home / "logs" / "aai-gateway.log").read_text()
    assert log.count("started child") == 1, "the waiting calls took the first start's failure"


async def test_an_agent_with_a_string_protocol_version_is_named_as_such(gw):
    acp_app(gw, "dev.acp.version", sys.executable, [SCRIPTED_AGENT, "version"])
    async with gw.session() as s:
        with pytest.raises(MCPError) as e:
            await ask(s, "dev.acp.version", "hello")
    assert e.value.error.data["type"] == "AUTOMATION_NOT_SUPPORTED"
    assert 'speaks ACP version "1.0"' in e.value.error.data["detail"]


def test_a_one_shot_call_asks_the_agents_permission_at_the_terminal(gw):
    """`aai-gateway call` from a terminal answers the agent's permission request there;
    without a terminal it is refused with the way out, never left hanging."""
    import pty
    import select
    import subprocess
    ts_agent(gw)
    gw.config(consent={"mode": "prompt"})
    args = ["call", "dev.acp.example", "ask", '{"prompt": "update the config"}']
    for answer, edited in [(b"y\n", True), (b"n\n", False)]:
        master, slave = pty.openpty()
        proc = subprocess.Popen([str(gw.binary), "--home", str(gw.home), *args], env=gw.env(),
                                stdin=slave, stdout=subprocess.PIPE, stderr=slave)
        os.close(slave)
        seen = b""
        try:
            while b"[y/N]" not in seen:
                ready, _, _ = select.select([master], [], [], 60)
                assert ready, seen
                seen += os.read(master, 4096)
            assert b"Modifying critical configuration file" in seen, seen
            os.write(master, answer)
            out, _ = proc.communicate(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
            os.close(master)
        text = out.decode()
        assert ("successfully updated" in text) == edited, text
        assert ("prefer not to make that change" in text) != edited, text
    no_tty = gw.run(*args, timeout=60)
    assert "prefer not to make that change" in no_tty.stdout, no_tty


async def test_claude_without_its_adapter_is_offered_through_npx_after_consent(gw, tmp_path):
    """`claude` on PATH without `claude-code-acp`: the built-in Claude Code app starts the
    adapter with `npx -y @zed-industries/claude-code-acp`. That downloads code, so nothing
    runs before the user allowed the start, and the question says it downloads."""
    need_peer(ECHO_AGENT.exists(), "the `agent` example of crates.io agent-client-protocol")
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "claude").write_text("#!/bin/sh\nexit 0\n")
    marker = tmp_path / "npx-ran"
    # Stands in for npx (the platform boundary: no download here): records its arguments
    # and runs the echo agent as the adapter would.
    (bin_dir / "npx").write_text(f'#!/bin/sh\necho "$@" >> {marker}\nexec {ECHO_AGENT} "{tmp_path}"\n')
    for f in bin_dir.iterdir():
        f.chmod(0o755)
    path = f"{bin_dir}:/usr/bin:/bin"
    gw.config(consent={"mode": "prompt"})
    async with gw.session(PATH=path) as s:
        found = (await s.call_tool("aai_search", {"query": "claude"})).content[0].text
        assert "com.anthropic.claude-code" in found
        with pytest.raises(MCPError) as e:
            await ask(s, "com.anthropic.claude-code", "hello")
        err = e.value.error
        assert err.code == -32014, err
        assert "npx -y @zed-industries/claude-code-acp" in err.data["start"], err.data
        assert "downloads a package" in err.data["start"], err.data
        assert not marker.exists(), "nothing ran before the user said yes"
    gw.extra_env = {"PATH": path}  # the command line sees the same PATH, so the same app
    granted = gw.run("consent", "grant", "com.anthropic.claude-code", "--start")
    assert granted.returncode == 0, granted.stderr
    asked = []
    async with gw.session(elicitation=deciding({"`ask`": "once"}, asked), PATH=path) as s:
        r = await ask(s, "com.anthropic.claude-code", "hello", cwd=str(tmp_path))
        assert r.content[0].text.startswith("Client sent: hello")
    assert len(asked) == 1 and "downloads" not in asked[0], "the start was allowed already"
    assert marker.read_text().split() == ["-y", "@zed-industries/claude-code-acp"]
