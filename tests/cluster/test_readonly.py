"""A Redis that answers reads but refuses writes (demoted to a replica: READONLY) is one outage
for a node, warned once: the resync's and the listener's reads succeeding meanwhile do not end
it, only the lease renewal that failed succeeding again does."""

from __future__ import annotations

import asyncio
import logging

import pytest
import redis.asyncio as redis

from reach_adapters import FunctionAgent, Router
from reach_adapters.cluster import ClusterNode
from tests.cluster.conftest import TTL
from tests.redis_server import RedisServer
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(60)


def echo(text: str) -> str:
    """Say it back."""
    return text


def warned(caplog: pytest.LogCaptureFixture, who: str, text: str) -> list[str]:
    return [
        record.getMessage()
        for record in caplog.records
        if record.levelno == logging.WARNING
        and record.getMessage().startswith(f"{who}: ")
        and text in record.getMessage()
    ]


async def test_a_read_only_redis_is_one_outage_warned_once(
    two_servers: tuple[RedisServer, RedisServer], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="reach_adapters.cluster")
    primary, other = two_servers
    router = Router()
    router.register(FunctionAgent(echo, agent_id="util:echo:1"))
    node = await ClusterNode.join(router, primary.url, node_id="n1", lease_ttl_s=TTL)
    admin = redis.Redis(port=primary.port)
    try:
        await admin.replicaof("127.0.0.1", str(other.port))
        await eventually(lambda: bool(warned(caplog, "node n1", "out of reach")), timeout=10, what="warned")
        # Many renewals refused (every TTL/3 at first) while the reads of the resync (every TTL/6)
        # and of the listener succeed.
        await asyncio.sleep(3 * TTL)
        assert len(warned(caplog, "node n1", "out of reach")) == 1, warned(caplog, "node n1", "")
        assert warned(caplog, "node n1", "is back") == []
        assert len(warned(caplog, "async tasks of node n1", "out of reach")) == 1
        await admin.replicaof("NO", "ONE")
        await eventually(lambda: bool(warned(caplog, "node n1", "is back")), timeout=20, what="back")
        assert len(warned(caplog, "node n1", "out of reach")) == 1
        assert len(warned(caplog, "node n1", "is back")) == 1
    finally:
        await admin.aclose()
        await node.aclose()
        await router.aclose()
