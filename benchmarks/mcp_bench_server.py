"""The MCP server every MCP benchmark calls: one small structured tool.

Run over stdio: ``python benchmarks/mcp_bench_server.py``; imported for the in-process cases.
"""

from __future__ import annotations

from mcp.server.mcpserver import MCPServer
from mcp.types import ToolAnnotations

server = MCPServer("bench", log_level="WARNING")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


if __name__ == "__main__":
    server.run()
