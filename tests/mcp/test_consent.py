"""Consent: the user decides which client may run which tool. Without a channel a call
fails with CONSENT_REQUIRED naming the command that grants it; with MCP elicitation the
client's user picks allow once / always this tool / always this app / deny; decisions are
per caller (client name and transport), remembered in state.db, and revocable.

Run: python3 -m pytest tests/mcp -q -k consent
"""
import json

import pytest

MCPError = pytest.importorskip("mcp", reason="PyPI package mcp is not installed").MCPError

pytestmark = pytest.mark.anyio

ECHO = {"app": "com.example.echo", "tool": "echo", "args": {"text": "hi"}}


def prompting(gw, **more):
    gw.config(consent={"mode": "prompt"}, **more)
    gw.add_app("com.example.echo")


class Answers:
    """An elicitation callback that answers from a list and records the questions."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.asked = []

    async def __call__(self, context, params):
        from mcp import types
        self.asked.append(params.message)
        answer = self.answers.pop(0)
        if answer in ("decline", "cancel"):
            return types.ElicitResult(action=answer)
        return types.ElicitResult(action="accept", content={"decision": answer})


async def test_without_a_channel_the_call_names_the_grant_command(gw):
    prompting(gw)
    async with gw.session(client_name="agent-x") as s:
        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", ECHO)
        err = e.value.error
        assert err.code == -32014, err
        assert err.data["caller"] == "agent-x@stdio"
        command = err.data["command"]
        assert command == "aai-gateway consent grant com.example.echo --tool echo --caller 'agent-x@stdio'"
        # Guides, search and lists never ask.
        await s.call_tool("aai_guide", {"app": "com.example.echo"})
        await s.call_tool("aai_search", {"query": "echo"})
        await s.list_tools()
        granted = gw.run("consent", "grant", "com.example.echo", "--tool", "echo", "--caller", "agent-x@stdio")
        assert granted.returncode == 0, granted.stderr
        r = await s.call_tool("aai_exec", ECHO)
        assert r.structured_content["echo"]["text"] == "hi"
    listed = json.loads(gw.run("consent", "list", "--json").stdout)
    assert [(g["caller"], g["app"], g["tool"]) for g in listed["grants"]] == [("agent-x@stdio", "com.example.echo", "echo")]
    assert gw.run("consent", "revoke", "com.example.echo").stdout.strip() == "revoked 1 grant"
    async with gw.session(client_name="agent-x") as s:
        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", ECHO)
        assert e.value.error.code == -32014, "a revoked grant asks again"


async def test_elicitation_choices(gw):
    prompting(gw)
    answers = Answers("once", "decline", "cancel", "deny", "tool")
    async with gw.session(elicitation=answers, client_name="agent-e") as s:
        assert (await s.call_tool("aai_exec", ECHO)).structured_content["echo"]["text"] == "hi"
        for _ in range(3):  # decline, cancel, deny: this call only, nothing remembered
            with pytest.raises(MCPError) as e:
                await s.call_tool("aai_exec", ECHO)
            assert e.value.error.code == -32004
        await s.call_tool("aai_exec", ECHO)  # "always this tool"
        await s.call_tool("aai_exec", ECHO)
        await s.call_tool("aai_exec", ECHO)
    assert len(answers.asked) == 5, answers.asked
    assert "agent-e wants to run `echo`" in answers.asked[0]
    # Remembered across restarts, for this caller only.
    async with gw.session(client_name="agent-e") as s:
        await s.call_tool("aai_exec", ECHO)
    async with gw.session(client_name="agent-other") as s:
        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", ECHO)
        assert e.value.error.code == -32014


async def test_always_this_app_covers_its_other_tools(gw):
    prompting(gw)
    answers = Answers("app")
    async with gw.session(elicitation=answers, client_name="agent-a") as s:
        await s.call_tool("aai_exec", ECHO)
        r = await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "sleep", "args": {"seconds": 0}})
        assert r.content[0].text == "slept"
    assert len(answers.asked) == 1


async def test_no_spelling_bypasses_consent(gw):
    prompting(gw, exposure="flat")
    async with gw.session(client_name="agent-s") as s:
        for name, args in [("aai_exec", ECHO), ("aai:exec", ECHO),
                           ("com.example.echo:echo", {"text": "hi"}),
                           ("com_example_echo__echo", {"text": "hi"})]:
            with pytest.raises(MCPError) as e:
                await s.call_tool(name, args)
            assert e.value.error.code == -32014, name


async def test_per_app_modes_override_the_default(gw):
    gw.config(consent={"mode": "prompt"}, apps={"com.example.echo": {"consent": "allow"},
                                                "com.example.off": {"consent": "deny"}})
    gw.add_app("com.example.echo")
    gw.add_app("com.example.off")
    async with gw.session() as s:
        await s.call_tool("aai_exec", ECHO)
        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", {"app": "com.example.off", "tool": "echo", "args": {"text": "x"}})
        assert e.value.error.code == -32004
