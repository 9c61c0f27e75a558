"""The cluster with its Redis URL naming the protocol, as redis-py lets it (``?protocol=2`` or
``?protocol=3``); every other cluster test leaves it to redis-py's default (RESP3 on the wire
since redis-py 8, its replies parsed into RESP2's shapes). Named, it changes the shape of replies:
the raw ones of direct connections follow the wire (RESP2's lists, RESP3's maps), and with
``protocol=3`` the client parses some into RESP3's shapes (a map of streams for XREADGROUP).
The cluster works the same under each."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import orjson
import pytest
import redis.asyncio as redis

from middleware import ReachMessage
from reach_adapters import FunctionAgent, Router
from reach_adapters.cluster import Keys, RemoteWorker
from reach_adapters.cluster.survey import survey
from reach_adapters.errors import IdempotencyConflictError
from reach_adapters.router import ReachResult, ResultStatus
from reach_adapters.router.tasks import TaskStatus
from reach_adapters.security.quotas import Quotas
from reach_adapters.security.spec import PrincipalSpec
from tests.cluster.conftest import TTL, Join, cap, listed, listened, running, shout_agent, shout_keeps_ids
from tests.waiting import eventually, until


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def url(request: pytest.FixtureRequest, redis_url: str) -> str:
    return f"{redis_url}{'&' if '?' in redis_url else '?'}protocol={request.param}"


@pytest.fixture
async def client(url: str) -> AsyncIterator[redis.Redis]:
    client = redis.Redis.from_url(url)
    yield client
    await client.aclose()


def upper(text: str) -> str:
    return text.upper()


async def test_a_task_is_taken_at_once_run_on_another_node_and_awaited(cluster: Join, url: str) -> None:
    a, b = Router(), Router()
    b.register(FunctionAgent(upper, agent_id="util:upper:01", capabilities=[cap("upper")]))
    node_a = await cluster(a, "a", url)
    node_b = await cluster(b, "b", url)
    await listed(a, "util:upper:01")
    task = await a.submit("upper", {"text": "hi"}, task_id="t-1")
    done = await a.wait(task.task_id, timeout=10)
    assert (done.status, done.result and done.result.payload) == (TaskStatus.OK, "HI")
    # Read by a node's task reader as soon as queued: not left for a take-over after the
    # visibility timeout (30 s here), which is all that ran it when the reader failed.
    stats = (node_a.stats, node_b.stats)
    assert sum(s.tasks_run for s in stats) == 1
    assert sum(s.tasks_reclaimed for s in stats) == 0
    assert (await b.submit("upper", {"text": "hi"}, task_id="t-1")).status is TaskStatus.OK
    with pytest.raises(IdempotencyConflictError):
        await b.submit("upper", {"text": "other"}, task_id="t-1")


async def test_a_wait_is_woken_by_the_done_event(
    cluster: Join, url: str, prefix: str, client: redis.Redis
) -> None:
    release = asyncio.Event()

    async def held(text: str) -> str:
        await release.wait()
        return text

    a = Router()
    a.register(FunctionAgent(held, agent_id="util:held:01", capabilities=[cap("held")]))
    await cluster(a, "a", url)
    task = await a.submit("held", {"text": "hi"})
    await until(lambda: running(a, task.task_id), timeout=10, what="the task running")
    channel = Keys(prefix).task_events
    await until(lambda: listened(client, channel), timeout=10, what="the node listening to task events")
    waiting = asyncio.create_task(a.wait(task.task_id, timeout=30))
    # The record in Redis stays running (the agent is held): only the event can end the wait.
    result = ReachResult(status=ResultStatus.OK, payload="from the event", task_id=task.task_id)
    finished = (await a.task(task.task_id)).model_copy(update={"status": TaskStatus.OK, "result": result})
    event = {"op": "done", "task_id": task.task_id, "record": orjson.loads(finished.model_dump_json())}
    await asyncio.sleep(0)  # the wait listens from its first step
    await client.publish(channel, orjson.dumps(event))
    record = await asyncio.wait_for(waiting, 10)
    release.set()
    assert record.result is not None
    assert record.result.payload == "from the event"


async def test_calls_reach_another_nodes_agent_and_a_workers(cluster: Join, url: str, prefix: str) -> None:
    seen: list[ReachMessage] = []

    a, b = Router(), Router()
    b.register(shout_agent(seen))
    await cluster(a, "a", url)
    await cluster(b, "b", url)
    async with await RemoteWorker.connect(url, worker_id="w1", prefix=prefix, lease_ttl_s=TTL) as worker:
        worker.serve("util:upper:01", [cap("upper")], lambda payload: upper(payload["text"]))
        await listed(a, "util:shout:01")
        await listed(a, "util:upper:01")
        await shout_keeps_ids(a, seen)
        assert (await a.route("upper", {"text": "abc"})).payload == "ABC"
    await eventually(lambda: "util:upper:01" not in a, timeout=10, what="the worker's agent dropped")


async def test_leases_catalog_survey_and_quotas(
    cluster: Join, url: str, prefix: str, client: redis.Redis
) -> None:
    a, b = Router(), Router()
    b.register(FunctionAgent(upper, agent_id="util:upper:01", capabilities=[cap("upper")]))
    await cluster(a, "a", url)
    await cluster(b, "b", url)
    await listed(a, "util:upper:01")
    assert await client.pttl(Keys(prefix).lease("b", "util:upper:01")) > 0
    found = await survey(url, prefix=prefix)
    assert [(n.node_id, [agent.record.agent_id for agent in n.agents]) for n in found.nodes] == [
        ("b", ["util:upper:01"])
    ]
    # The queue's group found in XINFO GROUPS' reply: its lag is known (None when it is not).
    assert found.queue is not None
    assert (found.queue.length, found.queue.lag) == (0, 0)
    await b.deregister("util:upper:01", drain_timeout=0)
    await eventually(lambda: "util:upper:01" not in a, timeout=10, what="the agent dropped on node a")
    spec = PrincipalSpec.model_validate({"token_sha256": "0" * 64, "quota_per_minute": 2})
    one, two = Quotas.shared(url, prefix), Quotas.shared(url, prefix)
    assert [await quotas.take("bob", spec) is None for quotas in (one, two, one)] == [True, True, False]
