"""A hung replica does not eat a safe call's deadline; recovered agents serve at once (item 8)."""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

import pytest

from middleware import Fault, ResultStatus
from reach_adapters import AgentState, BreakerState, Capability, FunctionAgent, Router
from tests.core.conftest import FAST, Handled, agent_info, echo_agent

pytestmark = pytest.mark.timeout(30)


def hung_agent(agent_id: str, **cap: Any) -> FunctionAgent:
    async def hang(payload: Any) -> Any:
        await asyncio.sleep(30)

    return FunctionAgent(hang, agent_id=agent_id, capabilities=[Capability(name="lookup", **cap)])


async def test_a_safe_call_moves_past_a_hung_replica_within_its_deadline() -> None:
    router = Router(FAST)
    router.register(hung_agent("kb:lookup:01", read_only=True, weight=100))
    router.register(echo_agent("kb:lookup:02", "lookup", read_only=True, weight=1))
    began = time.monotonic()
    result = await router.route("lookup", {"q": "x"}, timeout_ms=3000)
    took = time.monotonic() - began
    assert result.ok, result.error
    assert result.agent_id == "kb:lookup:02"
    # The hung replica had half the deadline (policy.attempt_timeout_share), not all of it.
    assert 1.2 < took < 2.8
    first = router.explain(result.task_id).attempts[0]
    assert (first.agent_id, first.status, first.fault) == ("kb:lookup:01", ResultStatus.TIMEOUT, Fault.AGENT)
    assert "within 1500 ms" in (first.error or "")


async def test_work_that_is_not_safe_to_repeat_gets_the_whole_deadline() -> None:
    router = Router(FAST)
    router.register(hung_agent("pay:charge:01", weight=100))
    router.register(echo_agent("pay:charge:02", "lookup", weight=1))
    result = await router.route("lookup", {}, timeout_ms=800)
    assert (result.status, result.agent_id, result.attempts) == (ResultStatus.TIMEOUT, "pay:charge:01", 1)
    assert "within 800 ms" in (result.error or "")


async def test_the_share_is_a_policy_field() -> None:
    router = Router(FAST.model_copy(update={"attempt_timeout_share": 1.0}))
    router.register(hung_agent("kb:lookup:01", read_only=True, weight=100))
    router.register(echo_agent("kb:lookup:02", "lookup", read_only=True, weight=1))
    result = await router.route("lookup", {}, timeout_ms=600)
    assert result.status is ResultStatus.TIMEOUT
    assert result.attempts == 1


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
