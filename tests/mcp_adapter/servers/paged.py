"""An in-process low-level server whose tool list spans pages and holds tools the router rejects."""

from __future__ import annotations

from typing import Any

from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
)

PAGE = 3
GOOD = [f"tool_{i}" for i in range(7)]
INVALID_SCHEMA = "broken_schema"
INVALID_NAME = "has spaces"


def _tools() -> list[Tool]:
    tools = [Tool(name=name, description=f"{name} tool", input_schema={"type": "object"}) for name in GOOD]
    tools.insert(
        2, Tool(name=INVALID_SCHEMA, input_schema={"type": "object", "properties": {"x": {"type": 7}}})
    )
    tools.insert(5, Tool(name=INVALID_NAME, input_schema={"type": "object"}))
    return tools


def paged_server(*, endless: bool = False) -> Server[Any]:
    """`endless`: the last page points back to the first, a paginator that never ends."""
    tools = _tools()

    async def list_tools(
        ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        start = int(params.cursor) if params is not None and params.cursor else 0
        end = start + PAGE
        cursor = str(end) if end < len(tools) else ("0" if endless else None)
        return ListToolsResult(tools=tools[start:end], next_cursor=cursor)

    async def call_tool(ctx: ServerRequestContext[Any], params: CallToolRequestParams) -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text=params.name)])

    return Server("paged", on_list_tools=list_tools, on_call_tool=call_tool)
