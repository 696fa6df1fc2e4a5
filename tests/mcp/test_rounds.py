"""Round trips of MCP 2026-07-28 (input-required results): a client of that revision
cannot be sent requests mid-call, so a downstream server's roots, elicitation and sampling
requests reach it as the input-required result of its `tools/call`, the call parked and
still running until the client calls again with the answer. And a consent question the
client closes without a choice (`cancel`, as clients that cannot show forms answer) is not
a no: the model reads CONSENT_REQUIRED with the command that allows it, and after it the
call runs.

The clients are the Python SDK's own, which drives the rounds with its callbacks.

Run: python3 -m pytest tests/mcp -q -k rounds
"""
import contextlib
import subprocess
import sys

import pytest

from test_approvals import ASKING, text_of
from test_downstream import exec_, mcp_app

pytestmark = pytest.mark.anyio


async def driven(s, callbacks, name, args):
    """Calls `name` the way a 2026-07-28 client does: each input-required result is
    answered through `callbacks` (as the SDK's own client drives them) and the call
    retried with the answers and the state, until the call ends. Returns (result, rounds)."""
    from mcp import types
    rounds = 0
    result = await s.call_tool(name, args, allow_input_required=True)
    while isinstance(result, types.InputRequiredResult):
        rounds += 1
        assert rounds <= 10, "a call of more than 10 rounds"
        answers = {}
        for key, request in result.input_requests.items():
            handler = {"elicitation/create": "elicitation_callback", "roots/list": "list_roots_callback",
                       "sampling/createMessage": "sampling_callback"}[request.method]
            params = getattr(request, "params", None)
            answer = await (callbacks[handler](None, params) if params is not None
                            else callbacks[handler](None))
            answers[key] = answer.model_dump(by_alias=True, exclude_none=True, mode="json")
        result = await s.call_tool(name, args, allow_input_required=True,
                                   input_responses=answers, request_state=result.request_state)
    return result, rounds


@contextlib.asynccontextmanager
async def modern(gw, **callbacks):
    """A 2026-07-28 client over stdio with `callbacks` (elicitation, roots, sampling)."""
    from mcp import ClientSession, types
    from mcp.client.stdio import stdio_client
    errlog = open(gw.tmp / "stderr.log", "a")
    async with stdio_client(gw.params(), errlog=errlog) as (read, write):
        async with ClientSession(read, write, client_info=types.Implementation(name="modern", version="1"),
                                 **callbacks) as s:
            await s.discover()
            assert s.protocol_version == "2026-07-28"
            s.exec_ = lambda app, tool, **args: driven(
                s, callbacks, "aai_exec", {"app": app, "tool": tool, "args": args})
            yield s
    errlog.close()


async def test_a_servers_requests_reach_a_2026_client_as_rounds_of_its_call(gw):
    from mcp import types
    mcp_app(gw, "dev.mcp.asking", {"command": sys.executable, "args": [str(ASKING)]})
    asked = []

    async def list_roots(context):
        return types.ListRootsResult(roots=[types.Root(uri="file:///home/alice", name="alice")])

    async def elicit(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"pick": "blue"})
    async with modern(gw, list_roots_callback=list_roots, elicitation_callback=elicit) as s:
        r, rounds = await s.exec_("dev.mcp.asking", "roots_after", delay=0)
        assert (text_of(r), rounds) == ("roots: file:///home/alice", 1)
        r, rounds = await s.exec_("dev.mcp.asking", "ask_after", delay=0)
        assert (text_of(r), rounds) == ("answer: accept {'pick': 'blue'}", 1)
        assert asked == ["dev.mcp.asking: which?"], asked
        # One call, three questions: three rounds, the call running all along.
        r, rounds = await s.exec_("dev.mcp.asking", "nag", n=3)
        assert (text_of(r), rounds) == ("answered 3 refused 0", 3)


async def test_a_2026_servers_input_required_rounds_reach_the_calls_own_client(gw):
    """A downstream server of 2026-07-28 asks in an `input_required` result: the gateway
    puts its question to the client whose call it is (labelled with the app), and sends the
    call again with the answer and the server's `requestState` untouched. The same whether
    that client speaks 2025-11-25 (an elicitation request) or 2026-07-28 (a round)."""
    from mcp import types
    from test_downstream import passing_session
    mcp_app(gw, "dev.mcp.asking", {"command": sys.executable, "args": [str(ASKING), "--2026"]})
    asked = []

    async def elicit(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"pick": "blue"})
    async with await passing_session(gw, elicitation_callback=elicit) as s:
        r = await exec_(s, "dev.mcp.asking", "ask_in_rounds")
        assert text_of(r) == "answer: accept {'pick': 'blue'} state=asked-once", r
    async with modern(gw, elicitation_callback=elicit) as s:
        r, rounds = await s.exec_("dev.mcp.asking", "ask_in_rounds")
        assert (text_of(r), rounds) == ("answer: accept {'pick': 'blue'} state=asked-once", 1)
    assert asked == ["dev.mcp.asking: which colour?"] * 2, asked
    log = (gw.home / "logs" / "aai-gateway.log").read_text()
    assert 'revision=Some("2026-07-28")' in log, "the server was spoken to at 2026-07-28"


async def test_a_round_is_answered_once_and_only_for_its_own_call(gw):
    from mcp import types
    from mcp.shared.exceptions import MCPError
    mcp_app(gw, "dev.mcp.asking", {"command": sys.executable, "args": [str(ASKING)]})

    async def list_roots(context):
        return types.ListRootsResult(roots=[])
    async with modern(gw, list_roots_callback=list_roots) as s:
        call = {"app": "dev.mcp.asking", "tool": "roots_after", "args": {"delay": 0}}
        first = await s.call_tool("aai_exec", call, allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult), first
        request = first.input_requests["server"]
        assert request.method == "roots/list", request
        answer = {"server": {"roots": [{"uri": "file:///tmp/x"}]}}
        # Another tool's retry cannot take this answer.
        other = {"app": "dev.mcp.asking", "tool": "slow", "args": {"seconds": 0}}
        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", other, allow_input_required=True,
                              input_responses=answer, request_state=first.request_state)
        assert e.value.error.code == -32005
        done = await s.call_tool("aai_exec", call, allow_input_required=True,
                                 input_responses=answer, request_state=first.request_state)
        assert text_of(done) == "roots: file:///tmp/x", done
        # Replayed: refused, and the tool does not run again.
        with pytest.raises(MCPError) as e:
            await s.call_tool("aai_exec", call, allow_input_required=True,
                              input_responses=answer, request_state=first.request_state)
        assert "already answered" in str(e.value.error.data), e.value.error


async def test_a_malformed_answer_is_the_servers_error_not_the_gateways(gw):
    from mcp import types
    mcp_app(gw, "dev.mcp.asking", {"command": sys.executable, "args": [str(ASKING)]})

    async def list_roots(context):
        return types.ListRootsResult(roots=[])
    async with modern(gw, list_roots_callback=list_roots) as s:
        call = {"app": "dev.mcp.asking", "tool": "roots_after", "args": {"delay": 0}}
        first = await s.call_tool("aai_exec", call, allow_input_required=True)
        done = await s.call_tool("aai_exec", call, allow_input_required=True,
                                 input_responses={"server": {"action": "accept"}},
                                 request_state=first.request_state)
        r = text_of(done)
        assert r.startswith("refused") and "not valid" in r, r


async def test_a_cancelled_consent_question_tells_the_model_how_to_allow_the_call(gw):
    """Claude Code's `-p` answers every form with `cancel`: the model reads how to allow
    the call, the user runs that command, and the call runs."""
    from mcp import types
    from mcp.shared.exceptions import MCPError
    gw.add_app("com.example.echo")
    gw.config(consent={"mode": "prompt"})

    async def cancel(context, params):
        return types.ElicitResult(action="cancel")
    for revision in ("2025-11-25", "2026-07-28"):
        opened = gw.session(elicitation=cancel, client_name="headless") if revision < "2026" \
            else modern(gw, elicitation_callback=cancel)
        async with opened as s:
            with pytest.raises(MCPError) as e:
                if revision < "2026":
                    await exec_(s, "com.example.echo", "echo", text="hi")
                else:
                    await s.exec_("com.example.echo", "echo", text="hi")
            assert e.value.error.code == -32014, e.value.error
            message = e.value.error.message
            assert "aai-gateway --home" in message and "consent grant com.example.echo" in message, message
            command = e.value.error.data["command"]
            assert command in message
    # The user runs the command the model was given (the quoted words, as a shell would).
    import shlex
    words = shlex.split(command)
    assert words[0] == "aai-gateway"
    subprocess.run([str(gw.binary), *words[1:]], env=gw.env(), check=True, capture_output=True)
    async with modern(gw, elicitation_callback=cancel) as s:
        r, rounds = await s.exec_("com.example.echo", "echo", text="hi")
        assert rounds == 0 and '"hi"' in text_of(r), text_of(r)


async def test_a_declined_consent_question_stays_a_no(gw):
    from mcp import types
    from mcp.shared.exceptions import MCPError
    gw.add_app("com.example.echo")
    gw.config(consent={"mode": "prompt"})

    async def decline(context, params):
        return types.ElicitResult(action="decline")
    async with modern(gw, elicitation_callback=decline) as s:
        with pytest.raises(MCPError) as e:
            await s.exec_("com.example.echo", "echo", text="hi")
        assert e.value.error.code == -32004, e.value.error
        # Still a no (nothing remembered: the next call asks again), but it says how to
        # allow it, for clients that decline a form they cannot show (Codex, Copilot CLI).
        assert "consent grant com.example.echo" in e.value.error.message, e.value.error
        first = await s.call_tool("aai_exec", {"app": "com.example.echo", "tool": "echo", "args": {"text": "hi"}},
                                  allow_input_required=True)
        assert isinstance(first, types.InputRequiredResult), "asked again"


async def test_a_guide_asks_a_2026_client_whether_its_server_may_start(gw):
    """Before its server's first start, a guide lists no tools: a 2026-07-28 client that
    takes forms is asked (a round of `aai_guide`), and with a yes the guide lists them."""
    from mcp import types
    mcp_app(gw, "dev.mcp.asking", {"command": sys.executable, "args": [str(ASKING)]})
    gw.config(consent={"mode": "prompt"})
    asked = []

    async def allow(context, params):
        asked.append(params.message)
        decision = params.requested_schema["properties"]["decision"]
        choices = decision.get("enum") or [c["const"] for c in decision["oneOf"]]
        return types.ElicitResult(action="accept", content={"decision": next(c for c in choices if c != "deny")})
    async with modern(gw, elicitation_callback=allow) as s:
        guide, rounds = await driven(s, {"elicitation_callback": allow}, "aai_guide", {"app": "dev.mcp.asking"})
        text = text_of(guide)
        assert rounds == 1 and len(asked) == 1, asked
        assert str(ASKING) in asked[0], asked  # the question names the command it starts
        assert "roots_after" in text and "not started" not in text, text


async def test_a_guide_that_cannot_ask_says_so_at_once_whatever_the_wait(gw):
    """`consent.waitSeconds` is for calls: a guide nobody can be asked about returns at
    once, saying how to allow the start."""
    import anyio
    mcp_app(gw, "dev.mcp.asking", {"command": sys.executable, "args": [str(ASKING)]})
    gw.config(consent={"mode": "prompt", "waitSeconds": 600})
    async with gw.session() as s:  # no elicitation
        with anyio.fail_after(60):
            guide = await s.call_tool("aai_guide", {"app": "dev.mcp.asking"})
        text = text_of(guide)
        assert "has not been started" in text and "consent grant dev.mcp.asking" in text, text


async def test_sampling_is_asked_about_in_its_own_round_not_by_the_tools_answer(gw):
    """The tool's question is answered in the round before the call; the server's sampling
    mid-call is a question of its own (all it sends, shown), then the sampling itself."""
    from mcp import types
    mcp_app(gw, "dev.mcp.asking", {"command": sys.executable, "args": [str(ASKING)]})
    gw.config(consent={"mode": "prompt"})
    asked, sampled = [], []

    async def elicit(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"decision": "once"})

    async def sample(context, params):
        sampled.append(params)
        return types.CreateMessageResult(role="assistant", model="m",
                                         content=types.TextContent(type="text", text="fine"))
    async with modern(gw, elicitation_callback=elicit, sampling_callback=sample) as s:
        r, rounds = await s.exec_("dev.mcp.asking", "sample", include_context="none")
        assert text_of(r) == "sampled: fine", text_of(r)
    assert len(asked) == 2 and len(sampled) == 1, asked
    assert "wants to run `sample`" in asked[0], asked
    assert "your client's model" in asked[1] and "EARLIER-SECRET" in asked[1], asked
    assert rounds == 3, rounds  # the tool's question, sampling's question, the sampling


async def test_a_batch_asks_a_2026_client_in_rounds_of_its_own_call(gw):
    """Each call of an `aai_batch` that needs consent is a round of the batch (one question
    at a time); the batch ends with every call's status."""
    from mcp import types
    gw.add_app("com.example.echo")
    gw.config(consent={"mode": "prompt"})
    asked = []

    async def elicit(context, params):
        asked.append(params.message)
        decision = "deny" if "`sleep`" in params.message else "once"
        return types.ElicitResult(action="accept", content={"decision": decision})
    calls = [{"app": "com.example.echo", "tool": "echo", "args": {"text": "one"}},
             {"app": "com.example.echo", "tool": "sleep", "args": {"seconds": 0}}]
    async with modern(gw, elicitation_callback=elicit) as s:
        r, rounds = await driven(s, {"elicitation_callback": elicit}, "aai_batch", {"calls": calls})
    statuses = [x["status"] for x in r.structured_content["results"]]
    assert statuses == ["ok", "error"], r.structured_content
    assert r.structured_content["results"][1]["error"]["data"]["type"] == "PERMISSION_DENIED"
    assert rounds == 2 and len(asked) == 2, asked
