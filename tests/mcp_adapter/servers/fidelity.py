"""An in-process low-level server whose tools carry every piece of MCP metadata, and whose
results carry `_meta` and several content blocks, for checking what survives re-serving."""

from __future__ import annotations

from typing import Any

from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    Icon,
    ImageContent,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
    ToolAnnotations,
    ToolExecution,
)

PIXEL = "iVBORw0KGgo="
ICON = Icon(src="https://example.com/lookup.png", mime_type="image/png", sizes=["48x48"])
OBJECT = {"type": "object", "properties": {"key": {"type": "string"}}, "required": ["key"]}
DECLINED = {"code": 402}
RESULT_META = {"example.com/cost": 3, "io.modelcontextprotocol/related-task": {"taskId": "t1"}}


def fidelity_server(*, read_only: bool = True, open_world: bool = False) -> Server[Any]:
    """`read_only` and `open_world` set the hints of `lookup`, so two copies can disagree."""
    tools = [
        Tool(
            name="lookup",
            title="Look up a key",
            description="Find the value stored under a key.",
            input_schema=OBJECT,
            output_schema={"type": "object", "properties": {"value": {"type": "string"}}},
            annotations=ToolAnnotations(
                title="Lookup",
                read_only_hint=read_only,
                destructive_hint=False,
                idempotent_hint=True,
                open_world_hint=open_world,
            ),
            icons=[ICON],
            execution=ToolExecution(task_support="optional"),
            _meta={"example.com/owner": "team-a"},
        ),
        Tool(name="broken", description="Always fails, with a picture.", input_schema={"type": "object"}),
        Tool(
            name="charge",
            description="Always declined, with the reason as structured content.",
            input_schema={"type": "object"},
            output_schema={"type": "object", "properties": {"code": {"type": "integer"}}},
        ),
        Tool(
            name="long_job",
            description="Runs only as an MCP task.",
            input_schema={"type": "object"},
            execution=ToolExecution(task_support="required"),
        ),
    ]

    async def list_tools(
        ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(tools=tools)

    async def call_tool(ctx: ServerRequestContext[Any], params: CallToolRequestParams) -> CallToolResult:
        if params.name == "lookup":
            key = (params.arguments or {}).get("key", "")
            return CallToolResult(
                content=[TextContent(type="text", text=f"value of {key}")],
                structured_content={"value": f"value of {key}"},
                _meta=RESULT_META,
            )
        if params.name == "charge":
            # With "quiet", the reason is in the structured content alone (no content blocks).
            quiet = (params.arguments or {}).get("quiet")
            return CallToolResult(
                content=[] if quiet else [TextContent(type="text", text="card declined")],
                structured_content=DECLINED,
                is_error=True,
            )
        return CallToolResult(
            content=[
                TextContent(type="text", text="the disk is full"),
                ImageContent(type="image", data=PIXEL, mime_type="image/png"),
            ],
            is_error=True,
            _meta={"example.com/incident": "INC-7"},
        )

    return Server("fidelity", on_list_tools=list_tools, on_call_tool=call_tool)
