"""Defects found in review of the core (issue 10, item 11)."""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Coroutine
from typing import Any

import pytest
from langchain_core.runnables import RunnableLambda

from middleware import MetaInfo, ReachMessage, ReachResult, ResultStatus
from reach_adapters import (
    Capability,
    FunctionAgent,
    InvalidDeclarationError,
    InvalidPolicyError,
    Router,
    RouterClosedError,
    RoutingPolicy,
    SyncCallError,
)
from tests.core.conftest import FAST, Gate, echo_agent

pytestmark = pytest.mark.timeout(20)


async def test_dispatch_leaves_the_callers_message_as_it_was() -> None:
    router = Router(FAST)
    router.register(echo_agent("util:echo:01"))
    message = ReachMessage(raw_payload=None, meta_info=MetaInfo(capability="echo"))
    before = message.model_dump()
    first = await router.dispatch(message)
    # No deadline, no {} for the missing payload, no capability written into the caller's copy.
    assert message.model_dump() == before
    second = await router.dispatch(message)
    assert (first.ok, second.ok) == (True, True)
    matched = ReachMessage(raw_payload="echo this", meta_info=MetaInfo(text="echo"))
    assert (await router.dispatch(matched)).ok
    assert matched.meta_info.capability is None


async def test_a_message_dispatched_twice_with_its_own_task_id_is_served_once() -> None:
    calls: list[Any] = []

    async def count(payload: Any) -> Any:
        calls.append(payload)
        return len(calls)

    router = Router(FAST)
    router.register(FunctionAgent(count, agent_id="util:count:01", capabilities=[Capability(name="count")]))
    message = ReachMessage(raw_payload={"n": 1}, meta_info=MetaInfo(capability="count", task_id="same"))
    first = await router.dispatch(message)
    second = await router.dispatch(message)
    assert (first.payload, second.payload, second.served_by) == (1, 1, "deduplicated")


def test_capability_model_copy_validates_the_new_declaration() -> None:
    cap = Capability(name="echo", input_schema={"type": "object", "required": ["text"]})
    with pytest.raises(InvalidDeclarationError, match="not a valid JSON Schema"):
        cap.model_copy(update={"input_schema": {"type": "no-such-type"}})
    with pytest.raises(InvalidDeclarationError, match="timeout_ms"):
        cap.model_copy(update={"timeout_ms": -1})
    opened = cap.model_copy(update={"input_schema": {"type": "object"}})
    assert opened.checks_input is False
    assert opened.input_validator.is_valid({})
    assert not cap.input_validator.is_valid({})
    assert cap.model_copy() == cap


def test_policy_model_copy_validates_too() -> None:
    with pytest.raises(InvalidPolicyError, match="max_retries"):
        RoutingPolicy().model_copy(update={"max_retries": 99})


class Closable:
    agent_id = "util:closable:01"
    capabilities = (Capability(name="close_me"),)

    def __init__(self) -> None:
        self.closed = 0
        self.probes = 0

    async def invoke(self, message: ReachMessage) -> Any:
        raise AssertionError("not called")

    async def probe(self) -> bool:
        self.probes += 1
        return True

    async def aclose(self) -> None:
        self.closed += 1


async def test_a_closed_router_refuses_calls_stops_probing_and_closes_agents_once() -> None:
    agent = Closable()
    router = Router(RoutingPolicy(probe_interval_s=0.05))
    router.register(agent)
    router.register(echo_agent("util:echo:01"))
    assert (await router.route("echo", {})).ok
    await router.aclose()
    await router.aclose()
    assert agent.closed == 1
    probes = agent.probes
    await asyncio.sleep(0.2)
    assert agent.probes == probes
    calls: list[Coroutine[Any, Any, ReachResult]] = [
        router.route("echo", {}),
        router.send("util:echo:01", {}),
        router.broadcast("echo", {}),
        router.dispatch({"meta_info": {"capability": "echo"}}),
    ]
    for call in calls:
        with pytest.raises(RouterClosedError, match="the router is closed"):
            await call
    with pytest.raises(RouterClosedError):
        router.register(echo_agent("util:echo:02"))
    with pytest.raises(RouterClosedError):
        await router.deregister("util:closable:01", close=True)
    with pytest.raises(RouterClosedError):
        await router.replace(Closable())
    assert agent.closed == 1


async def test_calling_methods_are_coroutine_functions() -> None:
    router = Router(FAST)
    router.register(echo_agent("util:echo:01"))
    for method in (router.route, router.send, router.broadcast, router.dispatch):
        assert inspect.iscoroutinefunction(method)
    chain = RunnableLambda(router.route)
    result = await chain.ainvoke("echo")
    assert result.ok


async def test_sync_call_errors_name_the_method_that_was_called() -> None:
    router = Router(FAST)
    router.register(echo_agent("util:echo:01"))
    await router.route("echo", {})
    with pytest.raises(SyncCallError, match=r"send_sync was called .*'await router\.send\(\.\.\.\)'"):
        router.send_sync("util:echo:01", {})
    with pytest.raises(
        SyncCallError, match=r"broadcast_sync was called .*'await router\.broadcast\(\.\.\.\)'"
    ):
        router.broadcast_sync("echo", {})
    with pytest.raises(SyncCallError, match=r"close was called .*'await router\.aclose\(\)'"):
        router.close()
    assert (await router.route("echo", {})).status is ResultStatus.OK


async def test_a_cancelled_call_leaves_a_decision_record() -> None:
    gate = Gate("svc:gate:01")
    router = Router(FAST)
    router.register(gate.agent)
    call = asyncio.create_task(router.route("work", "x", task_id="gone-1"))
    while not gate.running:
        await asyncio.sleep(0.01)
    call.cancel()
    with pytest.raises(asyncio.CancelledError):
        await call
    record = router.explain("gone-1")
    assert record.status == ResultStatus.CANCELLED
