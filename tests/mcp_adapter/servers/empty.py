"""An MCP server with no tools at all, over stdio."""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer

server = MCPServer("empty")

if __name__ == "__main__":
    server.run()
