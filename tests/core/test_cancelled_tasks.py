"""A cancelled async task says which task it was and which agent may have done its work: its
trace id and capability always, the agent it was delivered to when it was cancelled as it ran,
and the decision record shows that cancelled attempt. Failures built outside the dispatcher's
finishing step carry the trace id and capability too, and say that no agent served them."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from middleware import Fault, ResultStatus
from reach_adapters import Capability, FunctionAgent, Router, RoutingPolicy, TaskStatus
from reach_adapters.router import Guard, Refusal
from tests.core.conftest import FAST, Gate, failing_agent
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(30)

TRACE = "0123456789abcdef0123456789abcdef"


async def test_a_task_cancelled_as_it_ran_names_its_agent_trace_and_capability() -> None:
    async with Router() as router:
        gate = Gate("work:gate:01")
        router.register(gate.agent)
        task = await router.submit("work", {"n": 1}, trace_id=TRACE)
        await eventually(lambda: gate.running == 1, what="the task running in its agent")
        cancelled = await router.cancel(task.task_id)
        result = cancelled.result
        assert cancelled.status is TaskStatus.CANCELLED
        assert result is not None
        assert (result.agent_id, result.trace_id, result.capability) == ("work:gate:01", TRACE, "work")
        assert (result.attempts, result.served_by, result.delivered) == (1, "none", True)
        assert result.fault is Fault.CALLER
        assert "while agent work:gate:01 ran it" in (result.error or "")
        assert "outcome is unknown" in (result.error or "")
        record = router.explain(task.task_id)
        (attempt,) = record.attempts
        assert (attempt.agent_id, attempt.status, attempt.delivered) == (
            "work:gate:01",
            ResultStatus.CANCELLED,
            True,
        )
        assert (attempt.fault, record.status, record.chosen) == (Fault.CALLER, ResultStatus.CANCELLED, None)
        assert "was tried and ended cancelled (caller fault)" in record.why_not("work:gate:01")


async def test_a_task_cancelled_before_it_ran_keeps_its_trace_and_capability() -> None:
    async with Router(RoutingPolicy(task_workers=1)) as router:
        gate = Gate("work:gate:01")
        router.register(gate.agent)
        await router.submit("work", "first")
        queued = await router.submit("work", "second", trace_id=TRACE)
        result = (await router.cancel(queued.task_id)).result
        assert result is not None
        assert (result.trace_id, result.capability, result.agent_id) == (TRACE, "work", None)
        assert (result.attempts, result.served_by, result.delivered) == (0, "none", False)
        gate.release.set()


async def test_a_task_the_closing_router_cancels_names_its_agent_and_blames_the_router() -> None:
    router = Router()
    gate = Gate("work:gate:01")
    router.register(gate.agent)
    task = await router.submit("work", 1, trace_id=TRACE)
    await eventually(lambda: gate.running == 1, what="the task running in its agent")
    store = router.async_tasks.store
    await router.aclose()
    record = await store.get(task.task_id)
    assert record is not None
    assert record.result is not None
    result = record.result
    assert (result.status, result.fault, result.agent_id, result.trace_id) == (
        ResultStatus.CANCELLED,
        Fault.ROUTER,
        "work:gate:01",
        TRACE,
    )


async def test_a_cancelled_route_leaves_its_cut_short_attempt_in_the_decision_record() -> None:
    started = asyncio.Event()

    async def slow(payload: Any) -> Any:
        started.set()
        await asyncio.sleep(60)

    async with Router() as router:
        router.register(FunctionAgent(slow, agent_id="work:slow:01", capabilities=[Capability(name="work")]))
        call = asyncio.create_task(router.route("work", {}, task_id="route-1"))
        await asyncio.wait_for(started.wait(), 10)
        call.cancel()
        with pytest.raises(asyncio.CancelledError):
            await call
        record = router.explain("route-1")
        assert [(a.agent_id, a.status, a.delivered) for a in record.attempts] == [
            ("work:slow:01", ResultStatus.CANCELLED, True)
        ]


async def test_a_fallback_attempt_cut_short_is_recorded_on_its_path() -> None:
    started = asyncio.Event()

    async def slow(payload: Any) -> Any:
        started.set()
        await asyncio.sleep(60)

    async with Router(FAST) as router:
        router.register(failing_agent("work:broken:01", RuntimeError("down"), idempotent=True))
        router.register(
            FunctionAgent(slow, agent_id="work:spare:01", capabilities=[Capability(name="spare")])
        )
        task = await router.submit("work", {}, fallback=["work:spare:01"])
        await asyncio.wait_for(started.wait(), 10)
        result = (await router.cancel(task.task_id)).result
        assert result is not None
        assert (result.agent_id, result.attempts, result.delivered) == ("work:spare:01", 2, True)
        record = router.explain(task.task_id)
        assert [(a.agent_id, a.path, a.status) for a in record.attempts] == [
            ("work:broken:01", "candidate", ResultStatus.ERROR),
            ("work:spare:01", "fallback", ResultStatus.CANCELLED),
        ]


class Broken(Guard):
    """A guard that fails on admission: the router's own failure, before any agent is chosen."""

    async def admit(self, message: Any, calling_agent: str | None) -> Refusal | None:
        msg = "the permissions store is down"
        raise RuntimeError(msg)

    def forbids(self, principal: str, capability: str, agent_id: str, namespace: str) -> str | None:
        return None

    async def fan_out(self, principal: str, targets: int) -> Refusal | None:
        return None

    def sees_all(self, principal: str) -> bool:
        return True

    def hop_token(self, meta: Any, agent_id: str, target: str) -> str | None:
        return None


async def test_a_task_that_failed_in_the_router_keeps_its_trace_and_capability() -> None:
    async with Router(guard=Broken()) as router:
        router.register(Gate("work:gate:01").agent)
        task = await router.submit("work", 1, trace_id=TRACE, principal="alice")
        done = await router.wait(task.task_id, timeout=10, principal="alice")
        result = done.result
        assert result is not None
        assert (result.fault, result.trace_id, result.capability) == (Fault.ROUTER, TRACE, "work")
        # No agent had it: the result must not say a candidate served it.
        assert (result.served_by, result.attempts, result.delivered) == ("none", 0, False)
