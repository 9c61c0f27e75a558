"""What an MCP client sees through the router is what the upstream servers gave: tool metadata,
result `_meta`, error blocks and structured results survive the hop (issue 12, items 1, 2, 4)."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator

import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp.types import ImageContent, TextContent, Tool

from reach_adapters import Capability, FunctionAgent, Router
from reach_adapters.mcp import META_PREFIX, MCPServerAgent, RouterMCPServer
from reach_adapters.mcp.options import MCPOptions
from reach_adapters.mcp.spec import ServerSpec
from reach_adapters.mcp.tools import declare
from tests.mcp_adapter.conftest import CALC, PYTHON
from tests.mcp_adapter.servers.fidelity import DECLINED, ICON, PIXEL, fidelity_server

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def reach(router: Router) -> AsyncIterator[RouterMCPServer]:
    router.register(await MCPServerAgent.connect("fidelity", server=fidelity_server()))
    served = RouterMCPServer(router, name="reach")
    yield served
    served.close()


async def _tools(reach: RouterMCPServer) -> dict[str, Tool]:
    async with Client(reach.server) as client:
        return {tool.name: tool for tool in (await client.list_tools()).tools}


async def test_tool_metadata_survives_re_serving(reach: RouterMCPServer) -> None:
    lookup = (await _tools(reach))["lookup"]
    assert lookup.title == "Look up a key"
    assert lookup.description == "Find the value stored under a key."
    hints = lookup.annotations
    assert hints is not None
    assert (hints.read_only_hint, hints.destructive_hint, hints.idempotent_hint, hints.open_world_hint) == (
        True,
        False,
        True,
        False,
    )
    # The upstream's annotations title is its own, not the tool's title.
    assert hints.title == "Lookup"
    assert lookup.icons == [ICON]
    assert lookup.meta == {"example.com/owner": "team-a"}
    assert lookup.output_schema == {"type": "object", "properties": {"value": {"type": "string"}}}


async def test_replicas_that_disagree_declare_the_most_cautious_hints(router: Router) -> None:
    careful = await MCPServerAgent.connect("fidelity", fidelity_server(), options={"instance": "a"})
    bold = await MCPServerAgent.connect(
        "fidelity", fidelity_server(read_only=False, open_world=True), options={"instance": "b"}
    )
    router.register(careful)
    router.register(bold)
    reach = RouterMCPServer(router, name="reach")
    try:
        hints = (await _tools(reach))["lookup"].annotations
    finally:
        reach.close()
    assert hints is not None
    # Read-only only if every replica is; open world if any is.
    assert (hints.read_only_hint, hints.open_world_hint, hints.idempotent_hint) == (False, True, True)
    # The first replica alone keeps its own declaration.
    assert router.declarations()["lookup"].read_only


@pytest.mark.parametrize("first_flags", [{"idempotent": True}, {"open_world": False}, {"destructive": False}])
async def test_replicas_one_of_which_never_said_whether_it_destroys_are_served_as_mcp_assumes(
    router: Router, first_flags: dict[str, bool]
) -> None:
    """Merging must not turn "never said" into "not destructive": clients may skip asking first."""
    for agent_id, flags in (("util:said:01", first_flags), ("util:silent:01", {})):
        capability = Capability(name="x", **flags)
        router.register(FunctionAgent(lambda x: x, agent_id=agent_id, capabilities=[capability]))
    served = RouterMCPServer(router)
    try:
        hints = (await _tools(served))["x"].annotations
    finally:
        served.close()
    assert hints is not None
    assert hints.destructive_hint is None


async def test_result_meta_survives_without_the_upstreams_protocol_keys(reach: RouterMCPServer) -> None:
    async with Client(reach.server) as client:
        answer = await client.call_tool("lookup", {"key": "k"})
    assert answer.structured_content == {"value": "value of k"}
    assert answer.meta is not None
    assert answer.meta["example.com/cost"] == 3
    # The upstream's protocol keys described its hop; the gateway's ids describe this one.
    assert "io.modelcontextprotocol/related-task" not in answer.meta
    assert META_PREFIX + "task_id" in answer.meta


async def test_every_block_of_a_tool_error_survives(reach: RouterMCPServer) -> None:
    async with Client(reach.server) as client:
        failed = await client.call_tool("broken", {})
    assert failed.is_error
    assert failed.content == [
        TextContent(type="text", text="the disk is full"),
        ImageContent(type="image", data=PIXEL, mime_type="image/png"),
    ]
    assert failed.meta is not None
    assert failed.meta["example.com/incident"] == "INC-7"
    assert failed.meta[META_PREFIX + "fault"] == "task"


async def test_a_tool_errors_structured_content_survives_one_hop_and_two(
    router: Router, reach: RouterMCPServer
) -> None:
    # Gateway B calls gateway A (another reach router) over MCP: both branches of a tool error.
    async with Router() as far:
        far.register(await MCPServerAgent.connect("near", reach.server))
        chained = RouterMCPServer(far, name="far")
        try:
            async with Client(reach.server) as client, Client(chained.server) as chain_client:
                one = await client.call_tool("charge", {})
                two = await chain_client.call_tool("charge", {})
                quiet = await client.call_tool("charge", {"quiet": True})
                quiet_two = await chain_client.call_tool("charge", {"quiet": True})
        finally:
            chained.close()
    for failed in (one, two):
        assert failed.is_error
        assert failed.content == [TextContent(type="text", text="card declined")]
        assert failed.structured_content == DECLINED
    for failed in (quiet, quiet_two):
        assert (failed.is_error, failed.content, failed.structured_content) == (True, [], DECLINED)
    assert (await router.route("charge", {})).extra["structured_content"] == DECLINED


def count(n: int) -> int:
    """Count to n."""
    return n


async def test_a_bare_result_has_one_payload_whichever_hop_serves_it(router: Router) -> None:
    declared = Capability(
        name="count",
        input_schema={"type": "object", "properties": {"n": {"type": "integer"}}},
        output_schema={"type": "integer"},
    )
    local = FunctionAgent(count, agent_id="util:count:0", capabilities=[declared])
    remote = await MCPServerAgent.connect("calc", command=PYTHON, args=[CALC])
    router.register(local)
    router.register(remote)
    assert (await router.route("count", {"n": 3})).payload == 3
    assert (await router.route("add", {"a": 1, "b": 2})).payload == 3
    add = next(cap for cap in remote.capabilities if cap.name == "add")
    assert add.output_schema is not None
    assert add.output_schema["type"] == "integer"
    reach = RouterMCPServer(router, name="reach")
    try:
        tools = await _tools(reach)
        async with Client(reach.server) as client:
            counted = await client.call_tool("count", {"n": 4})
            added = await client.call_tool("add", {"a": 2, "b": 2})
    finally:
        reach.close()
    # Re-served, a bare result is boxed the way the SDK boxes it, and its schema says so.
    for name in ("count", "add"):
        schema = tools[name].output_schema
        assert schema is not None
        assert schema["properties"]["result"]["type"] == "integer"
        assert schema["required"] == ["result"]
    assert counted.structured_content == {"result": 4}
    assert added.structured_content == {"result": 4}


async def test_a_tool_that_only_runs_as_a_task_is_not_offered(caplog: pytest.LogCaptureFixture) -> None:
    # Task support is declared only in the handshake-era protocol (2025-11-25), which servers
    # built on other SDKs still speak: list the tools as such a server sends them.
    server = fidelity_server()
    async with Client(server, mode="legacy") as client:
        tools = (await client.list_tools()).tools
    assert {tool.name: tool.execution is not None for tool in tools}["long_job"]
    spec = ServerSpec("fidelity", server, MCPOptions())
    with caplog.at_level(logging.WARNING, logger="reach_adapters.mcp"):
        declared = declare(tools, spec)
    names = {cap.name for cap in declared.capabilities}
    assert "long_job" not in names
    # Optional task support: called the ordinary way.
    assert "lookup" in names
    assert "skipped tool 'long_job': it runs only as an MCP task" in caplog.text


def _search_server(name: str, *, with_limit: bool) -> MCPServer:
    server = MCPServer(name)
    if with_limit:

        @server.tool()
        def search(query: str, limit: int) -> str:
            """Search the code."""
            return f"{name}: {query} (first {limit})"

    else:

        @server.tool()
        def search(query: str) -> str:  # type: ignore[misc]
            """Search the docs."""
            return f"{name}: {query}"

    return server


async def test_namesake_tools_with_other_schemas_get_their_own_names(
    router: Router, caplog: pytest.LogCaptureFixture
) -> None:
    router.register(await MCPServerAgent.connect("docs", server=_search_server("docs", with_limit=False)))
    router.register(await MCPServerAgent.connect("code", server=_search_server("code", with_limit=True)))
    assert "serves it as 'search_code'" in caplog.text
    reach = RouterMCPServer(router, name="reach")
    try:
        tools = await _tools(reach)
        async with Client(reach.server) as client:
            docs = await client.call_tool("search", {"query": "retry"})
            code = await client.call_tool("search_code", {"query": "retry", "limit": 3})
    finally:
        reach.close()
    assert tools["search"].input_schema["required"] == ["query"]
    assert tools["search_code"].input_schema["required"] == ["query", "limit"]
    assert docs.structured_content == {"result": "docs: retry"}
    # The upstream is called by its own tool name.
    assert code.structured_content == {"result": "code: retry (first 3)"}


async def test_a_capability_that_never_said_whether_it_destroys_is_served_as_mcp_assumes(
    router: Router,
) -> None:
    """MCP assumes a tool that is not read-only is destructive; a capability's `destructive`
    defaults to false, which served as such would tell clients (who may ask before a destructive
    call) that it is not."""
    for name, flags in (("plain", {}), ("safe", {"destructive": False}), ("wipe", {"destructive": True})):
        capability = Capability(name=name, **flags)
        router.register(FunctionAgent(lambda x: x, agent_id=f"util:{name}:01", capabilities=[capability]))
    router.register(
        FunctionAgent(
            lambda x: x, agent_id="util:peek:01", capabilities=[Capability(name="peek", read_only=True)]
        )
    )
    served = RouterMCPServer(router)
    try:
        tools = await _tools(served)
    finally:
        served.close()
    hints = {name: tool.annotations.destructive_hint for name, tool in tools.items() if tool.annotations}
    assert hints == {"plain": None, "safe": False, "wipe": True, "peek": False}
    # Read back one hop away, the one that never said is destructive, as MCP has it.
    far = Router()
    try:
        far.register(await MCPServerAgent.connect("near", server=RouterMCPServer(router).server))
        assert {name: cap.destructive for name, cap in far.reachable().items()} == {
            "plain": True,
            "safe": False,
            "wipe": True,
            "peek": False,
        }
    finally:
        await far.aclose()
