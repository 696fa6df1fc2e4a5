"""A downstream MCP server that asks its client things during its calls (roots,
elicitation, sampling), for the tests of where those requests go and how many a call may
make (test_approvals.py, test_rounds.py).

By default a server of the 2025 generation: its tools ask with requests of their own
mid-call, which 2026-07-28 forbids, and it does not answer `server/discover`, so a client
speaks 2025-11-25 to it. With `--2026` it speaks 2026-07-28 and its tool `ask_in_rounds`
asks in an `input_required` result instead.

Run: python3 asking_server.py [--2026]  (stdio), or python3 asking_server.py http PORT
"""
import asyncio
import sys

from mcp import types
from mcp.server.mcpserver import Context, MCPServer
from mcp_types import ElicitRequest, ElicitRequestFormParams, InputRequiredResult

MODERN = "--2026" in sys.argv
server = MCPServer("asking")
if not MODERN:
    # The SDK has no switch for it: without the handler, `server/discover` is unknown (and
    # on stdio the handshake-only loop below serves the connection).
    server._lowlevel_server._request_handlers.pop("server/discover")


async def serve_2025_stdio():
    """Stdio in the SDK's handshake-only loop: `initialize` after a refused
    `server/discover` is taken (the SDK's default loop takes the first request's era)."""
    from mcp.server.runner import serve_loop
    from mcp.server.stdio import stdio_server
    lowlevel = server._lowlevel_server
    async with stdio_server() as (read, write):
        async with lowlevel.lifespan(lowlevel) as state:
            await serve_loop(lowlevel, read, write, lifespan_state=state,
                             init_options=lowlevel.create_initialization_options())


@server.tool(description="Asks the user a question in an input_required round (2026-07-28)")
async def ask_in_rounds(ctx: Context) -> str | InputRequiredResult:
    answers = ctx.input_responses
    if not answers:
        question = ElicitRequestFormParams(
            message="which colour?",
            requested_schema={"type": "object", "properties": {"pick": {"type": "string"}}})
        return InputRequiredResult(input_requests={"colour": ElicitRequest(params=question)},
                                   request_state="asked-once")
    answer = answers["colour"]
    if hasattr(answer, "model_dump"):
        answer = answer.model_dump(exclude_none=True)
    return f"answer: {answer['action']} {answer.get('content')} state={ctx.request_state}"


@server.tool(description="Waits `delay` seconds, then asks the client for its roots")
async def roots_after(delay: float, ctx: Context) -> str:
    await asyncio.sleep(delay)
    try:
        roots = await ctx.request_context.session.list_roots()
    except Exception as e:  # the gateway's refusal reaches the server as an error
        return f"refused: {e}"
    return "roots: " + ",".join(str(r.uri) for r in roots.roots)


@server.tool(description="Waits `delay` seconds, then asks the user a question (elicitation)")
async def ask_after(delay: float, ctx: Context) -> str:
    await asyncio.sleep(delay)
    try:
        answer = await ctx.request_context.session.elicit_form(
            "which?", {"type": "object", "properties": {"pick": {"type": "string"}}},
            related_request_id=ctx.request_id)
    except Exception as e:
        return f"refused: {e}"
    return f"answer: {answer.action} {answer.content}"


@server.tool(description="Sleeps `seconds` seconds")
async def slow(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "slept"


@server.tool(description="Sends `n` roots/list requests at once and counts the answers")
async def flood(n: int, ctx: Context) -> str:
    async def one():
        try:
            await ctx.request_context.session.list_roots()
            return True
        except Exception:
            return False
    results = await asyncio.gather(*(one() for _ in range(n)))
    return f"answered {sum(results)} refused {n - sum(results)}"


@server.tool(description="Asks the user `n` questions one after another and counts the answers")
async def nag(n: int, ctx: Context) -> str:
    answered = refused = 0
    for _ in range(n):
        try:
            await ctx.request_context.session.elicit_form(
                "again?", {"type": "object", "properties": {"ok": {"type": "boolean"}}})
            answered += 1
        except Exception:
            refused += 1
    return f"answered {answered} refused {refused}"


@server.tool(description="Samples the client's model with earlier messages and context")
async def sample(include_context: str, ctx: Context) -> str:
    params = dict(
        messages=[
            types.SamplingMessage(role="user", content=types.TextContent(type="text", text="EARLIER-SECRET")),
            types.SamplingMessage(role="assistant", content=types.TextContent(type="text", text="ok")),
            types.SamplingMessage(role="user", content=types.TextContent(type="text", text="LAST-QUESTION")),
        ],
        system_prompt="SYSTEM-PROMPT-TEXT",
        max_tokens=321,
    )
    if include_context != "none":
        params["include_context"] = include_context
    try:
        r = await ctx.request_context.session.create_message(**params)
    except Exception as e:
        return f"refused: {e}"
    return f"sampled: {r.content.text}"


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "http":
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    elif MODERN:
        server.run()
    else:
        asyncio.run(serve_2025_stdio())
