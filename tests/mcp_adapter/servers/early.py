"""A low-level server that asks its client a question while listing its tools, outside any tool
call, and names its one tool after the answer or the error it got, over stdio."""

from __future__ import annotations

from typing import Any

import anyio
from mcp import types
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    try:
        await ctx.session.elicit_form("which tools?", {"type": "object", "properties": {}})
        said = "answered"
    except MCPError as exc:
        said = str(exc)
    tool = types.Tool(name="early", description=said, input_schema={"type": "object"})
    return types.ListToolsResult(tools=[tool])


async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text="ok")])


server: Server[None] = Server("early", on_list_tools=list_tools, on_call_tool=call_tool)


async def main() -> None:
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


if __name__ == "__main__":
    anyio.run(main)
