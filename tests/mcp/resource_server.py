"""A downstream MCP server of the Python SDK whose resources change: `note://a` and
`note://b` hold text, and its `write` tool changes one and announces it — on the
`subscriptions/listen` streams that name it (2026-07-28; the SDK's own filtering) — so
the gateway's `resource_updated` event and resource subscriptions can be tested.

Run: python3 resource_server.py  (stdio)
"""
from mcp.server.mcpserver import Context, MCPServer

server = MCPServer("notes")
notes = {"note://a": "first", "note://b": "second"}


@server.resource("note://a", description="Note A")
def note_a() -> str:
    return notes["note://a"]


@server.resource("note://b", description="Note B")
def note_b() -> str:
    return notes["note://b"]


@server.tool(description="Writes `text` into the note `uri` and announces the change")
async def write(uri: str, text: str, ctx: Context) -> str:
    notes[uri] = text
    await ctx.notify_resource_updated(uri)
    return "written"


if __name__ == "__main__":
    server.run()
