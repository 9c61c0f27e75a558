"""Drill d of the cluster issue: 100 agents across three nodes register at once; every node lists
all of them, a node's catalog memory is measured, and a node that stops renewing is found out
within its lease plus one resync."""

from __future__ import annotations

import asyncio
import time
import tracemalloc
from collections.abc import AsyncIterator, Callable
from functools import partial

import pytest

from reach_adapters import FunctionAgent, Router
from reach_adapters.cluster import ClusterNode
from tests.waiting import eventually

# Long enough that a loaded machine (tests on more workers than cores) renews every lease in time.
TTL = 3.0
AGENTS = 100
NODES = 3


def summarize(text: str) -> str:
    """Say it shorter."""
    return text[:10]


def node_agents(node: int) -> list[FunctionAgent]:
    return [
        FunctionAgent(summarize, agent_id=f"text:summarize:n{node}-{i}") for i in range(node, AGENTS, NODES)
    ]


def listed_all(router: Router) -> bool:
    return len(router.catalog()) == AGENTS


@pytest.fixture
async def routers() -> AsyncIterator[list[Router]]:
    routers = []
    for node in range(NODES):
        router = Router()
        for agent in node_agents(node):
            router.register(agent)
        routers.append(router)
    try:
        yield routers
    finally:
        for router in routers:
            await router.aclose()


async def test_a_hundred_agents_on_three_nodes_are_listed_everywhere_and_a_dead_node_found_out(
    routers: list[Router], redis_url: str, prefix: str, record_property: Callable[[str, object], None]
) -> None:
    nodes = await asyncio.gather(
        *(
            ClusterNode.join(router, redis_url, node_id=f"n{i}", lease_ttl_s=TTL, prefix=prefix)
            for i, router in enumerate(routers)
        )
    )
    observer = Router()
    watcher: ClusterNode | None = None
    try:
        for router in routers:
            await eventually(partial(listed_all, router), timeout=10, what="all 100 listed")
        tracemalloc.start()
        before = tracemalloc.take_snapshot()
        watcher = await ClusterNode.join(
            observer, redis_url, node_id="watcher", lease_ttl_s=TTL, prefix=prefix
        )
        after = tracemalloc.take_snapshot()
        tracemalloc.stop()
        # The join read the whole registry: all 100 are listed when it returns.
        assert len(observer.catalog()) == AGENTS
        catalog_bytes = sum(stat.size_diff for stat in after.compare_to(before, "filename"))
        record_property("catalog_bytes_per_node", catalog_bytes)

        dead = nodes[2]
        gone = {info.agent_id for info in routers[2].catalog() if info.node is None}
        stopped = time.monotonic()
        await dead.aclose(deregister=False)  # silent: its leases are left to expire
        # Found out within the lease plus one resync (TTL/6), with slack for a loaded machine.
        await eventually(
            lambda: not gone & {info.agent_id for info in observer.catalog()},
            timeout=TTL + TTL / 6 + 5,
            what="the silent node's agents removed",
        )
        record_property("lease_expiry_detection_s", round(time.monotonic() - stopped, 3))
        await eventually(
            lambda: len(observer.catalog()) == AGENTS - len(gone), timeout=10, what="the others still listed"
        )
    finally:
        if watcher is not None:
            await watcher.aclose()
        await observer.aclose()
        for node in nodes[:2]:
            await node.aclose()
