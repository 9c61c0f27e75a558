"""A deadline that passes while an agent waits on its caller's answer (`CallerWait`, entered from
the task that relays the question) is the caller's fault; one that passes after the answer came
is the agent's (DESIGN §6)."""

from __future__ import annotations

import asyncio

import pytest

from middleware import Fault, ResultStatus
from reach_adapters import BreakerState, Capability, FunctionAgent, Router
from reach_adapters.router import CallerWait
from tests.core.conftest import FAST, agent_info

pytestmark = pytest.mark.timeout(30)


def asking_agent(router: Router, answered: bool, in_own_task: bool) -> None:
    async def ask() -> str:
        wait = CallerWait()

        async def relay() -> None:
            with wait:
                if not answered:
                    await asyncio.Event().wait()

        if in_own_task:
            await relay()
        else:
            # As an MCP session relays a question: from a task of its own.
            asyncio.get_running_loop().create_task(relay())
        await asyncio.Event().wait()  # hangs past its deadline either way
        return "never"

    cap = Capability(name="ask", timeout_ms=200)
    router.register(FunctionAgent(ask, agent_id="q:ask:01", capabilities=[cap]))


@pytest.mark.parametrize("in_own_task", [True, False])
async def test_a_deadline_passing_while_the_caller_is_asked_is_the_callers(in_own_task: bool) -> None:
    async with Router(FAST) as router:
        asking_agent(router, answered=False, in_own_task=in_own_task)
        for _ in range(3):
            result = await router.route("ask", {})
            assert (result.status, result.fault, result.retryable) == (
                ResultStatus.TIMEOUT,
                Fault.CALLER,
                False,
            )
            assert "asked its caller for input" in (result.error or "")
        info = agent_info(router, "q:ask:01")
        assert (info.breaker, info.failures) == (BreakerState.CLOSED, 0)


async def test_a_deadline_passing_after_the_caller_answered_is_the_agents() -> None:
    async with Router(FAST) as router:
        asking_agent(router, answered=True, in_own_task=True)
        result = await router.route("ask", {})
        assert (result.status, result.fault) == (ResultStatus.TIMEOUT, Fault.AGENT)


async def test_time_spent_on_the_callers_answer_is_not_the_agents_usual_latency() -> None:
    async def ask(hang: bool) -> str:
        if hang:
            await asyncio.Event().wait()
        with CallerWait():
            await asyncio.sleep(0.4)  # a person answering
        return "answered"

    async with Router(FAST) as router:
        cap = Capability(name="ask", timeout_ms=500)
        router.register(FunctionAgent(ask, agent_id="q:ask:01", capabilities=[cap]))
        assert (await router.route("ask", {"hang": False})).ok
        # Had the answer's 400 ms counted, 500 ms would be under twice the agent's usual time,
        # and its hang forgiven as too little time left.
        hung = await router.route("ask", {"hang": True})
        assert (hung.status, hung.fault) == (ResultStatus.TIMEOUT, Fault.AGENT), hung.error
