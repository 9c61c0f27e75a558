"""A tool that adds tools at run time, for the test servers that exercise tools/list_changed."""

from __future__ import annotations

from mcp.server.mcpserver import Context, MCPServer
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

__all__ = ["add_grow_tool"]


def add_grow_tool(server: MCPServer) -> None:
    """Give `server` a ``grow(name)`` tool that adds a tool called `name` and announces it."""

    @server.tool()
    async def grow(name: str, ctx: Context) -> str:
        """Add a tool called `name` and tell the client the tool list changed."""

        def extra() -> str:
            return name

        server.add_tool(extra, name=name, description=f"added at run time: {name}")
        session = ctx.request_context.session
        if session.protocol_version in MODERN_PROTOCOL_VERSIONS:
            await ctx.notify_tools_changed()
        else:
            await session.send_tool_list_changed()
        return name
