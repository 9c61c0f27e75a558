"""Async tasks (issue 15, item 4) in one process: submit answers at once, the task runs in the
background within the policy's bounds, and is polled, awaited, cancelled, listed and forgotten."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from middleware import Fault, ResultStatus
from reach_adapters import (
    Capability,
    FunctionAgent,
    IdempotencyConflictError,
    InvalidMessageError,
    MemoryTaskStore,
    Router,
    RoutingPolicy,
    TaskFinishedError,
    TaskQueueFullError,
    TaskStatus,
    UnknownTaskError,
)
from reach_adapters.router import Guard, Refusal
from tests.core.conftest import FAST, Gate, echo_agent
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(30)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Owners(Guard):
    """Lets everyone reach everything; 'root' sees every caller's tasks."""

    async def admit(self, message: Any, calling_agent: str | None) -> Refusal | None:
        return None

    def forbids(self, principal: str, capability: str, agent_id: str, namespace: str) -> str | None:
        return None

    async def fan_out(self, principal: str, targets: int) -> Refusal | None:
        return None

    def sees_all(self, principal: str) -> bool:
        return principal == "root"

    def hop_token(self, meta: Any, agent_id: str, target: str) -> str | None:
        return None


async def test_submit_answers_at_once_and_the_task_runs_in_the_background(router: Router) -> None:
    gate = Gate("work:gate:01")
    router.register(gate.agent)
    task = await router.submit("work", {"n": 1})
    assert task.status is TaskStatus.QUEUED
    await eventually(lambda: gate.running == 1, what="the task running")
    assert (await router.wait(task.task_id, timeout=0.05)).status is TaskStatus.RUNNING
    gate.release.set()
    done = await router.wait(task.task_id, timeout=10)
    assert done.status is TaskStatus.OK
    assert done.result is not None
    assert done.result.payload == {"n": 1}
    assert done.started_at is not None
    assert done.finished_at is not None
    # The task id is the routed call's: its decision record explains it.
    assert router.explain(task.task_id).chosen == "work:gate:01"
    assert (await router.task(task.task_id)).to_dict()["status"] == "ok"


async def test_failures_keep_the_status_and_fault_of_the_result(router: Router) -> None:
    router.register(echo_agent("util:echo:01", input_schema={"type": "object", "required": ["text"]}))
    invalid = await router.wait((await router.submit("echo", {})).task_id, timeout=10)
    assert invalid.status is TaskStatus.INVALID
    assert invalid.result is not None
    assert invalid.result.fault is Fault.CALLER
    missing = await router.wait((await router.submit("nobody", {})).task_id, timeout=10)
    assert missing.status is TaskStatus.NO_CANDIDATE


async def test_wait_with_a_timeout_returns_the_task_as_it_stands() -> None:
    async with Router(RoutingPolicy(task_workers=1)) as router:
        gate = Gate("work:gate:01")
        router.register(gate.agent)
        first = await router.submit("work", 1)
        second = await router.submit("work", 2)
        await eventually(lambda: gate.running == 1, what="the first task running")
        # One worker, held by the first task: however long the wait, the second stays queued.
        assert (await router.wait(second.task_id, timeout=0.05)).status is TaskStatus.QUEUED
        gate.release.set()
        assert (await router.wait(first.task_id, timeout=10)).status is TaskStatus.OK
        assert (await router.wait(second.task_id, timeout=10)).status is TaskStatus.OK


async def test_workers_bound_how_many_run_at_once() -> None:
    async with Router(RoutingPolicy(task_workers=2)) as router:
        gate = Gate("work:gate:01")
        router.register(gate.agent)
        tasks = [await router.submit("work", n) for n in range(5)]
        await eventually(lambda: gate.running == 2, what="two tasks running")
        assert router.async_tasks.queued == 3
        gate.release.set()
        finished = [await router.wait(task.task_id, timeout=10) for task in tasks]
        assert {task.status for task in finished} == {TaskStatus.OK}
        assert gate.peak == 2


async def test_a_full_queue_refuses_the_submit() -> None:
    async with Router(RoutingPolicy(task_workers=1, task_queue_size=1)) as router:
        gate = Gate("work:gate:01")
        router.register(gate.agent)
        await router.submit("work", 1)
        await router.submit("work", 2)
        with pytest.raises(TaskQueueFullError, match="queue of async tasks is full"):
            await router.submit("work", 3)
        gate.release.set()


async def test_cancel_a_queued_task() -> None:
    async with Router(RoutingPolicy(task_workers=1)) as router:
        gate = Gate("work:gate:01")
        router.register(gate.agent)
        running = await router.submit("work", "first")
        queued = await router.submit("work", "second")
        cancelled = await router.cancel(queued.task_id)
        assert cancelled.status is TaskStatus.CANCELLED
        assert cancelled.result is not None
        assert (cancelled.result.fault, cancelled.result.delivered) == (Fault.CALLER, False)
        gate.release.set()
        assert (await router.wait(running.task_id, timeout=10)).status is TaskStatus.OK
        assert gate.calls == {"first": 1}
        with pytest.raises(TaskFinishedError, match="finished already"):
            await router.cancel(queued.task_id)


async def test_a_task_cancelled_before_its_worker_starts_never_runs(router: Router) -> None:
    gate = Gate("work:gate:01")
    router.register(gate.agent)
    task = await router.submit("work", "never")
    # No await between: the worker was given the task but has not started it.
    cancelled = await router.cancel(task.task_id)
    assert cancelled.status is TaskStatus.CANCELLED
    assert cancelled.result is not None
    assert cancelled.result.delivered is False
    assert gate.calls == {}
    assert router.async_tasks.running == 0


async def test_cancel_a_running_task_stops_the_agent(router: Router) -> None:
    stopped = asyncio.Event()
    started = asyncio.Event()

    async def slow(payload: Any) -> Any:
        started.set()
        try:
            await asyncio.sleep(60)
        except asyncio.CancelledError:
            stopped.set()
            raise

    router.register(FunctionAgent(slow, agent_id="work:slow:01", capabilities=[Capability(name="work")]))
    task = await router.submit("work", {})
    await asyncio.wait_for(started.wait(), 10)
    cancelled = await router.cancel(task.task_id)
    assert cancelled.status is TaskStatus.CANCELLED
    assert cancelled.result is not None
    assert cancelled.result.fault is Fault.CALLER
    assert "outcome is unknown" in (cancelled.result.error or "")
    await asyncio.wait_for(stopped.wait(), 10)
    # The caller's cancel is not the agent's failure.
    assert router.catalog()[0].breaker.value == "closed"


async def test_principals_see_and_cancel_only_their_own_tasks() -> None:
    async with Router(FAST, guard=Owners()) as router:
        gate = Gate("work:gate:01")
        router.register(gate.agent)
        alices = await router.submit("work", 1, principal="alice")
        await router.submit("work", 2, principal="bob")
        with pytest.raises(UnknownTaskError, match="of principal 'bob'"):
            await router.task(alices.task_id, principal="bob")
        with pytest.raises(UnknownTaskError):
            await router.cancel(alices.task_id, principal="bob")
        assert [task.task_id for task in await router.list_tasks(principal="alice")] == [alices.task_id]
        assert len(await router.list_tasks(principal="root")) == 2
        assert (await router.task(alices.task_id, principal="root")).principal == "alice"
        # A task id is one caller's: another's submit with it is refused, the owner's gets the task.
        with pytest.raises(IdempotencyConflictError):
            await router.submit("work", 3, principal="bob", task_id=alices.task_id)
        again = await router.submit("work", 1, principal="alice", task_id=alices.task_id)
        assert again.task_id == alices.task_id
        with pytest.raises(IdempotencyConflictError, match="payload differ"):
            await router.submit("work", 9, principal="alice", task_id=alices.task_id)
        gate.release.set()
        assert (await router.wait(alices.task_id, timeout=10, principal="alice")).status is TaskStatus.OK
        assert gate.calls["1"] == 1


async def test_finished_tasks_are_forgotten_after_their_ttl_and_beyond_the_count() -> None:
    clock = Clock()
    policy = RoutingPolicy(task_result_ttl_s=10.0, task_max_kept=2)
    async with Router(policy, task_store=MemoryTaskStore(clock=clock)) as router:
        router.register(echo_agent("util:echo:01"))
        first = await router.wait((await router.submit("echo", 1)).task_id, timeout=10)
        clock.now = 5.0
        second = await router.wait((await router.submit("echo", 2)).task_id, timeout=10)
        clock.now = 11.0
        # The next submit expires what is past its time: the first, not the second.
        third = await router.wait((await router.submit("echo", 3)).task_id, timeout=10)
        with pytest.raises(UnknownTaskError, match="task_result_ttl_s"):
            await router.task(first.task_id)
        assert (await router.task(second.task_id)).status is TaskStatus.OK
        await router.wait((await router.submit("echo", 4)).task_id, timeout=10)
        await router.submit("echo", 5)
        # At most two finished are kept: the oldest went.
        with pytest.raises(UnknownTaskError):
            await router.task(second.task_id)
        assert (await router.task(third.task_id)).status is TaskStatus.OK
        assert [task.status for task in await router.list_tasks(status=TaskStatus.OK)]


async def test_aclose_cancels_queued_and_running_tasks() -> None:
    router = Router(RoutingPolicy(task_workers=1))
    gate = Gate("work:gate:01")
    router.register(gate.agent)
    running = await router.submit("work", 1)
    queued = await router.submit("work", 2)
    await eventually(lambda: gate.running == 1, what="the first task running")
    store = router.async_tasks.store
    await router.aclose()
    for task in (running, queued):
        record = await store.get(task.task_id)
        assert record is not None
        assert record.status is TaskStatus.CANCELLED
        assert record.result is not None
        assert record.result.fault is Fault.ROUTER
    assert gate.running == 0


async def test_a_callback_needs_a_sender_and_an_http_url(router: Router) -> None:
    router.register(echo_agent("util:echo:01"))
    with pytest.raises(InvalidMessageError, match="http:// or https://"):
        await router.submit("echo", {}, callback_url="file:///etc/passwd")
    with pytest.raises(InvalidMessageError, match="callback sender"):
        await router.submit("echo", {}, callback_url="http://127.0.0.1:9/hook")


async def test_a_notifier_hears_of_finished_tasks_and_its_failure_fails_nothing(router: Router) -> None:
    heard: list[str] = []

    async def notify(record: Any) -> None:
        heard.append(record.status)
        raise RuntimeError("receiver down")

    router.async_tasks.notifier = notify
    router.register(echo_agent("util:echo:01"))
    task = await router.submit("echo", {}, callback_url="http://127.0.0.1:9/hook")
    assert (await router.wait(task.task_id, timeout=10)).status is TaskStatus.OK
    await eventually(lambda: bool(heard), what="the notifier called")
    assert heard == ["ok"]


def test_sync_twins() -> None:
    router = Router()
    try:
        router.register(echo_agent("util:echo:01"))
        task = router.submit_sync("echo", {"x": 1})
        done = router.wait_sync(task.task_id, timeout=10)
        assert done.status is TaskStatus.OK
        assert router.task_sync(task.task_id).result is not None
        with pytest.raises(TaskFinishedError):
            router.cancel_sync(task.task_id)
    finally:
        router.close()


def test_the_policy_changes_outside_any_event_loop() -> None:
    # A sync caller (or another thread) changing the policy must not need the tasks' loop.
    router = Router()
    router.update_policy(RoutingPolicy(task_workers=2))
    assert router.policy.task_workers == 2


def test_every_result_status_is_a_task_status() -> None:
    # A finished task takes its result's status (runner: TaskStatus(result.status.value)); an enum
    # cannot extend another, so this keeps the two lists in step.
    assert {status.value for status in ResultStatus} <= {status.value for status in TaskStatus}
