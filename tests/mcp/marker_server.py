"""A downstream MCP server that leaves a mark when it starts (a line in the file named by
its first argument), so that the consent tests can prove nothing started it before the
user said yes.

Run: python3 marker_server.py MARKER_FILE  (stdio)
"""
import sys

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

with open(sys.argv[1], "a") as marker:
    marker.write("started\n")

server = MCPServer("marker")


@server.tool(description="Says hello to `name`", annotations=ToolAnnotations(readOnlyHint=True))
async def hello(name: str) -> str:
    return f"hello {name}"


@server.tool(description="The value of environment variable `name` in this server")
async def env(name: str) -> str:
    import os
    return os.environ.get(name, "")


if __name__ == "__main__":
    server.run()
