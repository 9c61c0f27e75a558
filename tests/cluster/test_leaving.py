"""What a node or a worker leaves behind in Redis. A clean leave deletes its inbox stream and its
consumer of the task group (unless tasks are still pending for it); a process killed without
leaving finds its inbox expire on its own, since its id (HOSTNAME-RANDOM by default) never
comes back."""

from __future__ import annotations

import asyncio

import redis.asyncio as redis

from reach_adapters import Capability, FunctionAgent, Router
from reach_adapters.cluster import Keys, RemoteWorker
from reach_adapters.router.tasks import TaskStatus
from tests.cluster.conftest import TTL, Join
from tests.waiting import until


def echo(text: str) -> str:
    """Say it back."""
    return text


async def called(client: redis.Redis, keys: Keys, node: str) -> None:
    """A caller's entry in `node`'s inbox (it creates the stream), then the inbox's expiry set by
    the next renewal of the leases."""
    await client.xadd(keys.inbox(node), {"m": b'{"op":"cancel","id":"nobody"}'})

    async def expiring() -> bool:
        return int(await client.pttl(keys.inbox(node))) > 0

    await until(expiring, timeout=10, what=f"the inbox of {node} given an expiry")


async def test_a_clean_leave_deletes_the_inbox_and_a_silent_stop_lets_it_expire(
    cluster: Join, redis_url: str, prefix: str
) -> None:
    keys = Keys(prefix)
    client = redis.Redis.from_url(redis_url)
    try:
        clean, silent = Router(), Router()
        for router, name in ((clean, "clean"), (silent, "silent")):
            router.register(FunctionAgent(echo, agent_id=f"util:echo:{name}"))
        node = await cluster(clean, "clean")
        stopped = await cluster(silent, "silent")
        await called(client, keys, "clean")
        await called(client, keys, "silent")
        # A live node's inbox outlives its lease between renewals: it is there after several.
        await asyncio.sleep(TTL)
        assert await client.exists(keys.inbox("clean"), keys.inbox("silent")) == 2
        await node.aclose()
        assert await client.exists(keys.inbox("clean")) == 0
        await stopped.aclose(deregister=False)  # as if killed: nothing deleted
        left = int(await client.pttl(keys.inbox("silent")))
        assert 0 < left <= 2 * TTL * 1000

        async def gone() -> bool:
            return await client.exists(keys.inbox("silent")) == 0

        await until(gone, timeout=10, what="the silent node's inbox expired")
    finally:
        await client.aclose()


async def test_a_worker_leaving_deletes_its_inbox(redis_url: str, prefix: str) -> None:
    keys = Keys(prefix)
    client = redis.Redis.from_url(redis_url)
    try:
        async with await RemoteWorker.connect(
            redis_url, worker_id="w1", prefix=prefix, lease_ttl_s=TTL
        ) as worker:
            worker.serve("util:echo:w1", [Capability(name="echo", input_schema={"type": "object"})], echo)
            await called(client, keys, "w1")
        assert await client.exists(keys.inbox("w1")) == 0
    finally:
        await client.aclose()


async def consumers(client: redis.Redis, keys: Keys) -> dict[str, int]:
    """The task group's consumers, with their pending entries."""
    found = await client.xinfo_consumers(keys.task_queue, keys.task_group)
    return {info["name"].decode(): int(info["pending"]) for info in found}


async def test_a_node_leaving_drops_its_consumer_unless_tasks_are_pending_for_it(
    cluster: Join, redis_url: str, prefix: str
) -> None:
    keys = Keys(prefix)
    client = redis.Redis.from_url(redis_url)
    held = asyncio.Event()
    started = asyncio.Event()

    async def hold(text: str) -> str:
        if text == "hold":
            started.set()
            await held.wait()
        return text

    try:
        routers = {name: Router() for name in ("idle", "busy")}
        for name, router in routers.items():
            capability = Capability(name=f"work_{name}", input_schema={"type": "object"})
            router.register(FunctionAgent(hold, agent_id=f"util:work:{name}", capabilities=[capability]))
        idle = await cluster(routers["idle"], "idle")
        busy = await cluster(routers["busy"], "busy")
        done = await routers["idle"].submit("work_idle", {"text": "quick"})
        assert (await routers["idle"].wait(done.task_id, timeout=10)).status is TaskStatus.OK
        await routers["busy"].submit("work_busy", {"text": "hold"})
        async with asyncio.timeout(10):
            await started.wait()
        assert set(await consumers(client, keys)) >= {"idle", "busy"}
        await idle.aclose()
        await busy.aclose()  # cuts its run: the entry stays pending, for another node to take over
        assert await consumers(client, keys) == {"busy": 1}
    finally:
        held.set()
        await client.aclose()
