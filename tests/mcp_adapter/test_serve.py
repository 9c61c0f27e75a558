"""The router served as an MCP server: tools from the catalog, calls through the router."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import sys
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from mcp import Client, StdioServerParameters
from mcp.client.session import IncomingMessage
from mcp.shared.exceptions import MCPError
from mcp.types import ImageContent, TextContent, ToolListChangedNotification

from middleware import MetaInfo, ReachMessage
from reach_adapters import Capability, FunctionAgent, InvalidDeclarationError, Router
from reach_adapters.mcp import (
    META_PREFIX,
    MCPConnectionError,
    MCPEndpoint,
    MCPOptions,
    MCPServerAgent,
    ReconnectPolicy,
    RouterMCPServer,
    serve_mcp,
    start_mcp_server,
)
from reach_adapters.mcp.peers import LegacyPeers
from tests.mcp_adapter.conftest import CALC, PYTHON
from tests.mcp_adapter.servers.calc import PIXEL
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]


def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


def _upper_agent() -> FunctionAgent:
    # A capability whose input is not an object: MCP clients send it as the "input" argument.
    return FunctionAgent(
        str.upper,
        agent_id="util:upper:0",
        capabilities=[Capability(name="upper", input_schema={"type": "string"}, idempotent=True)],
        call_style="payload",
    )


@pytest.fixture
async def gateway(router: Router, calc: MCPServerAgent) -> AsyncIterator[MCPEndpoint]:
    router.register(calc)
    router.register(FunctionAgent(shout, agent_id="util:shout:0"))
    router.register(_upper_agent())
    async with await start_mcp_server(router, port=0) as endpoint:
        yield endpoint


def _text(blocks: list[Any]) -> str:
    return "".join(block.text for block in blocks if isinstance(block, TextContent))


async def test_every_reachable_capability_is_a_tool(gateway: MCPEndpoint, router: Router) -> None:
    assert gateway.url == f"http://127.0.0.1:{gateway.port}/mcp"
    async with Client(gateway.url) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
    assert set(tools) == set(router.reachable())
    add = tools["add"]
    assert add.input_schema["required"] == ["a", "b"]
    assert add.output_schema is not None
    assert add.output_schema["properties"]["result"]["type"] == "integer"
    assert add.annotations is not None
    assert add.annotations.read_only_hint is True
    assert tools["shout"].description == "Upper-case the text."
    assert tools["upper"].input_schema == {
        "type": "object",
        "properties": {"input": {"type": "string"}},
        "required": ["input"],
        "additionalProperties": False,
    }


async def test_calls_go_through_the_router(gateway: MCPEndpoint) -> None:
    async with Client(gateway.url) as client:
        added = await client.call_tool("add", {"a": 2, "b": 3})
        assert added.structured_content == {"result": 5}
        assert _text(added.content) == "5"
        shouted = await client.call_tool("shout", {"text": "hi"})
        assert _text(shouted.content) == "HI"
        upper = await client.call_tool("upper", {"input": "abc"})
        assert _text(upper.content) == "ABC"
        described = await client.call_tool("describe", {"text": "x"})
        # The upstream server's blocks arrive as it sent them, image included.
        assert ImageContent(type="image", data=PIXEL, mime_type="image/png") in described.content


async def test_bad_calls_are_answered_not_fatal(gateway: MCPEndpoint) -> None:
    async with Client(gateway.url) as client:
        with pytest.raises(MCPError, match="Unknown tool: 'nope'"):
            await client.call_tool("nope", {})
        invalid = await client.call_tool("add", {"a": 1, "b": "two"})
        assert invalid.is_error
        assert "PayloadValidationError" in _text(invalid.content)
        failed = await client.call_tool("fail", {"reason": "bad day"})
        assert failed.is_error
        assert "bad day" in _text(failed.content)
        assert (await client.call_tool("add", {"a": 1, "b": 1})).structured_content == {"result": 2}


async def test_handshake_era_clients_are_served(gateway: MCPEndpoint) -> None:
    async with Client(gateway.url, mode="legacy") as client:
        assert client.protocol_version < "2026"
        tools = (await client.list_tools()).tools
        assert client.server_capabilities.tools is not None
        assert client.server_capabilities.tools.list_changed is True
        assert "add" in {tool.name for tool in tools}
        assert (await client.call_tool("add", {"a": 4, "b": 4})).structured_content == {"result": 8}


async def test_clients_hear_when_the_catalog_changes(gateway: MCPEndpoint, router: Router) -> None:
    heard: list[str] = []

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, ToolListChangedNotification):
            heard.append("legacy")

    async with (
        Client(gateway.url) as modern,
        Client(gateway.url, mode="legacy", message_handler=on_message) as old,
    ):
        await old.list_tools()
        async with modern.listen(tools_list_changed=True) as changes:
            await router.deregister("util:upper:0", drain_timeout=1.0)
            async with asyncio.timeout(10):
                await anext(changes)
        await eventually(lambda: heard == ["legacy"], what="tools/list_changed to the handshake-era client")
        assert "upper" not in {tool.name for tool in (await modern.list_tools()).tools}
        router.register(_upper_agent())
        await eventually(lambda: len(heard) == 2, what="a second tools/list_changed")
        assert "upper" in {tool.name for tool in (await old.list_tools()).tools}


async def test_a_lasting_handshake_era_client_hears_changes_however_many_came_and_went(
    router: Router,
) -> None:
    router.register(FunctionAgent(shout, agent_id="util:shout:0"))
    reach = RouterMCPServer(router, name="reach")
    heard = asyncio.Event()

    async def on_message(message: IncomingMessage) -> None:
        if isinstance(message, ToolListChangedNotification):
            heard.set()

    try:
        async with Client(reach.server, mode="legacy", message_handler=on_message) as lasting:
            await lasting.list_tools()
            for _ in range(300):
                async with Client(reach.server, mode="legacy") as passing:
                    await passing.list_tools()
            # The clients that left are forgotten; the one still connected is kept.
            assert len(reach._notices.legacy) == 1
            router.register(_upper_agent())
            async with asyncio.timeout(10):
                await heard.wait()
    finally:
        reach.close()


async def test_a_closed_http_client_is_forgotten(gateway: MCPEndpoint) -> None:
    peers = gateway._reach._notices.legacy
    async with Client(gateway.url, mode="legacy") as client:
        await client.list_tools()
        assert len(peers) == 1
    await eventually(lambda: len(peers) == 0, what="the closed HTTP session to be forgotten")


async def test_over_the_bound_the_longest_connected_client_is_dropped_with_one_warning(
    router: Router, caplog: pytest.LogCaptureFixture
) -> None:
    router.register(FunctionAgent(shout, agent_id="util:shout:0"))
    reach = RouterMCPServer(router, name="reach")
    reach._notices.legacy = peers = LegacyPeers(max_peers=1)
    try:
        async with (
            Client(reach.server, mode="legacy") as first,
            Client(reach.server, mode="legacy") as second,
            Client(reach.server, mode="legacy") as third,
        ):
            for client in (first, second, third):
                await client.list_tools()
            assert len(peers) == 1
    finally:
        reach.close()
    assert caplog.text.count("no longer hear of list changes") == 1


async def test_failover_through_the_gateway(router: Router) -> None:
    quick = ReconnectPolicy(initial_delay_s=5.0)
    for instance in ("a", "b"):
        router.register(
            await MCPServerAgent.connect(
                "calc", command=PYTHON, args=[CALC], options=MCPOptions(instance=instance, reconnect=quick)
            )
        )
    async with await start_mcp_server(router) as endpoint, Client(endpoint.url) as client:
        first = await client.call_tool("pid", {})
        assert isinstance(first.structured_content, dict)
        os.kill(first.structured_content["result"], signal.SIGKILL)
        for _ in range(4):
            served = await client.call_tool("pid", {})
            assert not served.is_error, _text(served.content)
            assert served.structured_content != first.structured_content


async def test_in_process_client_of_the_router(router: Router) -> None:
    router.register(FunctionAgent(shout, agent_id="util:shout:0"))
    reach = RouterMCPServer(router, name="reach")
    try:
        async with Client(reach.server) as client:
            answer = await client.call_tool("shout", {"text": "in"})
            assert _text(answer.content) == "IN"
            # The task's ids come back, so the client can ask the router to explain the call.
            assert answer.meta is not None
            task_id = answer.meta[META_PREFIX + "task_id"]
            assert router.explain(task_id).chosen == "util:shout:0"
    finally:
        reach.close()


async def test_served_over_stdio() -> None:
    params = StdioServerParameters(
        command=sys.executable, args=["-m", "tests.mcp_adapter.servers.gateway"], cwd=ROOT
    )
    async with Client(params) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert {"add", "shout", "grow"} <= names
        assert (await client.call_tool("add", {"a": 1, "b": 2})).structured_content == {"result": 3}
        assert _text((await client.call_tool("shout", {"text": "x"})).content) == "X"


async def test_serve_mcp_reports_its_url_and_stops_when_cancelled(router: Router) -> None:
    router.register(FunctionAgent(shout, agent_id="util:shout:0"))
    urls: list[str] = []
    serving = asyncio.create_task(
        serve_mcp(router, transport="streamable-http", port=0, on_ready=urls.append)
    )
    await eventually(lambda: bool(urls) or serving.done(), what="the server to listen")
    async with Client(urls[0]) as client:
        assert [tool.name for tool in (await client.list_tools()).tools] == ["shout"]
    serving.cancel()
    await asyncio.wait({serving})
    port = int(urls[0].rsplit(":", 1)[1].split("/")[0])
    with pytest.raises(ConnectionRefusedError), socket.create_connection(("127.0.0.1", port), timeout=5):
        pass


async def test_bad_serve_arguments_are_rejected(router: Router) -> None:
    with pytest.raises(InvalidDeclarationError, match="port must be an integer"):
        await start_mcp_server(router, port=-1)
    with pytest.raises(InvalidDeclarationError, match="path must start with '/'"):
        await start_mcp_server(router, path="mcp")
    with pytest.raises(InvalidDeclarationError, match="transport must be"):
        await serve_mcp(router, transport="pigeon")  # type: ignore[arg-type]
    with pytest.raises(InvalidDeclarationError, match="serves a Router"):
        RouterMCPServer("router")  # type: ignore[arg-type]
    async with await start_mcp_server(router) as taken:
        with pytest.raises(MCPConnectionError, match=f"cannot listen on 127.0.0.1:{taken.port}"):
            await start_mcp_server(router, port=taken.port)


async def test_a_task_keeps_its_trace_and_lineage_across_an_mcp_hop(router: Router) -> None:
    """Router A reaches router B over MCP: B's agent sees A's trace, task and lineage."""
    seen: list[MetaInfo] = []

    async def inner(message: ReachMessage) -> str:
        seen.append(message.meta_info)
        return "done"

    router.register(
        FunctionAgent(
            inner, agent_id="team:inner:0", capabilities=[Capability(name="inner", idempotent=True)]
        )
    )
    reach = RouterMCPServer(router, name="b")
    upstream = Router()
    upstream.register(await MCPServerAgent.connect("b", server=reach.server))
    try:
        result = await upstream.route("inner", {}, task_id="order-7", timeout_ms=5000)
        assert result.ok, result.error
        (meta,) = seen
        assert meta.trace_id == result.trace_id
        assert meta.task_id == "order-7"
        assert meta.lineage == ["mcp:b:0"]
        assert meta.depth == 1
        assert meta.deadline is not None
        # Another upstream retrying the same task reaches B, which answers from the first delivery.
        other = Router()
        other.register(await MCPServerAgent.connect("b", reach.server, options={"instance": "1"}))
        again = await other.route("inner", {}, task_id="order-7", timeout_ms=5000)
        await other.aclose()
        assert again.ok
        assert again.payload == result.payload
        assert len(seen) == 1
    finally:
        await upstream.aclose()
        reach.close()


async def test_a_wrapped_input_keeps_its_definitions_where_its_references_point(router: Router) -> None:
    items = {"type": "array", "items": {"$ref": "#/$defs/Sku"}, "$defs": {"Sku": {"type": "string"}}}
    router.register(
        FunctionAgent(
            len,
            agent_id="util:count:0",
            capabilities=[Capability(name="count", input_schema=items)],
            call_style="payload",
        )
    )
    async with await start_mcp_server(router, port=0) as endpoint, Client(endpoint.url) as client:
        (tool,) = (await client.list_tools()).tools
        assert tool.input_schema["$defs"] == {"Sku": {"type": "string"}}
        Draft202012Validator(tool.input_schema).validate({"input": ["kettle"]})
        counted = await client.call_tool("count", {"input": ["kettle", "mug"]})
        assert _text(counted.content) == "2"


async def test_the_served_router_gives_the_package_version(router: Router) -> None:
    from reach_adapters.version import package_version

    router.register(FunctionAgent(shout, agent_id="util:shout:0"))
    async with Client(RouterMCPServer(router).server) as client:
        assert client.server_info is not None
        assert (client.server_info.name, client.server_info.version) == ("agent-reach", package_version())
    assert package_version() != "0+unknown"
