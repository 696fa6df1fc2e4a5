"""Nothing runs, fetches or leaves before the user says so: a downstream MCP server (or an
ACP agent) starts only once the user allowed it. Its guide, a `flat` tool list and a
refused call start nothing; the question names the exact command; "always" is tied to
that command; the tool list it returned is kept on disk for later runs. An unknown app id
is never looked up on the web (run in an empty network namespace under strace).

Run: python3 -m pytest tests/mcp -q -k start_consent
"""
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import need_peer, running
from test_consent import Answers

MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio

MARKER_SERVER = Path(__file__).with_name("marker_server.py")
APP = "dev.mcp.marker"


def marker_app(gw, marker: Path, extra_args=()):
    gw.put(APP, {
        "schemaVersion": "1.0", "version": "1.0.0", "platform": "linux",
        "app": {"id": APP, "name": {"en": "Marker"}, "defaultLang": "en",
                "description": "A server that leaves a mark when it starts"},
        "execution": {"type": "mcp", "command": sys.executable,
                      "args": [str(MARKER_SERVER), str(marker), *extra_args]},
    })


def starts(marker: Path) -> int:
    return marker.read_text().count("started") if marker.exists() else 0


async def test_nothing_starts_before_the_user_said_yes(gw, tmp_path):
    marker = tmp_path / "marker"
    gw.config(consent={"mode": "prompt"})
    marker_app(gw, marker)
    async with gw.session(client_name="agent-m") as s:
        guide = (await s.call_tool("aai_guide", {"app": APP})).content[0].text
        assert "has not been started" in guide and "once it is allowed to start" in guide, guide
        assert f"aai-gateway --home {gw.home} consent grant {APP} --start" in guide, guide
        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", {"app": APP, "tool": "hello", "args": {"name": "x"}})
        err = e.value.error
        assert err.code == -32014, err
        assert err.data["command"].endswith("--caller agent-m@stdio --start"), err.data
        assert str(MARKER_SERVER) in err.data["start"], err.data
        # The same through its app_ tool.
        guide = (await s.call_tool("app_dev_mcp_marker", {})).content[0].text
        assert "has not been started" in guide
    assert starts(marker) == 0, "a guide or a refused call started the server"
    assert not running(tmp_path, "marker_server")

    gw.config(consent={"mode": "prompt"}, exposure="flat")
    async with gw.session(client_name="agent-m") as s:
        names = [t.name for t in (await s.list_tools()).tools]
        assert not any(n.startswith("dev_mcp_marker") for n in names), names
    assert starts(marker) == 0, "a flat tools/list started the server"

    # Allowed from the command line: now a guide may start it and list its tools.
    granted = gw.run("consent", "grant", APP, "--start")
    assert granted.returncode == 0, granted.stderr
    assert "may now start" in granted.stdout
    gw.config(consent={"mode": "prompt"})
    async with gw.session(client_name="agent-m") as s:
        guide = (await s.call_tool("aai_guide", {"app": APP})).content[0].text
        assert "### `hello`" in guide, guide
    assert starts(marker) == 1


async def test_the_question_names_the_command_and_always_is_tied_to_it(gw, tmp_path):
    marker = tmp_path / "marker"
    gw.config(consent={"mode": "prompt"})
    marker_app(gw, marker)
    answers = Answers("deny", "once", "tool")
    args = {"app": APP, "tool": "hello", "args": {"name": "x"}}
    async with gw.session(client_name="agent-q", elicitation=answers) as s:
        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", args)
        assert e.value.error.code == -32004
        assert starts(marker) == 0, "denied: nothing started"
        r = await s.call_tool("aai_exec", args)
        assert r.content[0].text == "hello x"
        assert starts(marker) == 1
    question = answers.asked[0]
    assert f"{sys.executable} {MARKER_SERVER} {marker}" in question, question
    assert "agent-q wants to run `hello`" in question

    # "Once" covered that run only: a new run asks again; "always this tool" is kept.
    async with gw.session(client_name="agent-q", elicitation=answers) as s:
        assert (await s.call_tool("aai_exec", args)).content[0].text == "hello x"
    assert len(answers.asked) == 3
    async with gw.session(client_name="agent-q", elicitation=Answers()) as s:
        assert (await s.call_tool("aai_exec", args)).content[0].text == "hello x"
    assert starts(marker) == 3
    grants = json.loads(gw.run("consent", "list", "--json").stdout)["grants"]
    assert {(g["caller"], g["tool"]) for g in grants} == {("agent-q@stdio", "hello"), ("*", "@start")}

    # A changed command is asked about again.
    marker_app(gw, marker, extra_args=["--changed"])
    again = Answers("once")
    async with gw.session(client_name="agent-q", elicitation=again) as s:
        assert (await s.call_tool("aai_exec", args)).content[0].text == "hello x"
    assert len(again.asked) == 1 and "--changed" in again.asked[0], again.asked


async def test_a_kept_tool_list_is_shown_without_starting_the_server(gw, tmp_path):
    marker = tmp_path / "marker"
    gw.config(consent={"mode": "prompt"})
    marker_app(gw, marker)
    async with gw.session(client_name="agent-k", elicitation=Answers("once")) as s:
        await s.call_tool("aai_exec", {"app": APP, "tool": "hello", "args": {"name": "x"}})
    assert starts(marker) == 1
    kept = list((gw.home / "cache" / "mcp-tools").glob("*.json"))
    assert len(kept) == 1 and json.loads(kept[0].read_text())["app"] == APP
    assert oct(kept[0].stat().st_mode & 0o777) == "0o600"
    # A later run shows the kept list in the guide; nothing starts.
    async with gw.session(client_name="agent-k") as s:
        guide = (await s.call_tool("aai_guide", {"app": APP})).content[0].text
        assert "### `hello`" in guide and "last ran" in guide, guide
    assert starts(marker) == 1

    # Allowed always: a flat list shows the kept tools, still without starting it.
    gw.run("consent", "grant", APP, "--start", check=True)
    gw.config(consent={"mode": "prompt"}, exposure="flat")
    async with gw.session(client_name="agent-k") as s:
        names = [t.name for t in (await s.list_tools()).tools]
        assert "dev_mcp_marker__hello" in names, names
    assert starts(marker) == 1


def test_an_unknown_id_never_reaches_the_network(gw, tmp_path):
    strace, unshare = shutil.which("strace"), shutil.which("unshare")
    need_peer(strace is not None and unshare is not None, "strace and unshare (apt: strace, util-linux)")
    if os.geteuid() != 0:
        pytest.skip("an empty network namespace needs root (CI runs as root)")
    trace = tmp_path / "trace"
    p = subprocess.run(
        [strace, "-f", "-e", "trace=connect,sendto,sendmsg", "-o", str(trace),
         unshare, "-n", str(gw.binary), "--home", str(gw.home), "call", "nope.app", "anything"],
        env=gw.env(), capture_output=True, text=True, timeout=60)
    assert p.returncode == 1, p.stderr
    error = json.loads(p.stdout)
    assert error["data"]["type"] == "APP_NOT_FOUND", error
    assert "web_discover" in error["data"]["detail"] and "https://nope.app" in error["data"]["detail"]
    calls = trace.read_text()
    inet = [line for line in calls.splitlines() if "AF_INET" in line]
    assert not inet, f"network calls were made: {inet}"
    assert not re.search(r"htons\((53|443|80)\)", calls), calls


async def test_an_agent_starts_only_with_an_allowed_call(gw, tmp_path):
    from test_acp import ECHO_AGENT, ask, echo_agent
    echo_agent(gw)
    gw.config(consent={"mode": "prompt"})
    answers = Answers("deny", "once")
    async with gw.session(client_name="agent-a", elicitation=answers) as s:
        with pytest.raises(MCPError) as e:
            await ask(s, "dev.acp.echo", "hello")
        assert e.value.error.code == -32004
        assert not running(tmp_path, str(ECHO_AGENT)), "a denied call started the agent"
        r = await ask(s, "dev.acp.echo", "hello")
        assert "hello" in r.content[0].text
    assert f"start `{ECHO_AGENT}`" in answers.asked[0], answers.asked


async def test_a_dialog_that_cannot_open_is_no_answer(gw):
    need_peer(shutil.which("zenity") is not None, "zenity (Debian package zenity)")
    gw.config(consent={"mode": "prompt"})
    gw.add_app("com.example.echo")
    # A display that is set but does not exist: zenity exits 1, as when it is closed.
    async with gw.session(DISPLAY=":4242", AAI_CONSENT_DIALOG="zenity") as s:
        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "echo", "args": {"text": "hi"}})
    err = e.value.error
    assert err.code == -32014, f"not an answer, so not a denial: {err}"
    assert err.data["command"].startswith(f"aai-gateway --home {gw.home} consent grant com.example.echo")


async def test_a_command_changed_while_the_user_is_asked_is_asked_about_again(gw, tmp_path):
    import anyio
    marker, other = tmp_path / "marker", tmp_path / "other"
    gw.config(consent={"mode": "prompt"})
    marker_app(gw, marker)
    asked = []

    async def answer(context, params):
        from mcp import types
        asked.append(params.message)
        if len(asked) == 1:
            # The descriptor is edited while the question is open, and the gateway has
            # loaded the edit before the answer comes.
            log = gw.home / "logs" / "aai-gateway.log"
            before = log.read_text().count("catalog loaded")
            marker_app(gw, other)
            with anyio.fail_after(15):
                while log.read_text().count("catalog loaded") == before:
                    await anyio.sleep(0.1)
            await anyio.sleep(0.3)
            return types.ElicitResult(action="accept", content={"decision": "once"})
        return types.ElicitResult(action="accept", content={"decision": "deny"})

    gw.config(consent={"mode": "prompt"}, scanInterval=1)
    async with gw.session(client_name="agent-r", elicitation=answer) as s:
        with pytest.raises(MCPError):
            await s.call_tool("aai_exec", {"app": APP, "tool": "hello", "args": {"name": "x"}})
    assert len(asked) == 2 and str(other) in asked[1], asked
    assert starts(other) == 0, "the new command started without being asked"


def test_reserved_tool_names_do_not_load(gw):
    from conftest import tool
    for name in ["@start", "*", "@anything"]:
        gw.add_app("com.example.reserved", tools=[tool(name)])
        scan = json.loads(gw.run("--scan", "--json").stdout)
        assert not any(a["id"] == "com.example.reserved" for a in scan["apps"]), name
        assert any("is reserved" in d["message"] for d in scan["diagnostics"]), name


async def test_a_read_only_hint_runs_without_asking_once_the_server_may_start(gw, tmp_path):
    """`consent.readOnly: "allow"` trusts a server's readOnlyHint for its calls, never for
    starting it: the start is still asked about."""
    marker = tmp_path / "marker"
    gw.config(consent={"mode": "prompt", "readOnly": "allow"})
    marker_app(gw, marker)
    async with gw.session(client_name="agent-ro") as s:
        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", {"app": APP, "tool": "hello", "args": {"name": "x"}})
        assert e.value.error.code == -32014 and starts(marker) == 0
    assert gw.run("consent", "grant", APP, "--start").returncode == 0
    async with gw.session(client_name="agent-ro") as s:
        r = await s.call_tool("aai_exec", {"app": APP, "tool": "hello", "args": {"name": "x"}})
        assert "hello x" in r.content[0].text
        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", {"app": APP, "tool": "env", "args": {"name": "HOME"}})
        assert e.value.error.code == -32014, "no hint, so it asks"
