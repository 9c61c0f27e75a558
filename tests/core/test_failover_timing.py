"""A hung replica does not eat a safe call's deadline; recovered agents serve at once (item 8)."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import pytest

from middleware import Fault, ResultStatus
from reach_adapters import AgentState, BreakerState, Capability, FunctionAgent, Router
from tests.core.conftest import FAST, Handled, agent_info, echo_agent, failing_agent

pytestmark = pytest.mark.timeout(30)


def hung_agent(agent_id: str, **cap: Any) -> FunctionAgent:
    """An agent that answers its first call at once, then hangs."""
    calls = 0

    async def hang(payload: Any) -> Any:
        nonlocal calls
        calls += 1
        if calls > 1:
            await asyncio.sleep(30)
        return "fresh"

    return FunctionAgent(hang, agent_id=agent_id, capabilities=[Capability(name="lookup", **cap)])


def budget_ms(error: str | None) -> int:
    """The time an attempt was given, from its timeout error: what was left of the deadline when
    the agent got the task, so a busy machine may have spent a millisecond or two on the way."""
    found = re.search(r"within (\d+) ms", error or "")
    assert found is not None, error
    return int(found.group(1))


async def test_a_safe_call_moves_past_a_hung_replica_within_its_deadline() -> None:
    router = Router(FAST)
    router.register(hung_agent("kb:lookup:01", read_only=True, weight=100))
    router.register(echo_agent("kb:lookup:02", "lookup", read_only=True, weight=1))
    assert (await router.route("lookup", {})).payload == "fresh"
    began = time.monotonic()
    result = await router.route("lookup", {"q": "x"}, timeout_ms=3000)
    took = time.monotonic() - began
    assert result.ok, result.error
    assert result.agent_id == "kb:lookup:02"
    # The hung replica had half the deadline (policy.attempt_timeout_share), not all of it.
    assert 1.2 < took < 2.8
    first = router.explain(result.task_id).attempts[0]
    assert (first.agent_id, first.status, first.fault) == ("kb:lookup:01", ResultStatus.TIMEOUT, Fault.AGENT)
    assert 1490 <= budget_ms(first.error) <= 1500


async def test_work_that_is_not_safe_to_repeat_gets_the_whole_deadline() -> None:
    router = Router(FAST)
    router.register(hung_agent("pay:charge:01", weight=100))
    router.register(echo_agent("pay:charge:02", "lookup", weight=1))
    await router.route("lookup", {})
    result = await router.route("lookup", {}, timeout_ms=800)
    assert (result.status, result.agent_id, result.attempts) == (ResultStatus.TIMEOUT, "pay:charge:01", 1)
    # No share was kept back for a fallback.
    assert 790 <= budget_ms(result.error) <= 800


async def test_the_share_is_a_policy_field() -> None:
    router = Router(FAST.model_copy(update={"attempt_timeout_share": 1.0}))
    router.register(hung_agent("kb:lookup:01", read_only=True, weight=100))
    router.register(echo_agent("kb:lookup:02", "lookup", read_only=True, weight=1))
    await router.route("lookup", {})
    result = await router.route("lookup", {}, timeout_ms=600)
    assert result.status is ResultStatus.TIMEOUT
    assert result.attempts == 1


async def test_the_share_never_cuts_an_attempt_below_what_the_agent_needs() -> None:
    async def steady(payload: Any) -> Any:
        await asyncio.sleep(0.3)
        return "steady"

    router = Router(FAST)
    for n in (1, 2):
        cap = Capability(name="lookup", read_only=True)
        router.register(FunctionAgent(steady, agent_id=f"kb:lookup:0{n}", capabilities=[cap]))
    # Half of 0.8 s would be below twice their usual 0.3 s: every attempt keeps all the time left.
    results = [await router.route("lookup", {}, timeout_ms=800) for _ in range(4)]
    assert [(r.ok, r.attempts) for r in results] == [(True, 1)] * 4
    assert all(agent_info(router, f"kb:lookup:0{n}").failures == 0 for n in (1, 2))


async def test_a_timeout_with_less_time_than_the_agent_needs_is_not_held_against_it() -> None:
    async def steady(payload: Any) -> Any:
        await asyncio.sleep(0.25)
        return "steady"

    router = Router(FAST)
    cap = Capability(name="work", max_concurrency=1)
    router.register(FunctionAgent(steady, agent_id="svc:work:01", capabilities=[cap]))
    assert (await router.route("work", {})).ok
    # Four calls share one slot within 0.6 s: the last ones get less time than the agent needs.
    results = await asyncio.gather(*(router.route("work", {}, timeout_ms=600) for _ in range(4)))
    late = [r for r in results if r.status is ResultStatus.TIMEOUT]
    assert late
    assert {r.fault for r in late} == {Fault.ROUTER}
    assert agent_info(router, "svc:work:01").failures == 0
    assert agent_info(router, "svc:work:01").breaker is BreakerState.CLOSED


async def test_a_reconnected_agent_leaves_quarantine_through_a_probe_at_once() -> None:
    class Flaky(Handled):
        healthy = False

        async def invoke(self, message: Any) -> Any:
            if not self.healthy:
                raise ConnectionError("server went away")
            return await super().invoke(message)

    agent = Flaky("svc:flaky:01", "work")
    router = Router(FAST)
    router.register(agent)
    router.register(echo_agent("svc:other:01", "work", weight=1))
    for _ in range(2):
        await router.send("svc:flaky:01", {})
    assert agent_info(router, "svc:flaky:01").breaker is BreakerState.OPEN
    agent.handle.set_state(AgentState.RECONNECTING, "session lost")
    agent.healthy = True
    agent.handle.set_state(AgentState.ONLINE, "reconnected")
    assert agent_info(router, "svc:flaky:01").breaker is BreakerState.HALF_OPEN
    probe = await router.send("svc:flaky:01", {})
    assert probe.ok
    assert agent_info(router, "svc:flaky:01").breaker is BreakerState.CLOSED


async def test_a_call_waits_for_a_reconnecting_agent_within_its_deadline() -> None:
    agent = Handled("svc:remote:01", "work")
    router = Router(FAST)
    router.register(agent)
    agent.handle.set_state(AgentState.RECONNECTING, "session lost")
    pending = asyncio.create_task(router.route("work", {"n": 1}, timeout_ms=5000))
    await asyncio.sleep(0.2)
    assert not pending.done()
    agent.handle.set_state(AgentState.ONLINE, "reconnected")
    result = await asyncio.wait_for(pending, 5)
    assert result.ok
    assert result.timings.queueing_ms >= 150


async def test_a_call_that_outlives_the_wait_for_a_reconnect_says_so() -> None:
    agent = Handled("svc:remote:01", "work")
    router = Router(FAST)
    router.register(agent)
    agent.handle.set_state(AgentState.RECONNECTING, "session lost")
    result = await router.route("work", {}, timeout_ms=250)
    assert (result.status, result.fault, result.delivered) == (ResultStatus.TIMEOUT, Fault.ROUTER, False)
    assert "state reconnecting (session lost)" in (result.error or "")
    assert re.search(r"waited 0\.[23] s for a reconnecting agent, never delivered", result.error or "")


async def test_an_offline_agent_is_not_waited_for() -> None:
    agent = Handled("svc:remote:01", "work")
    router = Router(FAST)
    router.register(agent)
    agent.handle.set_state(AgentState.OFFLINE, "gone for good")
    began = time.monotonic()
    result = await router.route("work", {}, timeout_ms=3000)
    assert result.status is ResultStatus.NO_CANDIDATE
    assert time.monotonic() - began < 1.0


async def test_health_does_not_report_a_quarantine_that_is_over() -> None:
    router = Router(FAST.model_copy(update={"breaker": {"quarantine_s": 0.2}}))
    router.register(failing_agent("svc:bad:01", ValueError("bug")))
    for _ in range(2):
        await router.route("work", {})
    assert agent_info(router, "svc:bad:01").breaker is BreakerState.OPEN
    assert "quarantined" in (agent_info(router, "svc:bad:01").problem or "")
    await asyncio.sleep(0.3)
    info = agent_info(router, "svc:bad:01")
    assert (info.breaker, info.problem) == (BreakerState.HALF_OPEN, None)
