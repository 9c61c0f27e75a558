"""Who may run a queued task: only the node whose entry it still is, and a node's task reader
outlives any refusal from Redis (a failover's UNBLOCKED, READONLY while demoted)."""

from __future__ import annotations

import asyncio

import pytest
import redis.asyncio as redis

from middleware import ReachMessage
from reach_adapters import Capability, FunctionAgent, Router
from reach_adapters.cluster import ClusterError, ClusterNode, Keys
from reach_adapters.cluster.taskstore import RedisTaskStore
from reach_adapters.router.tasks import TaskRecord, TaskStatus
from tests.redis_server import RedisServer

pytestmark = pytest.mark.timeout(60)


async def test_a_node_whose_entry_was_taken_over_cannot_start_the_task(redis_url: str, prefix: str) -> None:
    keys = Keys(prefix)
    client = redis.Redis.from_url(redis_url)
    store = RedisTaskStore(client, keys)
    try:
        await client.xgroup_create(keys.task_queue, keys.task_group, id="0", mkstream=True)
        record = TaskRecord(task_id="t1", message=ReachMessage())
        await client.set(keys.task("t1"), record.model_dump_json())
        added = await client.xadd(keys.task_queue, {"t": "t1"})
        entry_id = added.decode() if isinstance(added, bytes) else added
        await client.xreadgroup(keys.task_group, "stalled", {keys.task_queue: ">"}, count=1)
        # The stalled node's entry went idle past the visibility timeout: another node claims it.
        await client.xclaim(keys.task_queue, keys.task_group, "rescuer", 0, [entry_id])
        record.status = TaskStatus.RUNNING
        assert await store.start(record, entry_id, "stalled") == -1
        assert await store.start(record, entry_id, "rescuer") == 1
        record.status = TaskStatus.OK
        await client.set(keys.task("t1"), record.model_dump_json())
        assert await store.start(record, entry_id, "rescuer") == 0
    finally:
        await store.aclose()
        await client.aclose()


async def test_the_task_reader_outlives_a_failover(two_servers: tuple[RedisServer, RedisServer]) -> None:
    primary, other = two_servers

    async def work(text: str) -> str:
        return text.upper()

    router = Router()
    router.register(FunctionAgent(work, agent_id="util:work:1", capabilities=[Capability(name="work")]))
    node = await ClusterNode.join(router, primary.url, node_id="n1", lease_ttl_s=3)
    admin = redis.Redis(port=primary.port)
    try:
        before = await router.submit("work", {"text": "before"})
        assert (await router.wait(before.task_id, timeout=10)).status is TaskStatus.OK
        # Demoted to a replica, the server unblocks the reader's XREADGROUP and refuses writes;
        # promoted again, it has lost the data set (the group too).
        await admin.replicaof("127.0.0.1", str(other.port))
        await admin.replicaof("NO", "ONE")
        after = None
        for _ in range(50):
            try:
                after = await router.submit("work", {"text": "after"})
                break
            except ClusterError:  # refused while Redis settles: try again
                await asyncio.sleep(0.2)
        assert after is not None
        assert (await router.wait(after.task_id, timeout=15)).status is TaskStatus.OK
    finally:
        await admin.aclose()
        await node.aclose()
        await router.aclose()
