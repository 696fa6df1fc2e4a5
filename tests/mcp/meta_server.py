"""A downstream MCP server that answers with the `_meta` of the `tools/call` it received,
so that the telemetry tests can see the W3C trace context the gateway passed on.

Run: python3 meta_server.py  (stdio), or python3 meta_server.py http PORT (Streamable HTTP
on 127.0.0.1, where the answer also carries the request's trace headers).
"""
import json
import sys

from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("meta")


@server.tool(description="Returns this request's `_meta` as JSON")
async def meta(ctx: Context, note: str = "") -> str:
    m = ctx.request_context.meta
    if m is None:
        m = {}
    if hasattr(m, "model_dump"):
        m = m.model_dump(by_alias=True, exclude_none=True)
    out = dict(m)
    for k, v in (ctx.headers or {}).items():
        if k.lower() in ("traceparent", "tracestate"):
            out[f"header:{k.lower()}"] = v
    return json.dumps(out)


if __name__ == "__main__":
    if sys.argv[1:2] == ["http"]:
        server.run(transport="streamable-http", host="127.0.0.1", port=int(sys.argv[2]))
    else:
        server.run()
