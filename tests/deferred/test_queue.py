"""The deferred queue's own bookkeeping (review of issue 17, items 1, 2 and 11): calls that leave
it, expired or cancelled, leave nothing behind; a call that looks again on its own keeps its place
in line; a consensus with ``defer`` says why it did not wait."""

from __future__ import annotations

import asyncio
from functools import partial
from typing import Any

import pytest

from middleware import ResultStatus
from reach_adapters import AgentState, Router, RoutingPolicy
from reach_adapters.router.state import Waitlist
from tests.deferred.conftest import Switchable, recorder, waiting
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(30)

# Short, so that calls look again on their own many times within a test.
LOOK_AGAIN = RoutingPolicy(defer_look_again_s=0.2)


def _lines(router: Router) -> int:
    """Capabilities the router's deferred queue keeps a line of calls for."""
    return len(router._dispatcher.deferred._waitlists)


def _waiting_is(router: Router, count: int) -> bool:
    return waiting(router) == count


async def test_a_waitlist_keeps_no_waiter_that_timed_out_or_was_cancelled() -> None:
    waitlist = Waitlist()
    with pytest.raises(TimeoutError):
        await waitlist.wait(0.01)
    assert len(waitlist) == 0

    waiter = asyncio.create_task(waitlist.wait(10))
    await eventually(lambda: len(waitlist) == 1, what="the waiter in line")
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert len(waitlist) == 0


async def test_expired_and_cancelled_deferred_calls_leave_nothing_in_the_queue() -> None:
    async with Router(LOOK_AGAIN) as router:
        # Each its own capability (names come from callers), and many for the same one, some of
        # them waiting long enough to look again on their own first.
        calls = [router.route(f"cap{n}", {}, defer=True, timeout_ms=300) for n in range(50)]
        calls += [router.route("same", {}, defer=True, timeout_ms=300 + 10 * n) for n in range(50)]
        results = await asyncio.wait_for(asyncio.gather(*calls), 20)
        assert {result.status for result in results} == {ResultStatus.TIMEOUT}

        gone = asyncio.create_task(router.route("same", {}, defer=True))
        await eventually(lambda: waiting(router) == 1, what="the call waiting deferred")
        gone.cancel()
        with pytest.raises(asyncio.CancelledError):
            await gone

        assert waiting(router) == 0
        assert _lines(router) == 0


async def test_a_call_that_looked_again_on_its_own_keeps_its_place_in_line() -> None:
    async with Router(LOOK_AGAIN) as router:
        seen: list[Any] = []
        first = asyncio.create_task(router.route("translate", {"n": 1}, defer=True))
        await eventually(partial(_waiting_is, router, 1), what="the first call waiting deferred")
        # The second comes half a look-again later: the first looks again while both wait.
        await asyncio.sleep(0.1)
        second = asyncio.create_task(router.route("translate", {"n": 2}, defer=True))
        await eventually(partial(_waiting_is, router, 2), what="the second call waiting deferred")
        await asyncio.sleep(0.15)

        router.register(recorder("lang:translate:01", "translate", seen, max_concurrency=1))
        results = await asyncio.wait_for(asyncio.gather(first, second), 10)

        assert [result.status for result in results] == [ResultStatus.OK] * 2
        assert seen == [{"n": 1}, {"n": 2}]
        assert _lines(router) == 0


async def test_a_look_again_serves_the_oldest_call_first() -> None:
    # A busy agent back to online is no catalog change: the calls find it when they look again.
    async with Router(LOOK_AGAIN) as router:
        seen: list[Any] = []
        agent = Switchable("lang:translate:01", "translate", seen, max_concurrency=1)
        router.register(agent)
        assert agent.handle is not None
        agent.handle.set_state(AgentState.BUSY, "a long job")
        first = asyncio.create_task(router.route("translate", {"n": 1}, defer=True))
        await eventually(partial(_waiting_is, router, 1), what="the first call waiting deferred")
        await asyncio.sleep(0.1)
        second = asyncio.create_task(router.route("translate", {"n": 2}, defer=True))
        await eventually(partial(_waiting_is, router, 2), what="the second call waiting deferred")
        await asyncio.sleep(0.15)

        agent.handle.set_state(AgentState.ONLINE)
        results = await asyncio.wait_for(asyncio.gather(first, second), 10)

        assert [result.status for result in results] == [ResultStatus.OK] * 2
        assert seen == [{"n": 1}, {"n": 2}]


async def test_a_consensus_with_defer_notes_why_it_did_not_wait(router: Router) -> None:
    result = await router.consensus("nobody", {"x": 1}, n=3, quorum=2, defer=True)

    assert result.status is ResultStatus.NO_CANDIDATE
    assert router.explain(result.task_id).note == "not deferred: a consensus call is answered at once"
    assert _lines(router) == 0
