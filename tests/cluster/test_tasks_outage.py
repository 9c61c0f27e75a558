"""Drill b of issue 15 for async tasks: a redis-server with ``appendonly yes`` restarted under
load. No accepted task is lost; a submit while it is down fails at once with a clear error."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import redis.asyncio as redis

from reach_adapters import Capability, FunctionAgent, Router, RoutingPolicy
from reach_adapters.cluster import Keys
from reach_adapters.cluster.errors import TasksUnavailableError
from reach_adapters.cluster.tasks import ClusterTasks
from reach_adapters.router.tasks import TaskStatus
from tests.redis_server import RedisServer, node_client


async def work(text: str) -> str:
    """Take a moment, so tasks are running when Redis goes away."""
    await asyncio.sleep(0.05)
    return text


@pytest.fixture
def durable_redis(redis_server: RedisServer, tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(redis_server.binary, tmp_path, appendonly=True)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def nodes(durable_redis: RedisServer) -> AsyncIterator[list[Router]]:
    routers: list[Router] = []
    clients: list[redis.Redis] = []
    for name in ("n1", "n2"):
        router = Router(RoutingPolicy(task_workers=4))
        capability = Capability(name="work", idempotent=True)
        router.register(FunctionAgent(work, agent_id=f"util:work:{name}", capabilities=[capability]))
        client = node_client(durable_redis.url)
        await ClusterTasks.start(router, client, node_id=name, keys=Keys("drill:"), visibility_timeout_s=1.0)
        routers.append(router)
        clients.append(client)
    try:
        yield routers
    finally:
        for router in routers:
            await router.aclose()
        for client in clients:
            await client.aclose()


async def test_a_redis_restart_under_load_loses_no_accepted_task(
    durable_redis: RedisServer, nodes: list[Router], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="reach_adapters.cluster")
    one, two = nodes
    accepted = [(await one.submit("work", {"text": f"before {i}"})).task_id for i in range(40)]
    durable_redis.stop(graceful=True)
    try:
        async with asyncio.timeout(5):  # fails fast: no wait for Redis to come back
            with pytest.raises(TasksUnavailableError, match=r"out of reach.*try again later"):
                await two.submit("work", {"text": "during"})
        await asyncio.sleep(0.5)  # the workers meet the outage: they back off, they do not spin
    finally:
        durable_redis.start()
    accepted += [(await two.submit("work", {"text": f"after {i}"})).task_id for i in range(20)]
    for task_id in accepted:
        done = await one.wait(task_id, timeout=30)
        assert done.status is TaskStatus.OK, (task_id, done.status, done.result)
    assert len(await two.list_tasks(limit=1000)) == 60
    for node in ("n1", "n2"):
        outages = [
            r
            for r in caplog.records
            if r.getMessage().startswith(f"async tasks of node {node}: ") and "out of reach" in r.getMessage()
        ]
        assert len(outages) == 1, [r.getMessage() for r in outages]  # warned once, not per attempt
