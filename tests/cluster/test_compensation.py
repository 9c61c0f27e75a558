"""Cancelling an async task on one node compensates the call its agent runs on another node."""

from __future__ import annotations

import asyncio

from reach_adapters import FunctionAgent, Router
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
