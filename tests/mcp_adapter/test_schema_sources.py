"""What a server's tool schemas may hold: patterns in the regex dialect the schemas are written in
(ECMA-262, as pydantic and zod write them), kept as the server serves them; and references to other
documents, which the router never fetches (a server could make it request any URL, or read a
file), so such a tool is skipped with a warning that says why."""

from __future__ import annotations

import asyncio
import logging
from typing import Annotated, Any

import pytest
from mcp.server import Server
from mcp.server.context import ServerRequestContext
from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolRequestParams, CallToolResult, ListToolsResult, PaginatedRequestParams, Tool
from pydantic import Field

from middleware import Fault, ResultStatus
from reach_adapters import Router
from reach_adapters.mcp import MCPServerAgent

pytestmark = pytest.mark.timeout(30)


def named_server() -> MCPServer:
    server = MCPServer("names")

    @server.tool()
    def greet(name: Annotated[str, Field(pattern=r"^\p{L}+$")]) -> str:
        """Greet someone by a name of letters."""
        return f"hello {name}"

    @server.tool()
    def year_of(date: Annotated[str, Field(pattern=r"^(?<year>\d{4})-\d{2}-\d{2}$")]) -> int:
        """The year of an ISO date."""
        return int(date[:4])

    return server


async def test_ecma_patterns_are_kept_and_checked(router: Router) -> None:
    agent = await MCPServerAgent.connect("names", server=named_server())
    async with agent:
        assert sorted(cap.name for cap in agent.capabilities) == ["greet", "year_of"]
        router.register(agent)
        assert (await router.route("greet", {"name": "Zoë"})).payload == "hello Zoë"
        assert (await router.route("year_of", {"date": "2026-12-03"})).payload == 2026
        refused = await router.route("greet", {"name": "Zoë 1"})
        assert (refused.status, refused.fault) == (ResultStatus.INVALID, Fault.CALLER)


def referring_server(url: str) -> Server[Any]:
    tools = [
        Tool(name="ping", input_schema={"type": "object"}),
        Tool(name="lookup", input_schema={"type": "object", "properties": {"q": {"$ref": url}}}),
    ]

    async def list_tools(
        ctx: ServerRequestContext[Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(tools=tools)

    async def call_tool(ctx: ServerRequestContext[Any], params: CallToolRequestParams) -> CallToolResult:
        return CallToolResult(content=[])

    return Server("refers", on_list_tools=list_tools, on_call_tool=call_tool)


async def test_a_schema_another_refers_to_is_never_fetched(caplog: pytest.LogCaptureFixture) -> None:
    requests: list[bytes] = []

    async def record(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        requests.append(await reader.read(200))
        writer.close()

    listener = await asyncio.start_server(record, "127.0.0.1", 0)
    port = listener.sockets[0].getsockname()[1]
    try:
        with caplog.at_level(logging.WARNING, logger="reach_adapters.mcp"):
            agent = await MCPServerAgent.connect(
                "refers", server=referring_server(f"http://127.0.0.1:{port}/q.json")
            )
        async with agent:
            assert [cap.name for cap in agent.capabilities] == ["ping"]
        await asyncio.sleep(0.1)
    finally:
        listener.close()
        await listener.wait_closed()
    assert requests == []
    warned = " ".join(record.getMessage() for record in caplog.records)
    assert "skipped tool 'lookup'" in warned
    assert "fetches no schema" in warned
    assert "On instance" not in warned  # the error itself, not the validator's report around it
