"""The task travels in each call's `_meta` to the servers that read it: another reach router, which
says so in its capabilities; a plain MCP server gets it only with ``task_meta="always"``."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client

from middleware import ReachMessage
from reach_adapters import Capability, FunctionAgent, Router
from reach_adapters.mcp import MCPOptions, MCPServerAgent, RouterMCPServer
from tests.mcp_adapter.servers import chatty

pytestmark = pytest.mark.timeout(60)

TASK_KEYS = {"agent-reach/task_id", "agent-reach/trace_id", "agent-reach/depth", "agent-reach/lineage"}


def reach_keys(seen: dict[str, Any]) -> set[str]:
    return {key for key in seen if key.startswith("agent-reach/")}


@pytest.mark.parametrize("protocol", ["auto", "2025-11-25"])
async def test_a_plain_server_gets_the_task_only_when_asked(protocol: str) -> None:
    async with Router() as router:
        plain = MCPOptions(protocol=protocol)
        told = MCPOptions(protocol=protocol, instance="1", prefix="told_", task_meta="always")
        for options in (plain, told):
            router.register(await MCPServerAgent.connect("chatty", server=chatty.server, options=options))
        quiet = await router.route("request_meta", {})
        assert quiet.ok, quiet.error
        # Nothing it would only parse and drop (about 30 µs of an SDK server's time a call).
        assert quiet.payload == {}
        asked = await router.route("told_request_meta", {})
        assert asked.ok, asked.error
        seen = asked.payload
        assert isinstance(seen, dict)
        assert reach_keys(seen) >= TASK_KEYS
        assert (seen["agent-reach/task_id"], seen["agent-reach/trace_id"]) == (asked.task_id, asked.trace_id)


async def seen_task(message: ReachMessage) -> dict[str, Any]:
    meta = message.meta_info
    return {"task_id": meta.task_id, "trace_id": meta.trace_id, "depth": meta.depth, "lineage": meta.lineage}


@pytest.mark.parametrize("protocol", ["auto", "2025-11-25"])
async def test_a_reach_router_says_it_reads_the_task_and_gets_it(protocol: str) -> None:
    near = Router()
    near.register(FunctionAgent(seen_task, agent_id="util:seen:01", capabilities=[Capability(name="seen")]))
    gateway = RouterMCPServer(near, name="gw")
    try:
        async with Client(gateway.server) as client:
            assert client.server_capabilities.experimental == {"agent-reach": {}}
        async with Router() as far:
            hop = await MCPServerAgent.connect("gw", gateway.server, options=MCPOptions(protocol=protocol))
            far.register(hop)
            answer = await far.route("seen", {})
    finally:
        gateway.close()
        await near.aclose()
    assert answer.ok, answer.error
    # One task across both routers: its ids, one level deeper, the hop in its lineage.
    assert answer.payload == {
        "task_id": answer.task_id,
        "trace_id": answer.trace_id,
        "depth": 1,
        "lineage": ["mcp:gw:0"],
    }
