"""Sync function agents run in bounded pools of their own (issue 10, item 7)."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from middleware import Fault, ResultStatus
from reach_adapters import Capability, FunctionAgent, Router
from reach_adapters.router.hops import current_hop
from tests.core.conftest import FAST, agent_info
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(30)

# More than any default thread pool holds (asyncio's is at most 32 threads).
HUNG = 40


async def test_a_hung_sync_agent_never_makes_unrelated_sync_agents_time_out() -> None:
    stuck = threading.Event()

    def hang(payload: Any) -> str:
        stuck.wait(20)
        return "late"

    def quick(payload: Any) -> str:
        return "quick"

    router = Router(FAST)
    router.register(
        FunctionAgent(
            hang, agent_id="svc:hang:01", capabilities=[Capability(name="hang", max_concurrency=HUNG)]
        )
    )
    router.register(FunctionAgent(quick, agent_id="svc:quick:01", capabilities=[Capability(name="quick")]))
    try:
        hung = await asyncio.gather(*(router.route("hang", {}, timeout_ms=200) for _ in range(HUNG)))
        assert {r.status for r in hung} == {ResultStatus.TIMEOUT}
        assert all(r.delivered and r.fault is Fault.AGENT for r in hung)
        # Every thread of the hung agent is still blocked; the other agent answers regardless.
        answered = await router.route("quick", {}, timeout_ms=3000)
        assert answered.payload == "quick", answered.error
        agent = agent_info(router, "svc:hang:01")
        assert (agent.stuck, agent.in_flight) == (HUNG, HUNG)
        assert f"{HUNG} call(s) stuck past their deadline" in (agent.problem or "")
    finally:
        stuck.set()
    await eventually(lambda: agent_info(router, "svc:hang:01").stuck == 0, timeout=10, what="threads ending")
    assert agent_info(router, "svc:hang:01").in_flight == 0
    await router.aclose()


async def test_max_concurrency_holds_for_sync_agents_while_their_threads_run() -> None:
    stuck = threading.Event()
    running = 0
    peak = 0
    lock = threading.Lock()

    def hang(payload: Any) -> str:
        nonlocal running, peak
        with lock:
            running += 1
            peak = max(peak, running)
        try:
            stuck.wait(20)
        finally:
            with lock:
                running -= 1
        return "done"

    router = Router(FAST)
    router.register(
        FunctionAgent(hang, agent_id="svc:hang:01", capabilities=[Capability(name="hang", max_concurrency=2)])
    )
    try:
        first = await asyncio.gather(*(router.route("hang", {}, timeout_ms=150) for _ in range(2)))
        assert {r.status for r in first} == {ResultStatus.TIMEOUT}
        # Both threads still run: the slot is full, so a third call waits for room, never runs.
        third = await router.route("hang", {}, timeout_ms=300)
        assert (third.status, third.fault, third.delivered) == (ResultStatus.TIMEOUT, Fault.ROUTER, False)
        assert "for capacity, never delivered" in (third.error or "")
        assert peak == 2
    finally:
        stuck.set()
    await eventually(
        lambda: agent_info(router, "svc:hang:01").in_flight == 0, timeout=10, what="threads ending"
    )
    assert (await router.route("hang", {}, timeout_ms=3000)).payload == "done"
    assert peak == 2
    await router.aclose()


async def test_sync_agents_keep_the_callers_context() -> None:
    seen: list[str | None] = []

    def which(payload: Any) -> str:
        hop = current_hop()
        seen.append(hop.agent_id if hop else None)
        return "ok"

    router = Router(FAST)
    router.register(FunctionAgent(which, agent_id="svc:which:01", capabilities=[Capability(name="which")]))
    assert (await router.route("which", {})).ok
    assert seen == ["svc:which:01"]
    await router.aclose()


async def test_linger_after_the_call_ended_frees_nothing_twice() -> None:
    later: list[asyncio.Task[None]] = []

    async def job(payload: Any) -> str:
        async def finish_later() -> None:
            await asyncio.sleep(0.05)
            hop = current_hop()
            assert hop is not None
            hop.linger()()

        later.append(asyncio.create_task(finish_later()))
        return "accepted"

    router = Router(FAST)
    router.register(
        FunctionAgent(job, agent_id="svc:job:01", capabilities=[Capability(name="job", max_concurrency=1)])
    )
    assert (await router.route("job", {})).ok
    await asyncio.gather(*later)
    agent = agent_info(router, "svc:job:01")
    assert (agent.in_flight, agent.stuck) == (0, 0)
    await router.aclose()
