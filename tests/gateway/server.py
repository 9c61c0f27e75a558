"""A small MCP server for the gateway's tests (stdio).

Its pid, a parrot, the ``_meta`` a call came with, and a tool that adds tools.
"""

from __future__ import annotations

import os
from typing import Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

from tests.mcp_adapter.servers.growing import add_grow_tool

server = MCPServer("probe")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def pid() -> int:
    """The server's process id, so a test can tell whether it still runs."""
    return os.getpid()


@server.tool()
def say(text: str) -> str:
    """Answer with the text."""
    return text


@server.tool()
def seen(ctx: Context) -> dict[str, Any]:
    """The agent-reach keys of this request's _meta: what the calling router passed along."""
    meta = ctx.request_context.meta or {}
    return {key: value for key, value in meta.items() if key.startswith("agent-reach/")}


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def environment(name: str) -> str | None:
    """The value of one of the server's environment variables, or None."""
    return os.environ.get(name)


add_grow_tool(server)


if __name__ == "__main__":
    server.run()
