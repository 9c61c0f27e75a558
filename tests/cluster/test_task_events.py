"""What a task's queue entry and its done event carry, so that a worker and a wait need no read
of their own: the entry the record as queued, the done event the finished record. Entries and
events without them (from nodes of an older release) still work, by a read from Redis."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, cast

import orjson
import pytest
import redis.asyncio as redis

from reach_adapters import Capability, FunctionAgent, Router
from reach_adapters.cluster import Keys
from reach_adapters.cluster.tasks import ClusterTasks
from reach_adapters.cluster.taskstore import done_event
from reach_adapters.router import ReachResult, ResultStatus
from reach_adapters.router.tasks import TaskRecord, TaskStatus
from tests.cluster.conftest import listened, running
from tests.redis_server import node_client
from tests.waiting import until

pytestmark = pytest.mark.timeout(60)


def echo_router() -> Router:
    async def echo(text: str) -> str:
        return text

    router = Router()
    router.register(FunctionAgent(echo, agent_id="util:echo:1", capabilities=[Capability(name="echo")]))
    return router


@pytest.fixture
async def client(redis_url: str) -> AsyncIterator[redis.Redis]:
    client = node_client(redis_url)
    yield client
    await client.aclose()


@pytest.fixture
async def routers() -> AsyncIterator[list[Router]]:
    routers: list[Router] = []
    yield routers
    for router in routers:
        await router.aclose()


async def node(routers: list[Router], redis_url: str, prefix: str, node_id: str, *, take: bool) -> Router:
    """A node's router; `take=False`: it submits and waits, but runs no task."""
    router = echo_router()
    routers.append(router)
    client = node_client(redis_url)
    keys = Keys(prefix)
    if take:
        await ClusterTasks.start(router, client, node_id=node_id, keys=keys, visibility_timeout_s=1.0)
    else:
        await router.use_task_runner(ClusterTasks(router, client, node_id=node_id, keys=keys))
    return router


async def test_the_entry_carries_the_queued_record_and_the_done_event_the_finished_one(
    client: redis.Redis, routers: list[Router], redis_url: str, prefix: str
) -> None:
    keys = Keys(prefix)
    submitter = await node(routers, redis_url, prefix, "n1", take=False)
    async with client.pubsub() as pubsub:
        await pubsub.subscribe(keys.task_events)
        task = await submitter.submit("echo", {"text": "hi"})
        [(_, fields)] = await entries(client, keys)
        assert TaskRecord.model_validate_json(fields[b"r"]).status is TaskStatus.QUEUED
        await node(routers, redis_url, prefix, "n2", take=True)
        assert (await submitter.wait(task.task_id, timeout=10)).status is TaskStatus.OK

        message: dict[str, Any] | None = None
        async with asyncio.timeout(10):
            while message is None:
                message = await pubsub.get_message(ignore_subscribe_messages=True, timeout=1.0)
        event = orjson.loads(message["data"])
    assert event["op"] == "done"
    assert event["task_id"] == task.task_id
    carried = TaskRecord.model_validate(event["record"])
    assert carried.status is TaskStatus.OK
    assert carried.result is not None
    assert carried.result.payload == "hi"


async def test_a_wait_answers_from_the_record_the_done_event_carries(
    client: redis.Redis, routers: list[Router], redis_url: str, prefix: str
) -> None:
    keys = Keys(prefix)
    router, release = await held_node(routers, redis_url, prefix)
    task = await router.submit("held", {"text": "hi"})
    await until(lambda: running(router, task.task_id), what="the task running")
    await until(lambda: listened(client, keys.task_events), what="the node listening to task events")
    waiting = asyncio.create_task(router.wait(task.task_id, timeout=30))
    await asyncio.sleep(0)  # the wait listens from its first step
    # The record in Redis stays running (the agent is held): an event without a record only makes
    # the wait read it again; one with a finished record ends the wait with that record.
    await client.publish(keys.task_events, orjson.dumps({"op": "done", "task_id": task.task_id}))
    result = ReachResult(status=ResultStatus.OK, payload="from the event", task_id=task.task_id)
    finished = (await router.task(task.task_id)).model_copy(
        update={"status": TaskStatus.OK, "result": result}
    )
    event = {"op": "done", "task_id": task.task_id, "record": orjson.loads(finished.model_dump_json())}
    await client.publish(keys.task_events, orjson.dumps(event))
    record = await asyncio.wait_for(waiting, 10)
    release.set()
    assert record.status is TaskStatus.OK
    assert record.result is not None
    assert record.result.payload == "from the event"


async def test_an_entry_without_its_record_is_run_from_the_record_in_redis(
    client: redis.Redis, routers: list[Router], redis_url: str, prefix: str
) -> None:
    keys = Keys(prefix)
    submitter = await node(routers, redis_url, prefix, "n1", take=False)
    task = await submitter.submit("echo", {"text": "old"})
    [(entry_id, _)] = await entries(client, keys)
    await client.xdel(keys.task_queue, entry_id)
    await client.xadd(keys.task_queue, {"t": task.task_id})
    await node(routers, redis_url, prefix, "n2", take=True)
    record = await submitter.wait(task.task_id, timeout=10)
    assert record.status is TaskStatus.OK
    assert record.result is not None
    assert record.result.payload == "old"


async def held_node(routers: list[Router], redis_url: str, prefix: str) -> tuple[Router, asyncio.Event]:
    """Node n1, taking tasks, with a `held` capability that answers once the event is set."""
    release = asyncio.Event()

    async def held(text: str) -> str:
        await release.wait()
        return text

    router = await node(routers, redis_url, prefix, "n1", take=True)
    router.register(FunctionAgent(held, agent_id="util:held:1", capabilities=[Capability(name="held")]))
    return router, release


async def entries(client: redis.Redis, keys: Keys) -> list[tuple[bytes, dict[bytes, bytes]]]:
    return cast("list[tuple[bytes, dict[bytes, bytes]]]", await client.xrange(keys.task_queue))


async def test_a_wait_for_a_task_submitted_here_whose_done_event_was_lost_still_ends(
    client: redis.Redis, routers: list[Router], redis_url: str, prefix: str
) -> None:
    """A node waits for the tasks it accepted on their done events alone, but polls Redis too."""
    keys = Keys(prefix)
    router, release = await held_node(routers, redis_url, prefix)
    await until(lambda: listened(client, keys.task_events), what="the node listening to task events")
    task = await router.submit("held", {"text": "hi"})
    await until(lambda: running(router, task.task_id), what="the task running")
    # Finished behind the node's back, without a done event (as if it had been lost).
    result = ReachResult(status=ResultStatus.OK, payload="finished elsewhere", task_id=task.task_id)
    finished = (await router.task(task.task_id)).model_copy(
        update={"status": TaskStatus.OK, "result": result}
    )
    await client.set(keys.task(task.task_id), finished.model_dump_json())
    record = await router.wait(task.task_id, timeout=10)
    release.set()
    assert record.status is TaskStatus.OK
    assert record.result is not None
    assert record.result.payload == "finished elsewhere"


@pytest.mark.parametrize("task_id", ["t1", 'a"b', "ends\\", '","record":{}', "ü/ü"])
def test_a_done_event_is_read_without_decoding_its_record(task_id: str) -> None:
    record = b'{"task_id":"x","status":"ok"}'
    data = b'{"op":"done","task_id":' + orjson.dumps(task_id) + b',"record":' + record + b"}"
    assert done_event(data) == (task_id, record)
    assert done_event(orjson.dumps({"op": "cancel", "task_id": task_id})) is None
    assert done_event(orjson.dumps({"op": "done", "task_id": task_id})) is None
