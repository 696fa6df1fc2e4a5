"""A downstream MCP server that answers with the `_meta` of the `tools/call` it received,
so that the telemetry tests can see the W3C trace context the gateway passed on.

Run: python3 meta_server.py  (stdio)
"""
import json

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("meta")


@server.tool(description="Returns this request's `_meta` as JSON")
async def meta(ctx: Context, note: str = "") -> str:
    m = ctx.request_context.meta
    if m is None:
        return "{}"
    if hasattr(m, "model_dump"):
        m = m.model_dump(by_alias=True, exclude_none=True)
    return json.dumps(dict(m))


if __name__ == "__main__":
    server.run()
