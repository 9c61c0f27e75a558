"""A cancelled call to a `compensable` capability runs its agent's ``compensate(message)``."""

from __future__ import annotations

import asyncio

import pytest

from reach_adapters import Capability, FunctionAgent, Router
from reach_adapters.router import ReachMessage
from reach_adapters.router.tasks import TaskStatus
from tests.waiting import eventually


def charging(compensable: bool, undone: list[ReachMessage], started: asyncio.Event) -> FunctionAgent:
    async def charge(amount: int) -> str:
        started.set()
        await asyncio.sleep(30)
        return "charged"

    async def refund(message: ReachMessage) -> None:
        undone.append(message)

    capability = Capability(name="charge", compensable=compensable)
    return FunctionAgent(charge, agent_id="pay:charge:01", capabilities=[capability], compensate=refund)


@pytest.mark.parametrize("compensable", [True, False])
async def test_a_cancelled_call_is_compensated_only_when_compensable(compensable: bool) -> None:
    undone: list[ReachMessage] = []
    started = asyncio.Event()
    async with Router() as router:
        router.register(charging(compensable, undone, started))
        call = asyncio.get_running_loop().create_task(router.route("charge", {"amount": 5}, task_id="pay-1"))
        async with asyncio.timeout(10):
            await started.wait()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await asyncio.sleep(0.05)
    if compensable:
        assert [(m.meta_info.task_id, m.raw_payload) for m in undone] == [("pay-1", {"amount": 5})]
    else:
        assert undone == []


async def test_cancelling_a_running_async_task_compensates_it() -> None:
    undone: list[ReachMessage] = []
    started = asyncio.Event()
    async with Router() as router:
        router.register(charging(True, undone, started))
        task = await router.submit("charge", {"amount": 7})
        async with asyncio.timeout(10):
            await started.wait()
        cancelled = await router.cancel(task.task_id)
        assert cancelled.status is TaskStatus.CANCELLED
        await eventually(lambda: len(undone) == 1, timeout=5, what="the compensation")
    assert undone[0].meta_info.task_id == task.task_id


async def test_a_failing_compensation_is_logged_not_raised(caplog: pytest.LogCaptureFixture) -> None:
    started = asyncio.Event()

    async def slow(amount: int) -> str:
        started.set()
        await asyncio.sleep(30)
        return "charged"

    def broken(message: ReachMessage) -> None:
        msg = "ledger unavailable"
        raise RuntimeError(msg)

    agent = FunctionAgent(
        slow,
        agent_id="pay:charge:01",
        capabilities=[Capability(name="charge", compensable=True)],
        compensate=broken,
    )
    async with Router() as router:
        router.register(agent)
        call = asyncio.get_running_loop().create_task(router.route("charge", {"amount": 1}))
        async with asyncio.timeout(10):
            await started.wait()
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        await eventually(lambda: "compensation of task" in caplog.text, timeout=5, what="the logged failure")
    assert "ledger unavailable" in caplog.text
