"""A downstream MCP server built on the Python SDK's `MCPServer`, for what the reference
servers cannot do on demand: its tool list grows when asked (and it says so with
`notifications/tools/list_changed`), it reports its pid, it crashes, and it runs slowly
with progress.

Run: python3 growing_server.py  (stdio), python3 growing_server.py --http PORT
(streamable HTTP on 127.0.0.1:PORT/mcp; then `authorization` tells the header it got), or
python3 growing_server.py --sse PORT (the HTTP+SSE transport, stream at /sse).
"""
import os
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("growing")


async def announce(ctx: Context) -> None:
    """Announces a changed tool list to clients of every revision: on their
    `subscriptions/listen` streams (2026-07-28) and as a session notification (earlier)."""
    await ctx.notify_tools_changed()
    await ctx.request_context.session.send_tool_list_changed()


@server.tool(description="Adds a tool called `name` and announces the new tool list")
async def grow(name: str, ctx: Context) -> str:
    def added() -> str:
        return f"I am {name}"

    server.add_tool(added, name=name, description=f"Added at run time: {name}")
    await announce(ctx)
    return f"added {name}"


@server.tool(description="Announces a changed tool list `n` times in a row")
async def storm(n: int, ctx: Context) -> str:
    for _ in range(n):
        await announce(ctx)
    return "stormed"


@server.tool(description="This server's process id")
async def pid() -> int:
    return os.getpid()


@server.tool(description="Exits the server at once")
async def crash() -> str:
    os._exit(3)


@server.tool(description="Sleeps `seconds`, reporting progress each tenth; writes `marker` when cancelled")
async def slow(seconds: float, ctx: Context, marker: str = "") -> str:
    try:
        for i in range(10):
            await ctx.report_progress(i + 1, 10, f"tenth {i + 1}")
            await anyio.sleep(seconds / 10)
    except anyio.get_cancelled_exc_class():
        if marker:
            with open(marker, "w") as f:
                f.write("cancelled")
        raise
    return "slept"


@server.tool(description="The Authorization header of this request (HTTP only)")
async def authorization(ctx: Context) -> str:
    request = ctx.request_context.request
    return request.headers.get("authorization", "") if request is not None else ""


if __name__ == "__main__":
    if sys.argv[1:2] == ["--http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    elif sys.argv[1:2] == ["--sse"]:
        server.run("sse", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
