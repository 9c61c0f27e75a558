"""The results kept for task ids are bounded by bytes and by count; results too large to keep are
refused on repeat, never delivered twice."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import pytest

from middleware import ResultStatus
from reach_adapters import Capability, FunctionAgent, Router, RoutingPolicy
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(30)


class Sized:
    """Answers `size` bytes of text and counts its calls; `gate` holds calls while unset."""

    def __init__(self) -> None:
        self.calls = 0
        self.gate = asyncio.Event()
        self.gate.set()

    async def __call__(self, size: int) -> str:
        self.calls += 1
        await self.gate.wait()
        return "x" * size


@pytest.fixture
def agent() -> Sized:
    return Sized()


async def routed(agent: Sized, **policy: int) -> AsyncIterator[Router]:
    async with Router(RoutingPolicy.model_validate(policy)) as router:
        capability = Capability(name="sized", description="Answer so many bytes.")
        router.register(FunctionAgent(agent, agent_id="util:sized:01", capabilities=[capability]))
        yield router


async def test_the_oldest_results_give_way_to_fingerprints_past_the_byte_bound(agent: Sized) -> None:
    async for router in routed(agent, dedupe_max_bytes=20_000, dedupe_max_result_bytes=10_000):
        for index in range(10):
            assert (await router.route("sized", {"size": 4000}, task_id=f"t{index}")).ok
        store = router._dispatcher.dedupe
        assert store.bytes <= 20_000
        calls = agent.calls
        repeat = await router.route("sized", {"size": 4000}, task_id="t9")
        assert repeat.served_by == "deduplicated"
        assert agent.calls == calls
        # The oldest result was not kept, but its task id still means one delivery: refused.
        again = await router.route("sized", {"size": 4000}, task_id="t0")
        assert (again.status, again.error_type) == (ResultStatus.REJECTED, "IdempotencyConflictError")
        assert "not kept" in (again.error or "")
        assert agent.calls == calls


async def test_a_result_too_large_to_keep_is_refused_on_repeat(agent: Sized) -> None:
    async for router in routed(agent, dedupe_max_result_bytes=2000):
        agent.gate.clear()
        first = asyncio.ensure_future(router.route("sized", {"size": 5000}, task_id="big"))
        waiter = asyncio.ensure_future(router.route("sized", {"size": 5000}, task_id="big"))
        while agent.calls == 0:
            await asyncio.sleep(0.01)
        agent.gate.set()
        # Callers waiting while it ran get the result.
        assert (await first).payload == "x" * 5000
        assert (await waiter).served_by == "deduplicated"
        assert router._dispatcher.dedupe.bytes == 0
        repeat = await router.route("sized", {"size": 5000}, task_id="big")
        assert repeat.status is ResultStatus.REJECTED
        assert repeat.error_type == "IdempotencyConflictError"
        assert "larger than policy dedupe_max_result_bytes" in (repeat.error or "")
        assert "dedupe_max_result_bytes" in (repeat.error or "")
        assert agent.calls == 1


async def test_past_the_entry_bound_the_oldest_go_and_those_in_flight_stay(agent: Sized) -> None:
    async for router in routed(agent, dedupe_max_entries=2):
        store = router._dispatcher.dedupe
        agent.gate.clear()
        running = [asyncio.create_task(router.route("sized", {"size": 1}, task_id=f"t{i}")) for i in range(3)]
        await eventually(lambda: agent.calls == 3, what="three calls in flight")
        # In flight, each is kept past the bound: its repeats need its result.
        assert len(store) == 3
        agent.gate.set()
        assert all(result.ok for result in await asyncio.gather(*running))
        assert (await router.route("sized", {"size": 1}, task_id="t3")).ok
        assert len(store) == 2
        calls = agent.calls
        assert (await router.route("sized", {"size": 1}, task_id="t3")).served_by == "deduplicated"
        assert agent.calls == calls
        # The oldest was forgotten: its task id delivers again.
        again = await router.route("sized", {"size": 1}, task_id="t0")
        assert again.ok
        assert again.served_by != "deduplicated"
        assert agent.calls == calls + 1
        assert len(store) == 2
