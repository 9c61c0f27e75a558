"""Whose fault a failure is when agents call each other through the router, or when the
cancellation an agent raises is none of its caller's (DESIGN §6)."""

from __future__ import annotations

import asyncio
import gc
import weakref
from typing import Any, cast

import pytest

from middleware import Fault, ResultStatus
from reach_adapters import BreakerState, Capability, FunctionAgent, Router
from tests.core.conftest import FAST, agent_info

pytestmark = pytest.mark.timeout(30)


def nested_pair(router: Router, inner: Any, outer: Any, timeout_ms: int = 30_000) -> None:
    router.register(
        FunctionAgent(
            inner, agent_id="n:inner:01", capabilities=[Capability(name="inner", timeout_ms=timeout_ms)]
        )
    )
    router.register(
        FunctionAgent(
            outer, agent_id="n:outer:01", capabilities=[Capability(name="outer", timeout_ms=timeout_ms)]
        )
    )


async def test_a_nested_call_the_agent_got_wrong_is_the_agents_fault_not_its_callers() -> None:
    router = Router(FAST)

    async def inner(sku: str) -> str:
        return sku

    async def outer(order_id: str) -> Any:
        # The agent's own bug: an int where `inner` takes a string.
        return (await router.route("inner", {"sku": 12345})).raise_for_status().payload

    router.register(FunctionAgent(inner, agent_id="n:inner:01"))  # its schema: sku is a string
    router.register(FunctionAgent(outer, agent_id="n:outer:01"))
    for _ in range(2):
        result = await router.route("outer", {"order_id": "A-1"})
        assert (result.status, result.fault, result.agent_id) == (
            ResultStatus.ERROR,
            Fault.AGENT,
            "n:outer:01",
        )
        assert "12345" in (result.error or "")
    assert agent_info(router, "n:outer:01").breaker is BreakerState.OPEN
    assert agent_info(router, "n:inner:01").failures == 0


@pytest.mark.parametrize(
    "call",
    [
        {"payload": {"at": object()}},  # not JSON
        {"payload": {}, "timeout_ms": 0},  # a call option out of range
        {"payload": {}, "colour": "red"},  # no such call option
    ],
    ids=["not-json", "bad-option", "unknown-option"],
)
async def test_arguments_the_router_refuses_in_a_nested_call_are_the_agents_mistake(
    call: dict[str, Any],
) -> None:
    """The router refuses such a call before building it, raising rather than answering: the
    agent that made it erred, after its own work, not the caller that sent it a good task."""
    router = Router(FAST)
    moved: list[int] = []

    async def audit(payload: Any) -> str:
        return "audited"

    async def transfer(amount: int) -> Any:
        moved.append(amount)
        options = dict(call)
        return (await router.route("audit", options.pop("payload"), **options)).payload

    router.register(FunctionAgent(audit, agent_id="n:audit:01"))
    for replica in ("01", "02"):
        router.register(FunctionAgent(transfer, agent_id=f"n:transfer:{replica}"))
    result = await router.route("transfer", {"amount": 100}, task_id="xfer-1")
    assert (result.status, result.fault, result.delivered) == (ResultStatus.ERROR, Fault.AGENT, True)
    assert result.attempts == 1
    again = await router.route("transfer", {"amount": 100}, task_id="xfer-1")
    assert again.task_id == result.task_id
    assert moved == [100]


@pytest.mark.parametrize("how", ["consensus-vote", "consensus-n", "submit", "dispatch_stream"])
async def test_other_calls_the_router_refuses_in_a_nested_call_are_the_agents_mistake_too(how: str) -> None:
    router = Router(FAST)
    moved: list[int] = []

    async def audit(payload: Any) -> str:
        return "audited"

    async def transfer(amount: int) -> Any:
        moved.append(amount)
        if how == "consensus-vote":
            return await router.consensus("audit", {}, vote=cast(Any, "best"))
        if how == "consensus-n":
            return await router.consensus("audit", {}, n=0)
        if how == "submit":
            return await router.submit("audit", {}, callback_url="ftp://example.com/done")
        broadcast = {
            "raw_payload": {},
            "meta_info": {"capability": "audit"},
            "routing_hint": {"mode": "broadcast"},
        }
        return [chunk async for chunk in router.dispatch_stream(broadcast)]

    router.register(FunctionAgent(audit, agent_id="n:audit:01"))
    router.register(FunctionAgent(transfer, agent_id="n:transfer:01"))
    result = await router.route("transfer", {"amount": 100}, task_id="xfer-1")
    assert (result.status, result.fault, result.delivered) == (ResultStatus.ERROR, Fault.AGENT, True), (
        result.error
    )
    await router.route("transfer", {"amount": 100}, task_id="xfer-1")
    assert moved == [100]
    await router.aclose()


async def test_a_failure_of_the_agent_called_is_not_held_against_its_caller() -> None:
    router = Router(FAST)

    async def inner(payload: Any) -> Any:
        msg = "inner broke"
        raise RuntimeError(msg)

    async def outer(payload: Any) -> Any:
        return (await router.route("inner", {})).raise_for_status().payload

    nested_pair(router, inner, outer)
    for _ in range(3):
        result = await router.route("outer", {})
        assert (result.status, result.fault, result.agent_id) == (
            ResultStatus.ERROR,
            Fault.TASK,
            "n:outer:01",
        )
        assert "inner broke" in (result.error or "")
    outer_info = agent_info(router, "n:outer:01")
    assert (outer_info.breaker, outer_info.failures) == (BreakerState.CLOSED, 0)
    assert agent_info(router, "n:inner:01").failures >= 2


@pytest.mark.parametrize("raises", [False, True])
async def test_a_nested_agent_that_hangs_past_the_shared_deadline_is_the_one_timed_out(raises: bool) -> None:
    """The nested call carries its caller's deadline, so both expire together: the agent that
    hung is cut and counted, not the one waiting for it."""
    router = Router(FAST)

    async def inner(payload: Any) -> Any:
        await asyncio.sleep(60)

    async def outer(i: int) -> Any:
        result = await router.route("inner", {}, task_id=f"inner-{i}")
        return result.raise_for_status().payload if raises else result.status.value

    nested_pair(router, inner, outer, timeout_ms=300)
    for i in range(2):
        result = await router.route("outer", {"i": i})
        if raises:
            assert (result.status, result.fault) == (ResultStatus.ERROR, Fault.TASK)
        else:
            assert (result.status, result.payload) == (ResultStatus.OK, "timeout")
        nested = router.explain(f"inner-{i}")
        assert [(a.agent_id, a.status, a.fault) for a in nested.attempts] == [
            ("n:inner:01", ResultStatus.TIMEOUT, Fault.AGENT)
        ]
    assert agent_info(router, "n:inner:01").breaker is BreakerState.OPEN
    outer_info = agent_info(router, "n:outer:01")
    assert (outer_info.breaker, outer_info.failures) == (BreakerState.CLOSED, 0)


async def test_an_enclosing_agent_still_running_after_its_deadline_is_cut_too() -> None:
    router = Router(FAST)

    async def inner(payload: Any) -> Any:
        await asyncio.sleep(60)

    async def outer(payload: Any) -> Any:
        await router.route("inner", {})
        await asyncio.sleep(60)  # carries on past its own deadline

    nested_pair(router, inner, outer, timeout_ms=300)
    result = await asyncio.wait_for(router.route("outer", {}), 5)
    assert (result.status, result.fault, result.agent_id) == (ResultStatus.TIMEOUT, Fault.AGENT, "n:outer:01")


async def test_a_cancelled_error_of_the_agents_own_is_its_failure_not_a_cancelled_call() -> None:
    router = Router(FAST)

    async def flaky(payload: Any) -> Any:
        helper = asyncio.ensure_future(asyncio.sleep(60))
        asyncio.get_running_loop().call_soon(helper.cancel)
        return await helper  # raises CancelledError: the call itself was not cancelled

    router.register(FunctionAgent(flaky, agent_id="c:flaky:01", capabilities=[Capability(name="work")]))
    for _ in range(2):
        result = await asyncio.wait_for(router.route("work", {}), 5)
        assert (result.status, result.fault, result.error_type) == (
            ResultStatus.ERROR,
            Fault.AGENT,
            "AgentCancelledError",
        )
        assert "not cancelled" in (result.error or "")
    assert agent_info(router, "c:flaky:01").breaker is BreakerState.OPEN
    assert router.explain(result.task_id).status is ResultStatus.ERROR


async def test_a_calling_agent_cut_by_its_own_shorter_limit_is_the_one_timed_out() -> None:
    router = Router(FAST)

    async def inner(payload: Any) -> Any:
        await asyncio.sleep(1)

    async def outer(payload: Any) -> Any:
        return (await router.route("inner", {}, task_id="inner-1")).raise_for_status().payload

    router.register(
        FunctionAgent(inner, agent_id="n:inner:01", capabilities=[Capability(name="inner", timeout_ms=5000)])
    )
    router.register(
        FunctionAgent(outer, agent_id="n:outer:01", capabilities=[Capability(name="outer", timeout_ms=300)])
    )
    result = await asyncio.wait_for(router.route("outer", {}, timeout_ms=10_000), 5)
    assert (result.status, result.fault, result.agent_id) == (ResultStatus.TIMEOUT, Fault.AGENT, "n:outer:01")
    nested = router.explain("inner-1").attempts
    assert [(a.status, a.fault) for a in nested] == [(ResultStatus.CANCELLED, Fault.CALLER)]
    assert agent_info(router, "n:inner:01").failures == 0


async def test_nested_calls_in_tasks_the_agent_started_are_cut_first_too() -> None:
    router = Router(FAST)

    async def inner(payload: Any) -> Any:
        await asyncio.sleep(60)

    async def outer(i: int) -> Any:
        both = await asyncio.gather(*(router.route("inner", {}, task_id=f"inner-{i}-{n}") for n in (1, 2)))
        return [result.status.value for result in both]

    nested_pair(router, inner, outer, timeout_ms=300)
    for i in range(2):
        result = await asyncio.wait_for(router.route("outer", {"i": i}), 5)
        assert (result.status, result.payload) == (ResultStatus.OK, ["timeout", "timeout"])
        for n in (1, 2):
            [attempt] = router.explain(f"inner-{i}-{n}").attempts
            assert (attempt.status, attempt.fault) == (ResultStatus.TIMEOUT, Fault.AGENT)
    outer_info = agent_info(router, "n:outer:01")
    assert (outer_info.breaker, outer_info.failures) == (BreakerState.CLOSED, 0)


async def test_a_finished_callers_task_is_not_kept_by_tasks_its_agent_left_running() -> None:
    router = Router(FAST)
    left: list[asyncio.Task[None]] = []

    async def agent(payload: Any) -> Any:
        left.append(asyncio.create_task(asyncio.sleep(30)))  # keeps a copy of the call's context
        return "ok"

    router.register(
        FunctionAgent(agent, agent_id="a:bg:01", capabilities=[Capability(name="bg", timeout_ms=50)])
    )
    caller = asyncio.create_task(router.route("bg", {}))
    assert (await caller).ok
    await asyncio.sleep(0.1)  # past the deadline: the watchdog dropped its entry
    gone = weakref.ref(caller)
    del caller
    gc.collect()
    try:
        assert gone() is None
    finally:
        for task in left:
            task.cancel()
