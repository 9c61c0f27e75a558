"""A replica whose server dropped a tool without a ``tools/list_changed`` hands a call to that tool
to one that still has it: the tool did not run, the request was fine, and the server is healthy.
The agent lists the server's tools again, and so does its health probe, so it stops declaring it.

Servers answer such a call in their SDK's words: the Python SDK's `MCPServer` after a real
`remove_tool` (an ``isError`` "Unknown tool: x"), and, from in-process low-level servers, the
spec's JSON-RPC -32602 "Unknown tool: x", the TypeScript SDK's -32602 "Tool x not found" and its
1.x `McpServer`'s ``isError`` "MCP error -32602: Tool x not found".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    ListToolsResult,
    PaginatedRequestParams,
    TextContent,
    Tool,
)

from middleware import Fault, ReachMessage, ResultStatus
from reach_adapters import BreakerState, Router
from reach_adapters.mcp import MCPOptions, MCPServerAgent
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(60)

CHARGE = Tool(
    name="charge",
    description="Charge a card: not safe to repeat.",
    input_schema={"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]},
)

# How a low-level server answers a call to a tool it does not have: a JSON-RPC error's message,
# or an `isError` result's text.
Answer = tuple[str, str]
SPEC: Answer = ("error", "Unknown tool: charge")
TYPESCRIPT: Answer = ("error", "Tool charge not found")
TYPESCRIPT_1X: Answer = ("result", "MCP error -32602: Tool charge not found")


def low_level(runs: list[str], instance: str, answer: Answer) -> tuple[Server[Any], Callable[[], None]]:
    """A server with `charge`, and what drops it (silently); called without it, it answers `answer`."""
    tools = {"charge": CHARGE}

    async def list_tools(
        ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(tools=list(tools.values()))

    async def call_tool(ctx: ServerRequestContext[Any], params: CallToolRequestParams) -> CallToolResult:
        if params.name not in tools:
            kind, said = answer
            if kind == "error":
                raise MCPError(code=INVALID_PARAMS, message=said)
            return CallToolResult(content=[TextContent(type="text", text=said)], is_error=True)
        runs.append(instance)
        return CallToolResult(content=[TextContent(type="text", text="charged")])

    return Server("svc", on_list_tools=list_tools, on_call_tool=call_tool), lambda: tools.clear()


def sdk_server(runs: list[str], instance: str) -> tuple[MCPServer, Callable[[], None]]:
    server = MCPServer("svc")

    @server.tool()
    def charge(amount: int) -> str:
        """Charge a card: not safe to repeat."""
        runs.append(instance)
        return "charged"

    return server, lambda: server.remove_tool("charge")


def replica(style: str, runs: list[str], instance: str) -> tuple[Any, Callable[[], None]]:
    if style == "sdk":
        return sdk_server(runs, instance)
    answers = {"spec": SPEC, "typescript": TYPESCRIPT, "typescript_1x": TYPESCRIPT_1X}
    return low_level(runs, instance, answers[style])


STYLES = ["sdk", "spec", "typescript", "typescript_1x"]


def declares(agent: MCPServerAgent, name: str) -> bool:
    return name in [capability.name for capability in agent.capabilities]


@pytest.mark.parametrize("style", STYLES)
async def test_a_replica_without_the_tool_hands_the_call_to_one_with_it(style: str, router: Router) -> None:
    runs: list[str] = []
    agents = []
    drops = []
    for instance, weight in (("a", 100.0), ("b", 1.0)):
        server, drop = replica(style, runs, instance)
        options = MCPOptions(instance=instance, weight=weight)
        agents.append(await MCPServerAgent.connect("svc", server, options=options))
        drops.append(drop)
        router.register(agents[-1])
    drops[0]()
    result = await router.route("charge", {"amount": 5})
    assert (result.ok, result.agent_id, result.attempts) == (True, "mcp:svc:b", 2), result.error
    assert runs == ["b"]
    gone = router.explain(result.task_id or "").attempts[0]
    assert (gone.agent_id, gone.status, gone.fault, gone.delivered) == (
        "mcp:svc:a",
        ResultStatus.ERROR,
        Fault.ROUTER,
        False,
    )
    assert gone.error_type == "MCPToolGoneError"
    assert "MCP server mcp:svc:a no longer has tool 'charge'" in (gone.error or "")
    # Re-listed, a no longer declares it, and its breaker never heard of it.
    await eventually(lambda: not declares(agents[0], "charge"), timeout=10, what="a dropping charge")
    info = next(info for info in router.catalog() if info.agent_id == "mcp:svc:a")
    assert (info.breaker, info.failures) == (BreakerState.CLOSED, 0)
    again = await router.route("charge", {"amount": 6})
    assert (again.ok, again.agent_id, again.attempts) == (True, "mcp:svc:b", 1)


async def test_with_no_replica_left_it_is_the_routers_failure_not_the_callers(router: Router) -> None:
    server, drop = sdk_server([], "a")
    agent = await MCPServerAgent.connect("svc", server)
    router.register(agent)
    drop()
    result = await router.route("charge", {"amount": 5})
    assert (result.status, result.fault, result.delivered) == (ResultStatus.ERROR, Fault.ROUTER, False)
    assert result.error_type == "MCPToolGoneError"
    info = router.catalog()[0]
    assert (info.breaker, info.failures) == (BreakerState.CLOSED, 0)
    await eventually(lambda: not declares(agent, "charge"), timeout=10, what="charge dropped")
    after = await router.route("charge", {"amount": 5})
    assert after.status is ResultStatus.NO_CANDIDATE


@pytest.mark.parametrize(
    ("answer", "status", "fault"),
    [
        (("error", "Unknown tool: refund"), ResultStatus.INVALID, Fault.CALLER),
        (("error", "amount must be even"), ResultStatus.INVALID, Fault.CALLER),
        (("result", "Unknown tool: refund"), ResultStatus.ERROR, Fault.TASK),
        (("result", "Unknown tool: charge (did you mean refund?)"), ResultStatus.ERROR, Fault.TASK),
    ],
)
async def test_only_the_words_for_the_tool_called_say_it_is_gone(
    answer: Answer, status: ResultStatus, fault: Fault, router: Router
) -> None:
    """An argument refusal, or a tool's error, that is not the server's word for the tool called
    stays what it was."""
    server, drop = low_level([], "a", answer)
    agent = await MCPServerAgent.connect("svc", server)
    router.register(agent)
    drop()
    result = await router.route("charge", {"amount": 5})
    assert (result.status, result.fault, result.attempts) == (status, fault, 1)
    assert declares(agent, "charge")


async def test_the_health_probe_declares_tools_changed_without_notice(router: Router) -> None:
    server, drop = sdk_server([], "a")
    agent = await MCPServerAgent.connect("svc", server)
    router.register(agent)
    drop()
    assert await agent.probe()
    await eventually(lambda: not declares(agent, "charge"), timeout=10, what="charge dropped")
    # A call routed before that is handed on as well, not refused as the caller's mistake.
    routed = ReachMessage.model_validate(
        {"raw_payload": {"amount": 5}, "meta_info": {"capability": "charge"}}
    )
    late = await agent.invoke(routed)
    assert (late.fault, late.error_type, late.delivered) == (Fault.ROUTER, "MCPToolGoneError", False)

    def refund(amount: int) -> str:
        return "refunded"

    server.add_tool(refund)
    assert await agent.probe()
    await eventually(lambda: declares(agent, "refund"), timeout=10, what="refund declared")
    assert (await router.route("refund", {"amount": 5})).payload == "refunded"
