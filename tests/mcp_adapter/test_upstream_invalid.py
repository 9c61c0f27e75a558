"""An upstream's own refusal of the arguments, said the MCP SDK 1.x way, is the caller's mistake.

MCP SDK 1.x servers (Python and TypeScript) check a tool's arguments themselves and report what
they refuse not as a JSON-RPC error but as a tool result with ``isError: true`` whose text starts
``MCP error -32602:`` ("Input validation error: ... Invalid URL"): arguments the router's schema
check passed (a string that is no URL) but the server's own validation does not. The server
here is an SDK 2.x in-process low-level server whose tool returns exactly that content, as a
1.x server would; the real one, `@modelcontextprotocol/server-everything`, would need npm.
"""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.types import (
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
    ToolAnnotations,
)

from middleware import Fault, ResultStatus
from reach_adapters import BreakerState, Router, RoutingPolicy
from reach_adapters.mcp import META_PREFIX, MCPOptions, MCPServerAgent, RouterMCPServer

pytestmark = pytest.mark.timeout(60)

REFUSAL = (
    "MCP error -32602: Input validation error: Invalid arguments for tool fetch: [\n"
    '  {\n    "code": "invalid_format",\n    "format": "url",\n    "path": ["url"],\n'
    '    "message": "Invalid URL"\n  }\n]'
)
FETCH = Tool(
    name="fetch",
    description="Fetch a URL.",
    input_schema={"type": "object", "properties": {"url": {"type": "string"}}, "required": ["url"]},
    annotations=ToolAnnotations(read_only_hint=True),
)


def sdk1_like(calls: list[str]) -> Server[Any]:
    """A server that refuses every URL as a 1.x server refuses a bad one, and fails `boom` as a
    tool that ran and failed does."""

    async def list_tools(
        ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(tools=[FETCH, Tool(name="boom", input_schema={"type": "object"})])

    async def call_tool(ctx: ServerRequestContext[Any], params: CallToolRequestParams) -> CallToolResult:
        calls.append(params.name)
        said = REFUSAL if params.name == "fetch" else "MCP error -32603: the disk is full"
        return CallToolResult(content=[TextContent(type="text", text=said)], is_error=True)

    return Server("sdk1-like", on_list_tools=list_tools, on_call_tool=call_tool)


async def test_an_upstreams_invalid_params_tool_error_is_the_callers() -> None:
    calls: list[str] = []
    policy = RoutingPolicy(breaker={"min_calls": 2, "consecutive_failures": 2})
    async with Router(policy) as router:
        for instance in ("a", "b"):
            # Two replicas of a tool safe to repeat: an agent's failure would be retried on the other.
            server = sdk1_like(calls)
            router.register(
                await MCPServerAgent.connect("web", server, options=MCPOptions(instance=instance))
            )
        for _ in range(4):
            result = await router.route("fetch", {"url": "http://"})
            assert (result.status, result.fault, result.error_type) == (
                ResultStatus.INVALID,
                Fault.CALLER,
                "InvalidMessageError",
            )
            assert (result.delivered, result.retryable, result.attempts) == (True, False, 1)
            assert result.error == REFUSAL
            # Kept as every tool error's: the blocks it sent, for serving it again unchanged.
            assert result.extra["content"] == [{"type": "text", "text": REFUSAL}]
        assert calls == ["fetch"] * 4
        for info in router.catalog():
            assert (info.breaker, info.failures) == (BreakerState.CLOSED, 0)
        # Another MCP error said in a tool error is the task's, as any tool error is.
        failed = await router.route("boom", {})
        assert (failed.status, failed.fault, failed.error_type) == (
            ResultStatus.ERROR,
            Fault.TASK,
            "MCPToolError",
        )


async def test_served_on_it_keeps_its_text_and_tells_a_reach_router_whose_fault(router: Router) -> None:
    router.register(await MCPServerAgent.connect("web", sdk1_like([])))
    reach = RouterMCPServer(router)
    try:
        async with Client(reach.server) as client:
            answer = await client.call_tool("fetch", {"url": "http://"})
    finally:
        reach.close()
    assert answer.is_error
    assert answer.content == [TextContent(type="text", text=REFUSAL)]
    assert answer.meta is not None
    assert (answer.meta[META_PREFIX + "status"], answer.meta[META_PREFIX + "fault"]) == ("invalid", "caller")
