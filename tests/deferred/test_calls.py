"""The deferred queue for unary calls (issue 17, item 5): a call with ``defer=True`` that nothing
can serve waits for a capable agent and is delivered when one registers or comes back, within its
deadline; FIFO per capability, bounded, cancellable; never for a caller's mistake, and only after
the fallback agents found nothing."""

from __future__ import annotations

import asyncio
import re
from functools import partial
from typing import Any

import pytest
from langchain_core.runnables import RunnableLambda

from middleware import Fault, ResultStatus
from reach_adapters import AgentState, Capability, FunctionAgent, NoCandidateError, Router, RoutingPolicy
from reach_adapters.langchain import LangChainAgent
from tests.deferred.conftest import Switchable, recorder, waiting
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(30)

SCHEMA = {
    "type": "object",
    "properties": {"text": {"type": "string"}},
    "required": ["text"],
    "additionalProperties": False,
}


async def test_a_deferred_call_is_delivered_when_a_capable_agent_registers(router: Router) -> None:
    seen: list[Any] = []
    call = asyncio.create_task(router.route("translate", {"text": "hallo"}, defer=True))
    await eventually(lambda: waiting(router) == 1, what="the call waiting deferred")
    assert not call.done()

    router.register(recorder("lang:translate:01", "translate", seen))
    result = await asyncio.wait_for(call, 10)

    assert result.status is ResultStatus.OK, result.error
    assert result.payload == {"agent": "lang:translate:01", "payload": {"text": "hallo"}}
    assert seen == [{"text": "hallo"}]
    assert waiting(router) == 0
    record = router.explain(result.task_id)
    assert record.deferred_ms is not None
    assert record.to_dict()["deferred_ms"] == record.deferred_ms
    assert record.chosen == "lang:translate:01"


async def test_without_defer_the_same_call_ends_no_candidate_at_once(router: Router) -> None:
    result = await router.route("translate", {"text": "hallo"})

    assert result.status is ResultStatus.NO_CANDIDATE
    assert waiting(router) == 0
    assert "deferred_ms" not in router.explain(result.task_id).to_dict()


async def test_a_langchain_runnable_registered_later_serves_the_deferred_call(router: Router) -> None:
    async def shout(text: str) -> str:
        """Say it louder."""
        return text.upper()

    call = asyncio.create_task(router.route("shout", "hello", defer=True))
    await eventually(lambda: waiting(router) == 1, what="the call waiting deferred")

    router.register(LangChainAgent(RunnableLambda(shout), agent_id="util:shout:01"))
    result = await asyncio.wait_for(call, 10)

    assert result.status is ResultStatus.OK, result.error
    assert result.payload == "HELLO"
    assert result.agent_id == "util:shout:01"


async def test_an_agent_back_online_serves_the_call_deferred_while_it_was_offline(router: Router) -> None:
    agent = Switchable("lang:translate:01", "translate")
    router.register(agent)
    assert agent.handle is not None
    agent.handle.set_state(AgentState.OFFLINE, "maintenance")
    call = asyncio.create_task(router.route("translate", {"text": "hallo"}, defer=True))
    await eventually(lambda: waiting(router) == 1, what="the call waiting deferred")

    agent.handle.set_state(AgentState.ONLINE)
    result = await asyncio.wait_for(call, 10)

    assert result.status is ResultStatus.OK, result.error
    assert result.agent_id == "lang:translate:01"


async def test_a_deferred_call_past_the_callers_deadline_ends_timeout_saying_it_waited() -> None:
    async with Router() as router:
        result = await router.route("translate", {"text": "hallo"}, defer=True, timeout_ms=300)

        assert result.status is ResultStatus.TIMEOUT
        assert result.fault is Fault.ROUTER
        assert not result.delivered
        assert re.search(r"waited deferred \d+\.\d s", result.error or "")
        assert "no agent able to serve 'translate' came" in (result.error or "")
        assert router.explain(result.task_id).deferred_ms is not None
        assert waiting(router) == 0


async def test_without_a_callers_deadline_the_policy_defer_timeout_bounds_the_wait() -> None:
    async with Router(RoutingPolicy(defer_timeout_s=0.3)) as router:
        result = await router.route("translate", {"text": "hallo"}, defer=True)

        assert result.status is ResultStatus.TIMEOUT
        assert "waited deferred" in (result.error or "")


async def test_deferred_calls_are_delivered_first_come_first_served(router: Router) -> None:
    seen: list[Any] = []
    calls = []
    for n in range(4):
        calls.append(asyncio.create_task(router.route("translate", {"n": n}, defer=True)))
        await eventually(partial(_waiting_is, router, n + 1), what=f"call {n} waiting deferred")

    router.register(recorder("lang:translate:01", "translate", seen, max_concurrency=1))
    results = await asyncio.wait_for(asyncio.gather(*calls), 10)

    assert [result.status for result in results] == [ResultStatus.OK] * 4
    assert seen == [{"n": 0}, {"n": 1}, {"n": 2}, {"n": 3}]


async def test_the_deferred_queue_is_bounded_and_refuses_one_more_at_once() -> None:
    async with Router(RoutingPolicy(defer_max_waiting=1)) as router:
        first = asyncio.create_task(router.route("translate", {"n": 1}, defer=True))
        await eventually(lambda: waiting(router) == 1, what="the first call waiting deferred")

        refused = await router.route("translate", {"n": 2}, defer=True)

        assert refused.status is ResultStatus.NO_CANDIDATE
        assert refused.error_type == "DeferQueueFullError"
        assert refused.fault is Fault.ROUTER
        assert refused.retryable
        assert "deferred queue is full" in (refused.error or "")
        with pytest.raises(NoCandidateError):
            refused.raise_for_status()
        assert not first.done()
        router.register(recorder("lang:translate:01", "translate", []))
        assert (await asyncio.wait_for(first, 10)).status is ResultStatus.OK


async def test_cancelling_a_deferred_call_takes_it_out_of_the_queue(router: Router) -> None:
    call = asyncio.create_task(router.route("translate", {"text": "hallo"}, defer=True, task_id="gone-1"))
    await eventually(lambda: waiting(router) == 1, what="the call waiting deferred")

    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call

    assert waiting(router) == 0
    record = router.explain("gone-1")
    assert record.status == ResultStatus.CANCELLED
    assert record.deferred_ms is not None
    seen: list[Any] = []
    router.register(recorder("lang:translate:01", "translate", seen))
    assert (await router.route("translate", {"text": "next"})).status is ResultStatus.OK
    assert seen == [{"text": "next"}]


async def test_a_payload_failing_the_schema_is_refused_not_deferred(router: Router) -> None:
    agent = Switchable("lang:translate:01", "translate", input_schema=SCHEMA)
    router.register(agent)
    assert agent.handle is not None
    agent.handle.set_state(AgentState.OFFLINE, "maintenance")

    result = await router.route("translate", {"txt": "hallo"}, defer=True)

    assert result.status is ResultStatus.INVALID
    assert result.fault is Fault.CALLER
    assert waiting(router) == 0
    assert router.explain(result.task_id).deferred_ms is None


async def test_a_caller_mistake_before_selection_is_not_deferred(router: Router) -> None:
    result = await router.route("translate", {"text": "hallo"}, defer=True, strategy="nonsense")

    assert result.status is ResultStatus.INVALID
    assert waiting(router) == 0


async def test_a_fallback_agent_serves_before_the_call_would_be_deferred(router: Router) -> None:
    seen: list[Any] = []
    router.register(recorder("util:standin:01", "standin", seen))

    result = await router.route("translate", {"text": "hallo"}, defer=True, fallback=["util:standin:01"])

    assert result.status is ResultStatus.OK
    assert result.served_by == "fallback"
    assert seen == [{"text": "hallo"}]
    assert router.explain(result.task_id).deferred_ms is None


async def test_the_default_agent_serves_before_the_call_would_be_deferred() -> None:
    async with Router(default_agent="util:standin:01") as router:
        router.register(recorder("util:standin:01", "standin", []))

        result = await router.route("translate", {"text": "hallo"}, defer=True)

        assert result.status is ResultStatus.OK
        assert result.served_by == "default"


async def test_a_call_matched_from_its_text_is_not_deferred(router: Router) -> None:
    router.register(recorder("util:weather:01", "weather", [], description="the weather forecast"))

    result = await router.route(None, text="translate this letter into French", defer=True)

    assert result.status is ResultStatus.NO_CANDIDATE
    assert waiting(router) == 0
    assert "not deferred: the call named no capability" in (router.explain(result.task_id).note or "")


async def test_a_directed_call_is_not_deferred(router: Router) -> None:
    result = await router.send("lang:translate:01", {"text": "hallo"}, defer=True)

    assert result.status is ResultStatus.NO_CANDIDATE
    assert waiting(router) == 0


async def test_a_saturated_capability_is_not_deferred_when_its_wait_for_capacity_is_full() -> None:
    release = asyncio.Event()

    async def slow(payload: Any) -> Any:
        await release.wait()
        return payload

    # No room to wait for capacity: saturation ends the call; the deferred queue is not for it.
    async with Router(RoutingPolicy(max_waiting=0)) as router:
        cap = Capability(name="translate", max_concurrency=1)
        router.register(FunctionAgent(slow, agent_id="lang:translate:01", capabilities=[cap]))
        first = asyncio.create_task(router.route("translate", 1, defer=True))
        await eventually(lambda: router.catalog()[0].in_flight == 1, what="the first call running")

        second = await router.route("translate", 2, defer=True)

        assert second.status is ResultStatus.NO_CANDIDATE
        assert "saturated" in (second.error or "")
        assert waiting(router) == 0
        release.set()
        assert (await asyncio.wait_for(first, 10)).payload == 1


def _waiting_is(router: Router, count: int) -> bool:
    return waiting(router) == count


async def test_closing_the_router_ends_a_deferred_call_at_once() -> None:
    router = Router()
    call = asyncio.create_task(router.route("translate", {"text": "hallo"}, defer=True))
    await eventually(lambda: waiting(router) == 1, what="the call waiting deferred")

    await router.aclose()
    result = await asyncio.wait_for(call, 10)

    assert result.status is ResultStatus.CANCELLED
    assert result.fault is Fault.ROUTER
    assert not result.delivered
    assert "router closed" in (result.error or "")
