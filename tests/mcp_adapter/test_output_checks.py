"""A result is checked against the tool's output schema once, by the router's compiled validator;
the SDK's second pass is left out (`checked_by_router`) but not its one check the router's cannot
make: structured content missing where the tool declares an output schema."""

from __future__ import annotations

from typing import Any

import pytest
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

from middleware import Fault, ResultStatus
from reach_adapters import Router
from reach_adapters.mcp import MCPServerAgent

pytestmark = pytest.mark.timeout(60)

VALUE = {"type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]}
# The SDK's wrapping of a function returning an int (``def count() -> int``).
WRAPPED = {
    "type": "object",
    "title": "countOutput",
    "properties": {"result": {"type": "integer"}},
    "required": ["result"],
}
RESULTS: dict[str, dict[str, Any] | None] = {
    "right": {"value": "v"},
    "wrong": {"value": 5},
    "missing": None,
    "count": {"result": "many"},
}


def _server() -> Server[Any]:
    tools = [
        Tool(name=name, input_schema={"type": "object"}, output_schema=WRAPPED if name == "count" else VALUE)
        for name in RESULTS
    ]

    async def list_tools(
        ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(tools=tools)

    async def call_tool(ctx: ServerRequestContext[Any], params: CallToolRequestParams) -> CallToolResult:
        structured = RESULTS[params.name]
        return CallToolResult(content=[TextContent(type="text", text="5")], structured_content=structured)

    return Server("checks", on_list_tools=list_tools, on_call_tool=call_tool)


@pytest.fixture
async def checks(router: Router) -> MCPServerAgent:
    agent = await MCPServerAgent.connect("checks", server=_server())
    router.register(agent)
    return agent


@pytest.mark.parametrize("probed", [False, True])
async def test_a_result_that_breaks_the_output_schema_is_the_agents_fault(
    checks: MCPServerAgent, router: Router, probed: bool
) -> None:
    if probed:
        # A health probe lists the tools again: the SDK still leaves the check to the router.
        assert await checks.probe()
    assert (await router.route("right", {})).payload == {"value": "v"}
    for tool, problem in (("wrong", "5 is not of type"), ("count", '"many" is not of type')):
        result = await router.route(tool, {})
        assert result.status is ResultStatus.ERROR
        assert result.error_type == "OutputValidationError"
        assert (result.fault, result.retryable) == (Fault.AGENT, True)
        # The router's own wording: the SDK did not check it first.
        assert result.error is not None
        assert f"output of {tool!r} does not match its output schema" in result.error
        assert problem in result.error


async def test_no_structured_content_from_a_tool_with_an_output_schema_fails(
    checks: MCPServerAgent, router: Router
) -> None:
    result = await router.route("missing", {})
    assert result.status is ResultStatus.ERROR
    assert result.error_type == "OutputValidationError"
    assert (result.fault, result.retryable) == (Fault.AGENT, True)
    assert result.error == (
        f"MCP server {checks.agent_id}: tool 'missing' has an output schema but returned "
        "no structured content"
    )
