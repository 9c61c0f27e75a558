"""Cluster tests run against a real redis-server (see tests/redis_server.py), never a mock, and
real `reach serve` subprocesses (the gateway tests' `serve` helper)."""

from __future__ import annotations

import secrets
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis.asyncio as redis

from reach_adapters import Capability, FunctionAgent, Router
from reach_adapters.cluster import ClusterNode
from reach_adapters.router import ReachMessage, ResultStatus
from reach_adapters.router.tasks import TaskStatus
from tests.gateway.conftest import serve
from tests.redis_server import RedisServer, redis_server
from tests.waiting import eventually

__all__ = [
    "TTL",
    "Join",
    "cap",
    "cluster",
    "listed",
    "listened",
    "own_redis",
    "prefix",
    "redis_server",
    "redis_url",
    "running",
    "serve",
    "shout_agent",
    "shout_keeps_ids",
    "two_servers",
]

# Leases of cluster tests: short, so that silent nodes are found out within a second or two.
TTL = 1.2
Join = Callable[..., Awaitable[ClusterNode]]


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    return redis_server.url


@pytest.fixture
def prefix() -> str:
    """Key prefix of its own per test: clusters of different tests never see each other."""
    return f"test{secrets.token_hex(4)}:"


def cap(name: str, **flags: Any) -> Capability:
    return Capability(name=name, description=name, input_schema={"type": "object"}, **flags)


@pytest.fixture
async def cluster(redis_url: str, prefix: str) -> AsyncIterator[Join]:
    """`join(router, node_id)`; every node and router is closed after the test."""
    nodes: list[ClusterNode] = []
    routers: list[Router] = []

    async def join(router: Router, node_id: str, url: str = redis_url) -> ClusterNode:
        node = await ClusterNode.join(router, url, node_id=node_id, lease_ttl_s=TTL, prefix=prefix)
        nodes.append(node)
        routers.append(router)
        return node

    try:
        yield join
    finally:
        for node in nodes:
            await node.aclose()
        for router in routers:
            await router.aclose()


async def listed(router: Router, agent_id: str) -> None:
    await eventually(lambda: agent_id in router, timeout=10, what=f"{agent_id} listed")


async def running(router: Router, task_id: str) -> bool:
    return (await router.task(task_id)).status is TaskStatus.RUNNING


async def listened(client: redis.Redis, channel: str) -> bool:
    """Whether anyone listens on pub/sub `channel` (a node's task-events listener, say)."""
    [(_, listeners)] = await client.pubsub_numsub(channel)
    return int(listeners) >= 1


def shout_agent(seen: list[ReachMessage]) -> FunctionAgent:
    """``util:shout:01``: upper-cases its payload's ``text``, recording each message in `seen`."""

    def shout(message: ReachMessage) -> str:
        seen.append(message)
        return str(message.raw_payload["text"]).upper()  # type: ignore[index,call-overload]

    return FunctionAgent(shout, agent_id="util:shout:01", capabilities=[cap("shout")])


async def shout_keeps_ids(router: Router, seen: list[ReachMessage]) -> None:
    """Route ``shout`` (util:shout:01, on another node or worker) with ids of the caller's and
    check they reached the agent, which records each message in `seen`, and came back."""
    result = await router.route(
        "shout", {"text": "hi"}, task_id="task-1", trace_id="trace-1", principal="ada"
    )
    assert (result.status, result.payload, result.agent_id) == (ResultStatus.OK, "HI", "util:shout:01")
    assert (result.task_id, result.trace_id) == ("task-1", "trace-1")
    meta = seen[0].meta_info
    assert (meta.task_id, meta.trace_id, meta.principal, meta.capability) == (
        "task-1",
        "trace-1",
        "ada",
        "shout",
    )


@pytest.fixture
def own_redis(redis_server: RedisServer, tmp_path: Path) -> Iterator[RedisServer]:
    """A redis-server of the test's own, which it may stop and start (an outage), and whose
    default key prefix no other test's nodes share."""
    server = RedisServer(redis_server.binary, tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def two_servers(redis_server: RedisServer, tmp_path: Path) -> Iterator[tuple[RedisServer, RedisServer]]:
    """Two redis-servers of their own, for tests that make one the other's replica (a failover)."""
    servers = [RedisServer(redis_server.binary, tmp_path / name) for name in ("a", "b")]
    for server in servers:
        server.directory.mkdir()
        server.start()
    try:
        yield servers[0], servers[1]
    finally:
        for server in servers:
            server.stop()
