"""Durable async tasks on a real redis-server: several Routers in this process, each a node with
its own Redis connection and `ClusterTasks`, sharing one queue under the test's key prefix."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import redis.asyncio as redis
from langchain_core.runnables import RunnableLambda

from reach_adapters import Capability, FunctionAgent, Router, RoutingPolicy
from reach_adapters.cluster import Keys, NodeStats
from reach_adapters.cluster.takeover import DEAD_LETTER, OUTCOME_UNKNOWN
from reach_adapters.cluster.tasks import ClusterTasks
from reach_adapters.errors import IdempotencyConflictError, UnknownTaskError
from reach_adapters.langchain import LangChainAgent
from reach_adapters.router.tasks import TaskRecord, TaskStatus
from tests.redis_server import node_client
from tests.waiting import eventually, until

VISIBILITY = 1.0  # short, so a node taken for dead is found out quickly


class Counter:
    """An agent that counts its calls (its effect), and can be held mid-run."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.release = asyncio.Event()
        self.hold = False

    async def __call__(self, text: str) -> str:
        self.calls.append(text)
        if self.hold:
            await self.release.wait()
        return text.upper()


def counting_router(counter: Counter, agent_id: str, *, idempotent: bool = False, **policy: Any) -> Router:
    router = Router(RoutingPolicy(**policy))
    capability = Capability(name="count", idempotent=idempotent)
    router.register(FunctionAgent(counter, agent_id=agent_id, capabilities=[capability]))
    return router


Start = Callable[..., Awaitable[ClusterTasks]]


@pytest.fixture
async def start(redis_url: str, prefix: str) -> AsyncIterator[Start]:
    """Start a node's task runner; every router given is closed at the end."""
    clients: list[redis.Redis] = []
    routers: list[Router] = []

    async def started(router: Router, node_id: str, *, take: bool = True, **options: Any) -> ClusterTasks:
        """`take=False`: the node reads, waits for and cancels tasks, but runs none."""
        client = node_client(redis_url)
        clients.append(client)
        routers.append(router)
        options.setdefault("visibility_timeout_s", VISIBILITY)
        if take:
            return await ClusterTasks.start(router, client, node_id=node_id, keys=Keys(prefix), **options)
        runner = ClusterTasks(router, client, node_id=node_id, keys=Keys(prefix), **options)
        await router.use_task_runner(runner)
        return runner

    yield started
    for router in routers:
        await router.aclose()
    for client in clients:
        await client.aclose()


async def test_a_task_submitted_on_one_node_is_read_and_awaited_on_another(start: Start) -> None:
    one, two = counting_router(Counter(), "util:count:1"), counting_router(Counter(), "util:count:2")
    await start(one, "n1")
    await start(two, "n2")
    task = await one.submit("count", {"text": "hi"})
    assert task.status is TaskStatus.QUEUED
    done = await two.wait(task.task_id, timeout=10)
    assert done.status is TaskStatus.OK
    assert done.result is not None
    assert done.result.payload == "HI"
    assert (await one.task(task.task_id)).status is TaskStatus.OK
    listed = await two.list_tasks()
    assert [t.task_id for t in listed] == [task.task_id]


async def test_one_task_id_on_two_nodes_runs_once_and_another_payload_is_refused(start: Start) -> None:
    counter = Counter()
    one, two = counting_router(counter, "util:count:1"), counting_router(counter, "util:count:2")
    await start(one, "n1")
    await start(two, "n2")
    first, second = await asyncio.gather(
        one.submit("count", {"text": "once"}, task_id="t-1"),
        two.submit("count", {"text": "once"}, task_id="t-1"),
    )
    assert first.task_id == second.task_id == "t-1"
    assert (await one.wait("t-1", timeout=10)).status is TaskStatus.OK
    assert counter.calls == ["once"]
    with pytest.raises(IdempotencyConflictError, match="payload differ"):
        await two.submit("count", {"text": "other"}, task_id="t-1")


@pytest.mark.parametrize("idempotent", [True, False])
async def test_a_node_dying_mid_run_has_its_task_taken_over(start: Start, idempotent: bool) -> None:
    held, fresh = Counter(), Counter()
    held.hold = True
    one = counting_router(held, "util:count:1", idempotent=idempotent)
    two = counting_router(fresh, "util:count:2", idempotent=idempotent)
    tasks_one = await start(one, "n1")
    task = await one.submit("count", {"text": "work"})
    await eventually(lambda: held.calls == ["work"], timeout=10, what="node 1 running the task")
    stats = NodeStats()
    await start(two, "n2", stats=stats)  # joins only now, so node 1 took the task
    # Node 1 dies: its workers stop without a word to Redis, the entry stays pending to it.
    await tasks_one.aclose()
    done = await two.wait(task.task_id, timeout=15)
    assert stats.tasks_reclaimed == 1
    assert done.result is not None
    if idempotent:
        assert done.status is TaskStatus.OK
        assert fresh.calls == ["work"]
        assert stats.tasks_redelivered == 1
    else:
        assert (done.status, done.result.error_type) == (TaskStatus.ERROR, OUTCOME_UNKNOWN)
        assert done.result.delivered is True
        assert "not safe to repeat" in (done.result.error or "")
        assert fresh.calls == []  # never run twice: its effect happened once, on node 1
        # Counted once the finish is written: the done event may wake the wait first.
        await eventually(lambda: stats.tasks_outcome_unknown == 1, timeout=10, what="the outcome counted")


async def test_a_task_past_its_deliveries_is_dead_lettered_and_listed(start: Start) -> None:
    held = Counter()
    held.hold = True
    one = counting_router(held, "util:count:1", idempotent=True)
    tasks_one = await start(one, "n1", max_deliveries=1)
    task = await one.submit("count", {"text": "poison"}, principal="alice")
    await eventually(lambda: held.calls == ["poison"], timeout=10, what="node 1 running the task")
    stats = NodeStats()
    two = counting_router(Counter(), "util:count:2", idempotent=True)
    await start(two, "n2", stats=stats, max_deliveries=1)
    await tasks_one.aclose()
    done = await two.wait(task.task_id, timeout=15)
    assert done.result is not None
    assert (done.status, done.result.error_type) == (TaskStatus.ERROR, DEAD_LETTER)
    # The done event may wake the wait before node 2 has the script's reply, and counts it.
    await eventually(lambda: stats.tasks_dead_lettered == 1, timeout=10, what="the dead letter counted")
    letters = await two.dead_letters()
    assert [(letter["task_id"], letter["deliveries"]) for letter in letters] == [(task.task_id, 2)]
    assert "principal" not in letters[0]
    await eventually(lambda: stats.dead_letters_kept == 1, timeout=10, what="dead letters counted")


async def test_cancel_from_another_node_queued_and_running(start: Start) -> None:
    held = Counter()
    held.hold = True
    one = counting_router(held, "util:count:1", task_workers=1)
    two = counting_router(Counter(), "util:count:2")
    await start(one, "n1")
    running = await one.submit("count", {"text": "long"})
    await eventually(lambda: held.calls == ["long"], timeout=10, what="the first task running")
    queued = await one.submit("count", {"text": "later"})
    await start(two, "n2", take=False)
    cancelled = await two.cancel(queued.task_id)
    assert cancelled.status is TaskStatus.CANCELLED
    assert cancelled.result is not None
    assert cancelled.result.delivered is False
    stopped = await two.cancel(running.task_id)
    assert stopped.status is TaskStatus.CANCELLED
    assert stopped.result is not None
    assert stopped.result.delivered is True
    # The node that ran it names the agent that may have done the work, as one router does.
    assert (stopped.result.agent_id, stopped.result.attempts) == ("util:count:1", 1)
    assert "while agent util:count:1 ran it" in (stopped.result.error or "")
    # The cancelled queued task never runs once node 1 has a free worker.
    await asyncio.sleep(0.3)
    assert held.calls == ["long"]


async def test_results_are_kept_for_task_result_ttl_s(start: Start, redis_url: str, prefix: str) -> None:
    one = counting_router(Counter(), "util:count:1", task_result_ttl_s=0.5)
    await start(one, "n1")
    task = await one.submit("count", {"text": "brief"})
    assert (await one.wait(task.task_id, timeout=10)).status is TaskStatus.OK
    client = redis.Redis.from_url(redis_url)
    try:
        assert 0 < await client.pttl(Keys(prefix).task(task.task_id)) <= 500
        async with asyncio.timeout(10):
            while await client.exists(Keys(prefix).task(task.task_id)):
                await asyncio.sleep(0.05)
    finally:
        await client.aclose()
    assert await one.list_tasks() == []


async def test_the_callback_is_sent_once_by_the_node_that_finished_the_task(start: Start) -> None:
    sent: list[tuple[str, str, TaskStatus]] = []
    nodes = {}
    for name in ("n1", "n2"):
        router = counting_router(Counter(), f"util:count:{name}")
        runner = await start(router, name)

        async def notifier(record: TaskRecord, node: str = name) -> None:
            sent.append((node, record.task_id, record.status))

        runner.notifier = notifier
        nodes[name] = router
    task = await nodes["n1"].submit("count", {"text": "call me"}, callback_url="http://127.0.0.1:9/hook")
    assert (await nodes["n2"].wait(task.task_id, timeout=10)).status is TaskStatus.OK
    await eventually(lambda: len(sent) == 1, timeout=10, what="the callback")
    await asyncio.sleep(0.2)
    assert [(task_id, status) for _, task_id, status in sent] == [(task.task_id, TaskStatus.OK)]


async def test_a_task_for_a_langchain_agent_is_its_input_after_redis_not_an_answer(start: Start) -> None:
    # A record read back from Redis once marked `resume` as set: the agent took the task for the
    # answer to a question it never asked ("nothing to resume").
    def shout(text: str) -> str:
        return text.upper()

    router = Router()
    router.register(LangChainAgent(RunnableLambda(shout), agent_id="util:shout:01"))
    await start(router, "n1")
    task = await router.submit("shout", "hi")
    done = await router.wait(task.task_id, timeout=10)
    assert done.status is TaskStatus.OK, done.result
    assert done.result is not None
    assert done.result.payload == "HI"


async def test_a_wait_on_another_node_sees_only_its_principals_tasks(start: Start) -> None:
    counter = Counter()
    counter.hold = True
    one, two = counting_router(counter, "util:count:1"), counting_router(Counter(), "util:count:2")
    await start(one, "n1")
    # The runner itself: without a security guard, a router lets every principal see every task.
    runner = await start(two, "n2", take=False)
    task = await one.submit("count", {"text": "mine"}, principal="alice")
    await eventually(lambda: counter.calls == ["mine"])
    with pytest.raises(UnknownTaskError):
        await runner.wait(task.task_id, "bob", 0.1)
    with pytest.raises(UnknownTaskError):
        await runner.wait("no-such-task", None, 0.1)
    running = await runner.wait(task.task_id, "alice", 0.1)
    assert running.status is TaskStatus.RUNNING
    waiting = asyncio.ensure_future(runner.wait(task.task_id, "alice", 10))
    counter.release.set()
    done = await waiting
    assert done.status is TaskStatus.OK
    assert (await runner.wait(task.task_id, "alice", 0.1)).status is TaskStatus.OK
    with pytest.raises(UnknownTaskError):
        await runner.wait(task.task_id, "bob", 0.1)


async def test_entries_without_a_task_id_are_dropped_and_tasks_still_run(
    start: Start, redis_url: str, prefix: str
) -> None:
    """Something else than a node wrote to the queue: entries left pending to a consumer that went
    away, and one read fresh. Neither stalls the node's reader or its take-overs."""
    keys = Keys(prefix)
    counter = Counter()
    client = redis.Redis.from_url(redis_url)
    try:
        await client.xgroup_create(keys.task_queue, keys.task_group, id="0", mkstream=True)
        await client.xadd(keys.task_queue, {"note": "not a task"})
        await client.xadd(keys.task_queue, {"note": "not one either"})
        assert await client.xreadgroup(keys.task_group, "ghost", {keys.task_queue: ">"}, count=2)
        router = counting_router(counter, "util:count:1", idempotent=True)
        await start(router, "n1")
        await client.xadd(keys.task_queue, {"note": "fresh, read by the node"})
        task = await router.submit("count", {"text": "real"})
        done = await router.wait(task.task_id, timeout=10)
        assert done.status is TaskStatus.OK
        assert counter.calls == ["real"]

        async def cleared() -> bool:
            pending = await client.xpending(keys.task_queue, keys.task_group)
            return await client.xlen(keys.task_queue) == 0 and pending["pending"] == 0

        # The ghost's entries are taken over once idle past the visibility timeout, and dropped.
        await until(cleared, timeout=10, what="the foreign entries dropped")
    finally:
        await client.aclose()
