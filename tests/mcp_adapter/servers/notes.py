"""An MCP server over streamable HTTP with no change stream (``subscriptions/listen``), as many
servers have none: only a request finds it gone. Prints the port it listens on as its first line
of stdout; ``--port`` reuses a port."""

from __future__ import annotations

import argparse
import asyncio

from mcp.server.mcpserver import MCPServer

from tests.mcp_adapter.servers.listen import serve_http

server = MCPServer("notes", subscriptions=False)


@server.tool()
def append_note(text: str) -> int:
    """Append a note: not idempotent, every call adds one."""
    return len(text)


@server.tool()
async def slow(seconds: float) -> str:
    await asyncio.sleep(seconds)
    return "done"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--http", action="store_true")  # HTTP only; taken as the calc server takes it
    parser.add_argument("--port", type=int, default=0)
    options = parser.parse_args()
    serve_http(server.streamable_http_app(), options.port)


if __name__ == "__main__":
    main()
