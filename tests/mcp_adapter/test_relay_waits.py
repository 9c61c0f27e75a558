"""Time an upstream spends waiting on the answer of the MCP client whose call the router relays is
that client's (DESIGN §6): a caller that never answers, answers too late or leaves must not time
out, or quarantine, a healthy server; and a caller's question still open when its call ends is
withdrawn, as it would be directly."""

from __future__ import annotations

import asyncio
import sys

import pytest
from mcp import Client
from mcp.client.context import ClientRequestContext
from mcp.types import ElicitRequestParams, ElicitResult, InputRequiredResult, TextContent

from reach_adapters import Router
from reach_adapters.mcp import MCPEndpoint, MCPOptions, MCPServerAgent, start_mcp_server
from tests.mcp_adapter.servers import chatty
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(60)

# Short, so that the tests wait little for the deadline they let pass.
TIMEOUT_MS = 500


class SlowCaller:
    """A caller whose elicitation is answered by nobody: it waits until withdrawn."""

    def __init__(self) -> None:
        self.asked = 0
        self.withdrawn = 0

    async def on_elicit(self, context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        self.asked += 1
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            self.withdrawn += 1
            raise
        raise AssertionError("never answered")


async def serve(router: Router, transport: str, timeout_ms: int) -> MCPEndpoint:
    """The router served over MCP, before a 2025-11-25 session to the chatty server."""
    options = MCPOptions(protocol="2025-11-25", timeout_ms=timeout_ms)
    if transport == "stdio":
        args = ["-m", "tests.mcp_adapter.servers.chatty"]
        agent = await MCPServerAgent.connect("chatty", command=sys.executable, args=args, options=options)
    else:
        agent = await MCPServerAgent.connect("chatty", chatty.server, options=options)
    router.register(agent)
    return await start_mcp_server(router, port=0)


def ended(router: Router, count: int) -> bool:
    records = router.recent_decisions(count)
    return len(records) == count and all(record.status != "pending" for record in records)


def assert_the_callers_timeouts(router: Router, count: int) -> None:
    records = router.recent_decisions(count)
    assert len(records) == count
    for record in records:
        assert record.status == "timeout"
        # One attempt: a caller's fault is not tried elsewhere.
        [attempt] = record.attempts
        assert attempt.fault == "caller", attempt.error
        assert "asked its caller for input" in (attempt.error or "")
    assert all(info.breaker == "closed" and info.failures == 0 for info in router.catalog())


@pytest.mark.parametrize(
    ("protocol", "tool"),
    # A resolver asking with an input-required result, and a tool asking the 2025 way, which the
    # router turns into one for a 2026 caller.
    [("auto", "greet"), ("2025-11-25", "ask_mid_call")],
)
async def test_a_2026_caller_that_never_comes_back_is_to_blame_for_the_timeout(
    router: Router, protocol: str, tool: str
) -> None:
    options = MCPOptions(protocol=protocol, timeout_ms=TIMEOUT_MS)
    router.register(await MCPServerAgent.connect("chatty", chatty.server, options=options))
    async with await start_mcp_server(router, port=0) as endpoint:
        for _ in range(3):
            async with Client(
                endpoint.url, mode="auto", elicitation_callback=SlowCaller().on_elicit
            ) as client:
                asked = await client.session.call_tool(tool, {}, allow_input_required=True)
            assert isinstance(asked, InputRequiredResult)
            # The client is gone without an answer.
        await eventually(lambda: ended(router, 3), what="the three calls to end")
    assert_the_callers_timeouts(router, 3)


@pytest.mark.parametrize("transport", ["in-process", "stdio"])
async def test_a_2025_caller_that_answers_too_late_is_to_blame_and_its_question_withdrawn(
    router: Router, transport: str
) -> None:
    caller = SlowCaller()
    gateway = await serve(router, transport, TIMEOUT_MS)
    async with gateway, Client(gateway.url, mode="legacy", elicitation_callback=caller.on_elicit) as client:
        for _ in range(3):
            answer = await client.call_tool("ask_mid_call", {})
            assert answer.is_error
            assert answer.meta is not None
            assert answer.meta["agent-reach/fault"] == "caller"
            text = "".join(block.text for block in answer.content if isinstance(block, TextContent))
            assert "asked its caller for input" in text
        await eventually(lambda: caller.withdrawn == 3, what="the questions to be withdrawn")
    assert caller.asked == 3
    assert_the_callers_timeouts(router, 3)


@pytest.mark.parametrize("transport", ["in-process", "stdio"])
async def test_cancelling_a_call_withdraws_the_question_its_upstream_put_to_the_caller(
    router: Router, transport: str
) -> None:
    caller = SlowCaller()
    # The default timeout: the call is cancelled long before it.
    gateway = await serve(router, transport, 30_000)
    async with gateway, Client(gateway.url, mode="legacy", elicitation_callback=caller.on_elicit) as client:
        call = asyncio.create_task(client.call_tool("ask_mid_call", {}))
        await eventually(lambda: caller.asked == 1, what="the caller to be asked")
        call.cancel()
        await asyncio.gather(call, return_exceptions=True)
        # Directly, the server's cancelled tool withdraws its question: through the router too.
        await eventually(lambda: caller.withdrawn == 1, what="the question to be withdrawn")
    assert all(info.breaker == "closed" and info.failures == 0 for info in router.catalog())


@pytest.mark.parametrize("transport", ["in-process", "stdio"])
async def test_a_question_the_upstream_withdraws_is_withdrawn_at_the_caller(
    router: Router, transport: str
) -> None:
    caller = SlowCaller()
    gateway = await serve(router, transport, 30_000)
    async with gateway, Client(gateway.url, mode="legacy", elicitation_callback=caller.on_elicit) as client:
        answer = await client.call_tool("ask_then_give_up", {})
        assert answer.structured_content == {"result": "gave up"}
        await eventually(lambda: caller.withdrawn == 1, what="the question to be withdrawn")
    assert caller.asked == 1
