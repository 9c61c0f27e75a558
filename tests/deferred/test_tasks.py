"""Deferred async tasks in one process (issue 17, item 5): ``router.submit(..., defer=True)`` is
``deferred`` while it waits for a capable agent, then runs when one comes; it holds no worker
meanwhile, and cancelling it ends it as never run."""

from __future__ import annotations

from typing import Any

import pytest

from middleware import Fault
from reach_adapters import Router, RoutingPolicy, TaskStatus
from tests.deferred.conftest import recorder, waiting
from tests.waiting import eventually, until

pytestmark = pytest.mark.timeout(30)


async def status_is(router: Router, task_id: str, status: TaskStatus) -> bool:
    return (await router.task(task_id)).status is status


async def test_a_deferred_task_shows_deferred_and_runs_when_an_agent_registers(router: Router) -> None:
    task = await router.submit("translate", {"text": "hallo"}, defer=True)
    await until(lambda: status_is(router, task.task_id, TaskStatus.DEFERRED), what="the task deferred")
    assert (await router.wait(task.task_id, timeout=0.05)).status is TaskStatus.DEFERRED

    seen: list[Any] = []
    router.register(recorder("lang:translate:01", "translate", seen))
    done = await router.wait(task.task_id, timeout=10)

    assert done.status is TaskStatus.OK
    assert done.result is not None
    assert done.result.payload == {"agent": "lang:translate:01", "payload": {"text": "hallo"}}
    assert seen == [{"text": "hallo"}]
    assert router.explain(task.task_id).deferred_ms is not None


async def test_a_deferred_task_holds_no_worker() -> None:
    async with Router(RoutingPolicy(task_workers=1)) as router:
        router.register(recorder("util:echo:01", "echo", []))
        parked = await router.submit("translate", {"text": "hallo"}, defer=True)
        await until(lambda: status_is(router, parked.task_id, TaskStatus.DEFERRED), what="the task deferred")

        echoed = await router.submit("echo", {"text": "hi"})
        done = await router.wait(echoed.task_id, timeout=10)

        assert done.status is TaskStatus.OK
        assert (await router.task(parked.task_id)).status is TaskStatus.DEFERRED


async def test_cancelling_a_deferred_task_ends_it_as_never_run(router: Router) -> None:
    task = await router.submit("translate", {"text": "hallo"}, defer=True)
    await until(lambda: status_is(router, task.task_id, TaskStatus.DEFERRED), what="the task deferred")

    cancelled = await router.cancel(task.task_id)

    assert cancelled.status is TaskStatus.CANCELLED
    assert cancelled.result is not None
    assert cancelled.result.fault is Fault.CALLER
    assert not cancelled.result.delivered
    assert "before it ran" in (cancelled.result.error or "")
    await eventually(lambda: waiting(router) == 0, what="the deferred queue emptied")
    assert router.async_tasks.running == 0


async def test_a_deferred_task_no_agent_comes_for_ends_timeout() -> None:
    async with Router(RoutingPolicy(defer_timeout_s=0.3)) as router:
        task = await router.submit("translate", {"text": "hallo"}, defer=True)

        done = await router.wait(task.task_id, timeout=10)

        assert done.status is TaskStatus.TIMEOUT
        assert done.result is not None
        assert "waited deferred" in (done.result.error or "")
