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
        # The gateway runs on a home of the test's, not ~/.aai: the command names it.
        # The adapter has not been allowed to start: the command allows its command too.
        assert command == (f"aai-gateway --home {gw.home} consent grant com.example.echo --tool echo"
                           " --caller agent-x@stdio --start")
        # A client that shows only the message still tells the user what to run.
        hint = (f"Ask the user to approve it at {err.data['ui']} (while this gateway runs) or to run:"
                f" {command}")
        assert err.message.endswith(hint), err.message
        assert err.data["hint"] == hint
        # Guides, search and lists never ask.
        await s.call_tool("aai_guide", {"app": "com.example.echo"})
        await s.call_tool("aai_search", {"query": "echo"})
        await s.list_tools()
        # Pasted as it is, in a shell without AAI_HOME: the grant lands where the gateway
        # reads it, and the retry runs.
        import os
        import subprocess
        bindir = gw.tmp / "bin"
        bindir.mkdir()
        (bindir / "aai-gateway").symlink_to(gw.binary)
        env = {k: v for k, v in gw.env().items() if k != "AAI_HOME"}
        env["PATH"] = f"{bindir}:{os.environ['PATH']}"
        env["HOME"] = str(gw.tmp / "elsewhere")
        granted = subprocess.run(["sh", "-c", command], env=env, capture_output=True, text=True)
        assert granted.returncode == 0, granted.stderr
        assert not (gw.tmp / "elsewhere" / ".aai").exists()
        r = await s.call_tool("aai_exec", ECHO)
        assert r.structured_content["echo"]["text"] == "hi"
    listed = json.loads(gw.run("consent", "list", "--json").stdout)
    assert [(g["caller"], g["app"], g["tool"]) for g in listed["grants"]] == [
        ("*", "com.example.echo", "@start"), ("agent-x@stdio", "com.example.echo", "echo")]
    assert gw.run("consent", "revoke", "com.example.echo").stdout.strip() == "revoked 2 grants"
    async with gw.session(client_name="agent-x") as s:
        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", ECHO)
        assert e.value.error.code == -32014, "a revoked grant asks again"


async def test_the_question_shows_the_arguments_masked_and_cut(gw):
    """The user sees what they approve: the arguments, with secrets masked as history
    masks them and long values cut, in the client's form and in the web UI."""
    prompting(gw)
    secret_url = "https://alice:hunter2@example.com/x?token=abc123&page=2"
    answers = Answers("once", "once")
    async with gw.session(elicitation=answers, client_name="agent-a") as s:
        args = {"app": "com.example.echo", "tool": "echo", "args": {"text": secret_url}}
        assert (await s.call_tool("aai_exec", args)).structured_content["echo"]["text"] == secret_url
        await s.call_tool("aai_exec", {**args, "args": {"text": "L" * 5000}})
    assert "L" * 150 in answers.asked[1] and "L" * 201 not in answers.asked[1], "cut, not dropped"
    asked = answers.asked[0]
    assert "with {" in asked and "example.com" in asked and "page=2" in asked, asked
    assert "hunter2" not in asked and "abc123" not in asked, asked
    # Without a channel: the web UI's pending list shows them the same way, cut.
    import urllib.request
    async with gw.session(client_name="agent-b") as s:
        for text in ["L" * 2000, secret_url]:
            with pytest.raises(MCPError) as e:
                await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "echo", "args": {"text": text}})
        link = e.value.error.data["ui"]
        token = gw.run("token").stdout.strip()
        req = urllib.request.Request(link, headers={"Authorization": f"Bearer {token}"})
        page = urllib.request.urlopen(req, timeout=10).read().decode()
    assert "example.com" in page and "hunter2" not in page and "abc123" not in page, page


async def test_read_only_tools_run_without_asking_only_when_configured(gw):
    from conftest import tool
    ro = tool("echo", {"text": {"type": "string"}}, ["text"], readOnly=True)
    rw = tool("progress")
    for read_only, look_asks in [("ask", True), ("allow", False)]:
        gw.config(consent={"mode": "prompt", "readOnly": read_only})
        gw.add_app("com.example.echo", tools=[ro, rw])
        if read_only == "allow":
            # It never covers starting the adapter: unapproved, even a read-only tool asks.
            async with gw.session(client_name="agent-ro-start") as s:
                with pytest.raises(MCPError) as e:
                    await s.call_tool("aai_exec", ECHO)
                assert e.value.error.code == -32014
                assert "will first start" in e.value.error.message, e.value.error.message
            assert gw.run("consent", "grant", "com.example.echo", "--start").returncode == 0
        async with gw.session(client_name=f"agent-ro-{read_only}") as s:
            if look_asks:
                with pytest.raises(MCPError) as e:
                    await s.call_tool("aai_exec", ECHO)
                assert e.value.error.code == -32014
            else:
                r = await s.call_tool("aai_exec", ECHO)
                assert not r.is_error and '"hi"' in r.content[0].text, r
            with pytest.raises(MCPError) as e:
                await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "progress", "args": {}})
            assert e.value.error.code == -32014, "a tool that writes still asks"
    scan = json.loads(gw.run("--scan", "--json").stdout)
    assert "consent.readOnly" not in json.dumps(scan.get("diagnostics", []))


async def test_elicitation_choices(gw):
    prompting(gw)
    answers = Answers("once", "decline", "cancel", "deny", "tool")
    async with gw.session(elicitation=answers, client_name="agent-e") as s:
        assert (await s.call_tool("aai_exec", ECHO)).structured_content["echo"]["text"] == "hi"
        # decline, deny: this call only, nothing remembered; a cancel is no answer at all
        # (what clients that cannot show forms send): how to allow it, for the model.
        for expected in (-32004, -32014, -32004):
            with pytest.raises(MCPError) as e:
                await s.call_tool("aai_exec", ECHO)
            assert e.value.error.code == expected, e.value.error
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


async def test_on_2026_07_28_consent_is_an_input_required_round_trip(gw):
    """The stateless revision forbids server requests: the gateway answers the call with an
    input-required result carrying the consent form and a sealed requestState, and the
    client retries with the answer."""
    from mcp import ClientSession, types
    from mcp.client.streamable_http import streamable_http_client
    from test_http_transport import web
    prompting(gw)

    async def never(context, params):
        raise AssertionError("no server request may reach a 2026-07-28 client")

    def answer(decision):
        if decision in ("decline", "cancel"):
            return {"consent": types.ElicitResult(action=decision)}
        return {"consent": types.ElicitResult(action="accept", content={"decision": decision})}

    with web(gw) as (url, _):
        async with streamable_http_client(url) as (read, write):
            async with ClientSession(read, write, elicitation_callback=never,
                                     client_info=types.Implementation(name="round-trip", version="1")) as s:
                await s.discover()

                async def call(args=ECHO, **retry):
                    return await s.call_tool("aai_exec", args, allow_input_required=True, **retry)

                first = await call()
                assert isinstance(first, types.InputRequiredResult), first
                form = first.input_requests["consent"]
                assert "round-trip wants to run `echo` of Echo" in form.params.message
                state = first.request_state
                assert state and "echo" not in state, "the state is sealed, not readable"
                # A forged, cut or foreign state is refused, whatever the answer says.
                for bad in [state[:-4] + "AAAA", "rs1.forged", ""]:
                    with pytest.raises(MCPError) as e:
                        await call(input_responses=answer("app"), request_state=bad)
                    assert e.value.error.code == -32005, bad
                other = {"app": "com.example.echo", "tool": "sleep", "args": {"seconds": 0}}
                with pytest.raises(MCPError) as e:
                    await call(other, input_responses=answer("app"), request_state=state)
                assert e.value.error.code == -32005, "the state is bound to the tool it asked about"
                # Declined: this call only, nothing remembered.
                with pytest.raises(MCPError) as e:
                    await call(input_responses=answer("decline"), request_state=state)
                assert e.value.error.code == -32004
                asked_again = await call()
                assert isinstance(asked_again, types.InputRequiredResult), "asks again"
                # A state is answered once: replaying the declined one is refused.
                with pytest.raises(MCPError) as e:
                    await call(input_responses=answer("once"), request_state=state)
                assert e.value.error.code == -32005 and "already answered" in e.value.error.data["detail"]
                # Allowed once: runs; replaying that answer does not run it again; the next
                # call asks again.
                state = asked_again.request_state
                r = await call(input_responses=answer("once"), request_state=state)
                assert r.structured_content["echo"]["text"] == "hi"
                with pytest.raises(MCPError) as e:
                    await call(input_responses=answer("once"), request_state=state)
                assert e.value.error.code == -32005, "an allow-once state is single-use"
                again = await call()
                assert isinstance(again, types.InputRequiredResult)
                # Always this tool: runs now and from now on without a round trip.
                r = await call(input_responses=answer("tool"), request_state=again.request_state)
                assert r.structured_content["echo"]["text"] == "hi"
                r = await call()
                assert r.structured_content["echo"]["text"] == "hi"
    grants = json.loads(gw.run("consent", "list", "--json").stdout)["grants"]
    # The adapter's command, named in the question answered "always", is remembered too.
    assert [(g["caller"], g["tool"]) for g in grants] == [("*", "@start"), ("round-trip@http", "echo")]


async def test_over_http_with_a_token_the_token_is_part_of_the_caller(gw):
    """Grants made under one bearer token do not serve another: the caller is
    `name@http#<first 8 hex digits of the token's SHA-256>`."""
    import hashlib
    from mcp import ClientSession, types
    from mcp.client.streamable_http import streamable_http_client
    from test_http_transport import web
    prompting(gw)
    token = "consent-t0ken-one-long-enough"
    with web(gw, token=token) as (url, _):
        import httpx2
        client = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"})
        async with streamable_http_client(url, http_client=client) as (read, write):
            async with ClientSession(read, write, client_info=types.Implementation(name="tok", version="1")) as s:
                await s.initialize()
                with pytest.raises(MCPError) as e:
                    await s.call_tool("aai_exec", ECHO)
    token_id = hashlib.sha256(token.encode()).hexdigest()[:8]
    assert e.value.error.data["caller"] == f"tok@http#{token_id}"
    assert token not in json.dumps(e.value.error.data)


async def test_elicitation_over_http_with_two_clients(gw):
    """The same choices over Streamable HTTP (sessions of 2025-11-25), and two clients with
    different clientInfo get separate decisions."""
    from mcp import ClientSession, types
    from mcp.client.streamable_http import streamable_http_client
    from test_http_transport import web
    prompting(gw)
    other = {"app": "com.example.echo", "tool": "sleep", "args": {"seconds": 0}}
    with web(gw) as (url, _):
        first = Answers("decline", "cancel", "tool", "app")
        async with streamable_http_client(url) as (read, write):
            async with ClientSession(read, write, elicitation_callback=first,
                                     client_info=types.Implementation(name="first", version="1")) as s:
                await s.initialize()
                # declined, then cancelled: refused, not remembered (a cancel is no answer:
                # CONSENT_REQUIRED, with how to allow it)
                for expected in (-32004, -32014):
                    with pytest.raises(MCPError) as e:
                        await s.call_tool("aai_exec", ECHO)
                    assert e.value.error.code == expected, e.value.error
                r = await s.call_tool("aai_exec", ECHO)  # always this tool
                assert r.structured_content["echo"]["text"] == "hi"
                await s.call_tool("aai_exec", ECHO)  # not asked again
                await s.call_tool("aai_exec", other)  # another tool asks: always this app
                await s.call_tool("aai_exec", other)
        assert len(first.asked) == 4
        second = Answers("deny")
        async with streamable_http_client(url) as (read, write):
            async with ClientSession(read, write, elicitation_callback=second,
                                     client_info=types.Implementation(name="second", version="1")) as s:
                await s.initialize()
                with pytest.raises(MCPError) as e:
                    await s.call_tool("aai_exec", ECHO)
                assert e.value.error.code == -32004, "the first client's grants are its own"
        assert len(second.asked) == 1 and second.asked[0].startswith("second wants to run `echo`")
    grants = json.loads(gw.run("consent", "list", "--json").stdout)["grants"]
    assert sorted((g["caller"], g["tool"]) for g in grants) == [("*", "@start"), ("first@http", "*"), ("first@http", "echo")]


async def test_the_grant_command_is_safe_to_paste_into_a_shell(gw):
    """Tool names come from any descriptor and caller names from any client: the command in
    CONSENT_REQUIRED quotes every word, so pasting it grants exactly that and runs nothing
    else."""
    import os
    import subprocess
    from conftest import tool
    gw.config(consent={"mode": "prompt"})
    hostile = "x$(touch PWNED1)`touch PWNED2`;touch PWNED3"
    caller = "c'; touch PWNED4; echo '"
    gw.add_app("com.example.echo", tools=[tool(hostile)])
    async with gw.session(client_name=caller) as s:
        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": hostile, "args": {}})
    assert e.value.error.code == -32014
    bindir = gw.tmp / "bin"
    bindir.mkdir()
    (bindir / "aai-gateway").symlink_to(gw.binary)
    env = {k: v for k, v in gw.env().items() if k != "AAI_HOME"}
    p = subprocess.run(["sh", "-c", e.value.error.data["command"]], cwd=gw.tmp, capture_output=True, text=True,
                       env={**env, "PATH": f"{bindir}:{os.environ['PATH']}"})
    assert p.returncode == 0, p.stderr
    assert not any((gw.tmp / f"PWNED{n}").exists() for n in range(1, 5)), "pasting ran a command"
    grants = json.loads(gw.run("consent", "list", "--json").stdout)["grants"]
    assert [(g["caller"], g["tool"]) for g in grants] == [("*", "@start"), (f"{caller}@stdio", hostile)]
    assert e.value.error.data["powershellCommand"].startswith(f"aai-gateway '--home' '{gw.home}' 'consent' 'grant'")
