"""The smallest useful downstream MCP server of the Python SDK: one tool, `echo`, that
returns its `message`. The proxy benchmark (`benches/proxy.rs`) runs nine of them.

Run: python3 echo_server.py  (stdio)
"""
from mcp.server.mcpserver import MCPServer

server = MCPServer("echo")


@server.tool(description="Returns `message`")
async def echo(message: str) -> str:
    return message


if __name__ == "__main__":
    server.run()
