"""An MCP server started with secrets on its command line and in its environment, as real ones
are: without ``--api-key`` and ``API_TOKEN`` it exits at once, so a test can make it fail."""

from __future__ import annotations

import os
import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("keyed")


@server.tool()
def echo(text: str) -> str:
    """Answer with the text."""
    return text


if __name__ == "__main__":
    if "--api-key" not in sys.argv or "API_TOKEN" not in os.environ:
        sys.exit("keyed: no key given")
    server.run()
