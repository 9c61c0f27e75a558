"""Redis stopped under two nodes and started again: each keeps serving its own agents, warns
once, and the cluster comes back together."""

from __future__ import annotations

import asyncio
import logging

import pytest

from reach_adapters import FunctionAgent, Router
from reach_adapters.cluster import ClusterNode
from reach_adapters.router import ResultStatus
from tests.redis_server import RedisServer
from tests.waiting import eventually


def echo(text: str) -> str:
    """Say it back."""
    return text


def warnings(caplog: pytest.LogCaptureFixture, node: str, text: str) -> int:
    return sum(
        1
        for record in caplog.records
        if record.levelno == logging.WARNING
        and record.getMessage().startswith(f"node {node}: ")
        and text in record.getMessage()
    )


async def test_a_redis_outage_leaves_each_node_serving_its_own_agents(
    own_redis: RedisServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="reach_adapters.cluster")
    one, two = Router(), Router()
    one.register(FunctionAgent(echo, agent_id="util:echo:one"))
    two.register(FunctionAgent(echo, agent_id="util:echo:two"))
    node1 = await ClusterNode.join(one, own_redis.url, node_id="n1", lease_ttl_s=1.2)
    node2 = await ClusterNode.join(two, own_redis.url, node_id="n2", lease_ttl_s=1.2)
    try:
        await eventually(lambda: "util:echo:two" in one, timeout=10, what="node 2's agent on node 1")
        own_redis.stop()
        await eventually(lambda: "util:echo:two" not in one, timeout=10, what="node 2's agent dropped")
        for _ in range(20):
            served = await one.route("echo", {"text": "still here"})
            assert served.status is ResultStatus.OK
            await asyncio.sleep(0.02)
        assert warnings(caplog, "n1", "out of reach") == 1
        own_redis.start()  # empty: no persistence, so the nodes must write their leases again
        await eventually(lambda: "util:echo:two" in one, timeout=20, what="node 2's agent back on node 1")
        await eventually(lambda: "util:echo:one" in two, timeout=20, what="node 1's agent back on node 2")
        assert warnings(caplog, "n1", "out of reach") == 1
        assert warnings(caplog, "n1", "is back") == 1
    finally:
        await node1.aclose()
        await node2.aclose()
        await one.aclose()
        await two.aclose()
