"""Cancelling an async task on one node compensates the call its agent runs on another node."""

from __future__ import annotations

import asyncio

from reach_adapters import FunctionAgent, Router
from reach_adapters.cluster import ClusterNode
from reach_adapters.router import ReachMessage
from reach_adapters.router.tasks import TaskStatus
from tests.cluster.conftest import Join, cap, listed
from tests.waiting import eventually


async def test_a_task_cancelled_on_one_node_is_compensated_by_its_agent_on_another(cluster: Join) -> None:
    undone: list[ReachMessage] = []
    started = asyncio.Event()

    async def charge(amount: int) -> str:
        started.set()
        await asyncio.sleep(30)
        return "charged"

    async def refund(message: ReachMessage) -> None:
        undone.append(message)

    a, b = Router(), Router()
    capability = cap("charge", compensable=True)
    b.register(FunctionAgent(charge, agent_id="pay:charge:01", capabilities=[capability], compensate=refund))
    await cluster(a, "a")
    await cluster(b, "b")
    await listed(a, "pay:charge:01")
    task = await a.submit("charge", {"amount": 3})
    async with asyncio.timeout(10):
        await started.wait()
    assert (await a.cancel(task.task_id)).status is TaskStatus.CANCELLED
    await eventually(lambda: len(undone) == 1, timeout=10, what="the compensation on node b")
    assert undone[0].meta_info.task_id == task.task_id


async def test_a_run_lost_to_another_node_is_abandoned_not_compensated(redis_url: str, prefix: str) -> None:
    booked: set[str] = set()
    runs: list[str] = []

    async def book(seat: str) -> str:
        runs.append(seat)
        booked.add(seat)
        if len(runs) == 1:
            await asyncio.sleep(30)  # the first run, on b, hangs
        return "booked"

    async def unbook(message: ReachMessage) -> None:
        booked.discard(str(message.raw_payload["seat"]))  # type: ignore[index,call-overload]

    capability = cap("book", idempotent=True, compensable=True, timeout_ms=60_000)
    b, c = Router(), Router()
    b.register(FunctionAgent(book, agent_id="t:book:b", capabilities=[capability], compensate=unbook))
    c.register(FunctionAgent(book, agent_id="t:book:c", capabilities=[capability], compensate=unbook))
    options = {"lease_ttl_s": 1.2, "prefix": prefix, "task_visibility_timeout_s": 0.6}
    node_b = await ClusterNode.join(b, redis_url, node_id="b", **options)  # type: ignore[arg-type]
    node_c = None
    try:
        task = await b.submit("book", {"seat": "12A"})
        await eventually(lambda: len(runs) == 1, timeout=10, what="b's run")
        # b's keeper falls silent, as in a long pause: c takes the task over and runs it again.
        keeper = next(loop for loop in node_b.tasks._workers._loops if "keeper" in loop.get_name())  # type: ignore[union-attr]
        keeper.cancel()
        node_c = await ClusterNode.join(c, redis_url, node_id="c", **options)  # type: ignore[arg-type]
        assert (await c.wait(task.task_id, timeout=10)).status is TaskStatus.OK
        # b wakes: it drops its run, which must leave c's booking alone.
        await node_b.tasks._workers._refresh_own()  # type: ignore[union-attr]
        await asyncio.sleep(0.3)
        assert booked == {"12A"}
    finally:
        for node in (node_b, node_c):
            if node is not None:
                await node.aclose()
        await b.aclose()
        await c.aclose()
