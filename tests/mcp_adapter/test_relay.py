"""An MCP client calling through `reach serve` hears what the upstream serving its call says:
progress, log messages, elicitation and sampling requests, and its cancellation reaches the
upstream (issue 12, item 3)."""

from __future__ import annotations

import asyncio
import logging
import sys
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
from mcp import Client, StdioServerParameters, types
from mcp.client.context import ClientRequestContext
from mcp.server import Server
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_REQUEST,
    CreateMessageRequestParams,
    CreateMessageResult,
    ElicitRequestParams,
    ElicitResult,
    ErrorData,
    LoggingMessageNotificationParams,
    RequestParamsMeta,
    TextContent,
)

from middleware import Fault, ResultStatus
from reach_adapters import FunctionAgent, Router
from reach_adapters.mcp import MCPEndpoint, MCPOptions, MCPServerAgent, start_mcp_server
from tests.mcp_adapter.conftest import SERVERS
from tests.mcp_adapter.servers import chatty
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(60)


class Caller:
    """What a calling client heard, and how it answers the upstream's questions."""

    def __init__(self) -> None:
        self.logs: list[Any] = []
        self.progress: list[tuple[float, float | None, str | None]] = []
        self.asked: list[str] = []

    async def on_log(self, params: LoggingMessageNotificationParams) -> None:
        self.logs.append(params.data)

    async def on_progress(self, progress: float, total: float | None, message: str | None) -> None:
        self.progress.append((progress, total, message))

    async def on_elicit(self, ctx: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult:
        self.asked.append(params.message)
        return ElicitResult(action="accept", content={"name": "Ada"})

    async def on_sample(
        self, ctx: ClientRequestContext, params: CreateMessageRequestParams
    ) -> CreateMessageResult:
        content = params.messages[0].content
        self.asked.append(content.text if isinstance(content, TextContent) else "?")
        return CreateMessageResult(
            role="assistant", content=TextContent(type="text", text="short"), model="m"
        )

    def client(self, url: str, mode: str, *, answers: bool = True) -> Client:
        options: dict[str, Any] = {"logging_callback": self.on_log, "log_level": "debug"}
        if answers:
            options |= {"elicitation_callback": self.on_elicit, "sampling_callback": self.on_sample}
        return Client(url, mode=mode, **options)


@pytest.fixture(params=["in-process", "stdio"])
async def gateway(request: pytest.FixtureRequest, router: Router) -> AsyncIterator[MCPEndpoint]:
    if request.param == "stdio":
        agent = await MCPServerAgent.connect(
            "chatty", command=sys.executable, args=["-m", "tests.mcp_adapter.servers.chatty"]
        )
    else:
        agent = await MCPServerAgent.connect("chatty", server=chatty.server)
    router.register(agent)
    async with await start_mcp_server(router, port=0) as endpoint:
        yield endpoint


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_progress_and_log_messages_reach_the_caller(gateway: MCPEndpoint, mode: str) -> None:
    caller = Caller()
    async with caller.client(gateway.url, mode) as client:
        done = await client.call_tool("steps", {"n": 3}, progress_callback=caller.on_progress)
    assert done.structured_content == {"result": "done"}
    # Against the caller's own progress token, whatever token the upstream hop used.
    assert caller.progress == [(1, 3, "step 1"), (2, 3, "step 2"), (3, 3, "step 3")]
    assert caller.logs == ["step 1 of 3", "step 2 of 3", "step 3 of 3"]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_callers_own_request_meta_reaches_the_upstream(gateway: MCPEndpoint, mode: str) -> None:
    sent = {"example.com/user": "ada", "example.com/trace": {"span": 7}, "agent-reach/forged": True}
    async with Client(gateway.url, mode=mode) as client:
        answer = await client.call_tool("request_meta", {}, meta=cast(RequestParamsMeta, sent))
    seen = answer.structured_content
    assert seen is not None
    assert seen["example.com/user"] == "ada"
    assert seen["example.com/trace"] == {"span": 7}
    # The router's own keys are its own: a caller cannot forge them, and they describe this hop,
    # for another reach router: a plain server like this one gets none (see test_task_meta.py).
    assert not [key for key in seen if key.startswith("agent-reach/")]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_calls_an_agent_makes_for_a_callers_call_do_not_get_its_request_meta(
    gateway: MCPEndpoint, router: Router, mode: str
) -> None:
    async def relay_meta() -> Any:
        """Ask the upstream what request `_meta` it saw, from a call of this agent's own."""
        return (await router.route("request_meta", {})).payload

    router.register(FunctionAgent(relay_meta, agent_id="local:relay:01"))
    sent = {"example.com/user": "ada"}
    async with Client(gateway.url, mode=mode) as client:
        answer = await client.call_tool("relay_meta", {}, meta=cast(RequestParamsMeta, sent))
    seen = answer.structured_content
    assert seen is not None
    assert "example.com/user" not in seen


async def test_log_messages_no_call_can_claim_are_dropped_and_said_once(
    router: Router, caplog: pytest.LogCaptureFixture
) -> None:
    # Over stdio a log message names no call: with two calls in flight nobody may hear it.
    router.register(
        await MCPServerAgent.connect(
            "chatty", command=sys.executable, args=["-m", "tests.mcp_adapter.servers.chatty"]
        )
    )
    caller = Caller()
    async with (
        await start_mcp_server(router, port=0) as endpoint,
        Client(endpoint.url) as waiter,
        caller.client(endpoint.url, "legacy") as client,
    ):
        waiting = asyncio.create_task(waiter.call_tool("wait", {"tag": "in-flight"}))
        await eventually(lambda: any(info.in_flight for info in router.catalog()), what="the call to start")
        with caplog.at_level(logging.WARNING, logger="reach_adapters.mcp"):
            for _ in range(2):
                assert not (await client.call_tool("steps", {"n": 2})).is_error
        waiting.cancel()
    assert caller.logs == []
    assert caplog.text.count("sends log messages that name no call") == 1
    assert "mcp:chatty:0" in caplog.text


async def test_a_caller_that_asks_for_no_logs_hears_none(gateway: MCPEndpoint) -> None:
    caller = Caller()
    async with Client(gateway.url, logging_callback=caller.on_log) as client:
        assert not (await client.call_tool("steps", {"n": 2})).is_error
    assert caller.logs == []


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_elicitation_and_sampling_are_asked_of_the_caller(gateway: MCPEndpoint, mode: str) -> None:
    # 2025 callers are sent the requests during the call; 2026 ones get an input-required
    # result, and the routed call resumes when they call again with the answers.
    caller = Caller()
    async with caller.client(gateway.url, mode) as client:
        greeted = await client.call_tool("greet", {})
        summary = await client.call_tool("summarize", {"text": "a long story"})
    assert greeted.structured_content == {"result": "hello Ada"}
    assert summary.structured_content == {"result": "short"}
    assert caller.asked == ["What is your name?", "Summarize: a long story"]


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_caller_that_cannot_answer_gets_a_clear_refusal(
    gateway: MCPEndpoint, router: Router, mode: str
) -> None:
    caller = Caller()
    async with caller.client(gateway.url, mode, answers=False) as client:
        refused = await client.call_tool("greet", {})
    assert refused.is_error
    text = "".join(block.text for block in refused.content if isinstance(block, TextContent))
    assert "did not declare elicitation" in text
    # Nobody was asked, and the server is not to blame.
    assert caller.asked == []
    assert all(info.breaker == "closed" for info in router.catalog())


async def test_cancelling_a_call_cancels_it_upstream(router: Router) -> None:
    router.register(await MCPServerAgent.connect("chatty", server=chatty.server))
    async with await start_mcp_server(router, port=0) as endpoint, Client(endpoint.url) as client:
        call = asyncio.create_task(client.call_tool("wait", {"tag": "cancel-me"}))
        await eventually(lambda: any(info.in_flight for info in router.catalog()), what="the call to start")
        call.cancel()
        await eventually(lambda: "cancel-me" in chatty.cancelled, what="the upstream call to be cancelled")


async def test_a_call_past_its_timeout_is_cancelled_upstream(router: Router) -> None:
    # The router's deadline alone ends the call: the server is told, as when its caller cancels.
    options = MCPOptions(timeout_ms=300)
    router.register(await MCPServerAgent.connect("chatty", server=chatty.server, options=options))
    result = await router.route("wait", {"tag": "past-its-timeout"})
    assert result.status is ResultStatus.TIMEOUT
    assert result.fault is Fault.AGENT
    await eventually(lambda: "past-its-timeout" in chatty.cancelled, what="the upstream call to be cancelled")


async def test_a_request_state_the_router_never_handed_out_is_refused(gateway: MCPEndpoint) -> None:
    async with Client(gateway.url) as client:
        with pytest.raises(MCPError, match="names no waiting call"):
            await client.call_tool("steps", {"n": 1}, request_state="guessed")


async def test_a_python_callers_question_never_reaches_an_mcp_client(
    gateway: MCPEndpoint, router: Router
) -> None:
    caller = Caller()
    async with caller.client(gateway.url, "legacy") as client:
        waiting = asyncio.create_task(client.call_tool("wait", {"tag": "bystander"}))
        await eventually(lambda: any(info.in_flight for info in router.catalog()), what="the call to start")
        asked = await router.route("greet", {})
        waiting.cancel()
    # Nobody to ask: the Python caller is refused, and the MCP client in flight was never asked.
    assert asked.status == "rejected", asked.error
    assert asked.fault == "caller"
    assert "not made by an MCP client" in (asked.error or "")
    assert caller.asked == []
    assert all(info.breaker == "closed" for info in router.catalog())


async def test_relaying_requests_can_be_turned_off(router: Router) -> None:
    asking = await MCPServerAgent.connect("chatty", chatty.server, options={"instance": "a"})
    quiet = await MCPServerAgent.connect(
        "chatty", chatty.server, options=MCPOptions(instance="b", relay_requests=False)
    )
    router.register(asking)
    router.register(quiet)
    assert (await router.send("mcp:chatty:a", {}, capability="can_ask")).payload is True
    # The server sees a client without elicitation and takes its own way.
    assert (await router.send("mcp:chatty:b", {}, capability="can_ask")).payload is False


async def test_progress_only_goes_up_when_a_call_fans_out(router: Router) -> None:
    router.register(await MCPServerAgent.connect("chatty", server=chatty.server))

    async def twice(n: int) -> str:
        """Run the steps twice over."""
        for _ in range(2):
            assert (await router.route("steps", {"n": n})).ok
        return "twice"

    router.register(FunctionAgent(twice, agent_id="util:twice:0"))
    caller = Caller()
    async with (
        await start_mcp_server(router, port=0) as endpoint,
        caller.client(endpoint.url, "auto") as client,
    ):
        assert not (await client.call_tool("twice", {"n": 2}, progress_callback=caller.on_progress)).is_error
    # The nested calls restart their count; the caller hears it rise once.
    assert [step for step, _, _ in caller.progress] == [1, 2]


async def test_a_caller_that_answers_with_an_error_is_to_blame(gateway: MCPEndpoint, router: Router) -> None:
    # A 2025 caller's error goes back upstream; a 2026 caller's SDK raises it to the caller itself
    # and never calls again.
    async def closed(context: ClientRequestContext, params: ElicitRequestParams) -> ElicitResult | ErrorData:
        return ErrorData(code=INVALID_REQUEST, message="the user closed the dialog")

    async with Client(gateway.url, mode="legacy", elicitation_callback=closed) as client:
        refused = await client.call_tool("greet", {})
    assert refused.is_error
    text = "".join(block.text for block in refused.content if isinstance(block, TextContent))
    assert "the user closed the dialog" in text
    assert refused.meta is not None
    assert refused.meta["agent-reach/fault"] == "caller"
    assert all(info.breaker == "closed" for info in router.catalog())


@pytest.mark.parametrize("transport", ["in-process", "stdio"])
async def test_a_tool_that_asks_mid_call_is_relayed_on_the_2025_protocol_and_told_so_on_2026(
    transport: str,
) -> None:
    """`ctx.elicit` sends a request during the call, which only a 2025-11-25 session carries."""
    for protocol, asked in (("auto", []), ("2025-11-25", ["Your name?"])):
        options = MCPOptions(protocol=protocol)
        if transport == "stdio":
            args = ["-m", "tests.mcp_adapter.servers.chatty"]
            agent = await MCPServerAgent.connect("chatty", command=sys.executable, args=args, options=options)
        else:
            agent = await MCPServerAgent.connect("chatty", server=chatty.server, options=options)
        caller = Caller()
        async with Router() as router:
            router.register(agent)
            endpoint = await start_mcp_server(router, port=0)
            async with endpoint, caller.client(endpoint.url, "legacy") as client:
                answer = await client.call_tool("ask_mid_call", {})
            text = "".join(block.text for block in answer.content if isinstance(block, TextContent))
            assert caller.asked == asked
            if asked:
                assert (answer.is_error, text) == (False, "hello Ada")
            else:
                assert answer.is_error
                assert "MCPOptions(protocol='2025-11-25')" in text
            # Either way the server is not to blame.
            assert all(info.breaker == "closed" and info.failures == 0 for info in router.catalog())


@pytest.mark.parametrize(
    ("protocol", "tool"),
    # A request mid-call the client has no callback for, and a resolver refusing a client that
    # did not declare elicitation ("missing required client capability").
    [("2025-11-25", "ask_mid_call"), ("2025-11-25", "greet"), ("auto", "greet")],
)
async def test_a_question_an_agent_does_not_relay_is_no_failure_of_the_server(
    protocol: str, tool: str
) -> None:
    options = MCPOptions(protocol=protocol, relay_requests=False)
    agent = await MCPServerAgent.connect("chatty", server=chatty.server, options=options)
    async with Router() as router:
        router.register(agent)
        for _ in range(3):
            result = await router.route(tool, {})
            assert (result.status, result.fault) == ("error", "task")
            assert "relay_requests on" in (result.error or "")
        assert all(info.breaker == "closed" and info.failures == 0 for info in router.catalog())


async def test_a_request_the_router_cannot_attribute_is_not_held_against_the_server() -> None:
    # A 2025 server over stdio sends its question on its own stream, naming no call: with two calls
    # in flight the router refuses to guess, which is its own limit, not the server's failure.
    args = ["-m", "tests.mcp_adapter.servers.chatty"]
    options = MCPOptions(protocol="2025-11-25")
    agent = await MCPServerAgent.connect("chatty", command=sys.executable, args=args, options=options)
    async with Router() as router:
        router.register(agent)
        waiting = asyncio.create_task(router.route("wait", {"tag": "beside"}))
        await eventually(lambda: any(info.in_flight for info in router.catalog()), what="the call to start")
        caller = Caller()
        async with (
            await start_mcp_server(router, port=0) as endpoint,
            caller.client(endpoint.url, "legacy") as client,
        ):
            for _ in range(3):
                answer = await client.call_tool("ask_mid_call", {})
                assert answer.is_error
                assert answer.meta is not None
                assert answer.meta["agent-reach/fault"] == "router"
        waiting.cancel()
        assert caller.asked == []
        assert all(info.breaker == "closed" and info.failures == 0 for info in router.catalog())


async def test_a_tool_error_carrying_the_routers_refusal_is_judged_as_that_refusal() -> None:
    # An MCP SDK 1.x tool asks on its session's own stream and makes the router's refusal to
    # guess a tool error of its own: still the router's limit, and the error says what avoids it.
    args = ["-m", "tests.mcp_adapter.servers.chatty"]
    options = MCPOptions(protocol="2025-11-25")
    agent = await MCPServerAgent.connect("chatty", command=sys.executable, args=args, options=options)
    async with Router() as router:
        router.register(agent)
        waiting = asyncio.create_task(router.route("wait", {"tag": "beside"}))
        await eventually(lambda: any(info.in_flight for info in router.catalog()), what="the call to start")
        result = await router.route("sample_unnamed", {})
        waiting.cancel()
    assert (result.status, result.fault, result.error_type) == ("error", "router", "MCPRelayError")
    assert "related_request_id" in (result.error or "")


async def test_a_question_asked_outside_any_call_is_refused_as_such() -> None:
    params = StdioServerParameters(command=sys.executable, args=[str(SERVERS / "early.py")])
    agent = await MCPServerAgent.connect("early", params, options=MCPOptions(protocol="2025-11-25"))
    try:
        (capability,) = agent.capabilities
        # Not "0 calls are in flight ... max_concurrency 1 leaves no doubt": no call could be meant.
        assert "the server asked outside any tool call" in capability.description
    finally:
        await agent.aclose()


@pytest.mark.parametrize("protocol", ["auto", "2025-11-25"])
async def test_the_agent_declares_upstream_only_what_holds_for_every_caller(protocol: str) -> None:
    # One session serves every caller: roots or sampling with tools declared on it would hold
    # for callers that have other roots, or none.
    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=[types.Tool(name="caps", input_schema={"type": "object"})])

    async def call_tool(ctx: Any, params: Any) -> types.CallToolResult:
        caps = ctx.session.client_capabilities
        tools = caps.sampling is not None and caps.sampling.tools is not None
        said = f"roots={caps.roots is not None} sampling={caps.sampling is not None} tools={tools}"
        return types.CallToolResult(content=[TextContent(type="text", text=said)])

    server = Server("caps", on_list_tools=list_tools, on_call_tool=call_tool)
    async with Router() as router:
        router.register(await MCPServerAgent.connect("caps", server, options=MCPOptions(protocol=protocol)))
        result = await router.route("caps", {})
    assert result.payload == [{"type": "text", "text": "roots=False sampling=True tools=False"}], result.error
