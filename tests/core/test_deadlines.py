"""The deadline watchdog: one timer per loop, fires, releases, compacts, and keeps no loop alive."""

from __future__ import annotations

import asyncio
import gc
import weakref

import pytest

from reach_adapters import Capability, FunctionAgent, Router
from reach_adapters.router import deadlines
from reach_adapters.router.deadlines import watchdog
from tests.core.conftest import echo_agent


async def test_an_expiry_cancels_its_task_when_it_fires() -> None:
    task = asyncio.current_task()
    assert task is not None
    watch = watchdog(asyncio.get_running_loop())
    expiry = watch.watch(task, 0.01)
    with pytest.raises(asyncio.CancelledError):
        await asyncio.sleep(10)
    assert expiry.consume()
    assert not expiry.consume()  # once
    assert task.uncancel() == 0
    assert not expiry.active


async def test_a_nested_delivery_is_cut_first_and_its_task_cancelled_once() -> None:
    task = asyncio.current_task()
    assert task is not None
    watch = watchdog(asyncio.get_running_loop())
    outer = watch.watch(task, 0.01)
    inner = watch.watch(task, 0.03, outer)  # due a little later, as clock reads may make it
    with pytest.raises(asyncio.CancelledError):
        await asyncio.sleep(10)
    assert task.cancelling() == 1
    assert inner.consume()
    assert not outer.consume()
    task.uncancel()
    # The enclosing one follows, should its code still run.
    with pytest.raises(asyncio.CancelledError):
        await asyncio.sleep(10)
    assert outer.consume()
    assert task.uncancel() == 0


async def test_a_released_expiry_never_fires() -> None:
    task = asyncio.current_task()
    assert task is not None
    watch = watchdog(asyncio.get_running_loop())
    expiry = watch.watch(task, 0.01)
    watch.release(expiry)
    watch.release(expiry)  # twice is harmless
    later = watch.watch(task, 0.05)
    async with asyncio.timeout(5):
        with pytest.raises(asyncio.CancelledError):
            await asyncio.sleep(10)  # cancelled by the later expiry, past the released one
    task.uncancel()
    assert later.consume()
    assert not expiry.consume()


async def test_released_entries_are_compacted_away() -> None:
    task = asyncio.current_task()
    assert task is not None
    watch = watchdog(asyncio.get_running_loop())
    keep = watch.watch(task, 60.0)
    for _ in range(1000):
        watch.release(watch.watch(task, 120.0))
    # Entries of finished deliveries are dropped once they outnumber live ones four to one.
    assert len(watch._heap) <= 4 * 64
    watch.release(keep)


def test_each_loop_gets_its_own_watchdog() -> None:
    async def current() -> deadlines.Watchdog:
        return watchdog(asyncio.get_running_loop())

    first = asyncio.run(current())
    second = asyncio.run(current())
    assert first is not second
    assert first._loop is not second._loop


def test_a_closed_loop_is_not_kept_alive() -> None:
    async def routed() -> asyncio.AbstractEventLoop:
        # The router remembers its home loop, so it lives in here only; nothing global may keep it.
        router = Router()
        router.register(echo_agent("util:echo:01"))
        # A delivery arms the loop's watchdog timer (for the call's deadline) and leaves it armed.
        assert (await router.route("echo", {"x": 1})).ok
        return asyncio.get_running_loop()

    loop = asyncio.new_event_loop()
    try:
        assert loop.run_until_complete(routed()) is loop
    finally:
        loop.close()
    gone = weakref.ref(loop)
    del loop
    gc.collect()
    assert gone() is None


@pytest.mark.timeout(30)
async def test_a_call_made_inside_another_keeps_its_own_shorter_timeout() -> None:
    router = Router()

    async def slow(payload: object) -> str:
        await asyncio.sleep(3)
        return "late"

    async def outer(payload: object) -> str:
        nested = await router.route("slow", {}, timeout_ms=200)
        return nested.status.value

    router.register(FunctionAgent(slow, agent_id="t:slow:01", capabilities=[Capability(name="slow")]))
    router.register(FunctionAgent(outer, agent_id="t:outer:01", capabilities=[Capability(name="outer")]))
    try:
        result = await router.route("outer", {})
        assert result.payload == "timeout", result.error
    finally:
        await router.aclose()
