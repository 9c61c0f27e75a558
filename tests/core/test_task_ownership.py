"""Task ids belong to their request, and loops are found before duplicates (issue 10, items 2-3)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from middleware import Fault, ReachMessage, ResultStatus
from reach_adapters import Capability, FunctionAgent, IdempotencyConflictError, Router, raise_for_status
from tests.core.conftest import FAST, Gate, echo_agent

pytestmark = pytest.mark.timeout(30)


async def test_a_repeat_of_the_same_request_gets_the_first_result() -> None:
    router = Router(FAST)
    router.register(echo_agent("util:echo:01"))
    first = await router.route("echo", {"n": 1}, task_id="order-7")
    again = await router.route("echo", {"n": 1}, task_id="order-7", priority=5, timeout_ms=9000)
    assert again.served_by == "deduplicated"
    assert again.payload == first.payload


async def test_the_same_task_id_with_another_payload_is_refused() -> None:
    router = Router(FAST)
    router.register(echo_agent("util:echo:01"))
    first = await router.route("echo", {"amount": 10}, task_id="pay-1")
    other = await router.route("echo", {"amount": 1000}, task_id="pay-1")
    assert (other.status, other.error_type, other.fault) == (
        ResultStatus.REJECTED,
        "IdempotencyConflictError",
        Fault.CALLER,
    )
    assert "the payload differs" in (other.error or "")
    assert other.payload is None
    with pytest.raises(IdempotencyConflictError, match="give a new request a new task_id"):
        raise_for_status(other)
    # The record of the task id stays the first request's.
    assert router.explain("pay-1").chosen == first.agent_id
    assert router.explain("pay-1").status == ResultStatus.OK


async def test_the_same_task_id_for_another_capability_names_both() -> None:
    router = Router(FAST)
    router.register(echo_agent("util:echo:01"))
    router.register(echo_agent("util:other:01", "other"))
    await router.route("echo", {}, task_id="t-9")
    other = await router.route("other", {}, task_id="t-9")
    assert other.status is ResultStatus.REJECTED
    assert "route to 'echo'" in (other.error or "")
    assert "route to 'other'" in (other.error or "")
    sent = await router.send("util:other:01", {}, task_id="t-9")
    assert sent.error_type == "IdempotencyConflictError"
    assert "send to agent util:other:01" in (sent.error or "")


async def test_a_conflict_while_the_first_is_running_is_refused_at_once() -> None:
    gate = Gate("svc:gate:01")
    router = Router(FAST)
    router.register(gate.agent)
    first = asyncio.create_task(router.route("work", "a", task_id="t-1"))
    while not gate.running:
        await asyncio.sleep(0.01)
    began = time.monotonic()
    other = await router.route("work", "b", task_id="t-1", timeout_ms=5000)
    assert other.error_type == "IdempotencyConflictError"
    assert time.monotonic() - began < 1.0
    gate.release.set()
    assert (await first).payload == "a"
    assert gate.calls == {"a": 1}


async def test_options_that_route_the_task_are_part_of_the_request() -> None:
    router = Router(FAST)
    router.register(echo_agent("util:echo:01"))
    await router.route("echo", {}, task_id="v", version="1")
    other = await router.route("echo", {}, task_id="v", namespace="util")
    assert other.error_type == "IdempotencyConflictError"
    assert "routing options differ" in (other.error or "")


async def test_a_task_that_was_never_delivered_may_be_sent_again_differently() -> None:
    router = Router(FAST)
    router.register(echo_agent("util:echo:01", input_schema={"type": "object", "required": ["x"]}))
    invalid = await router.route("echo", {}, task_id="fix-me")
    assert invalid.status is ResultStatus.INVALID
    fixed = await router.route("echo", {"x": 1}, task_id="fix-me")
    assert fixed.ok


# -- loops before duplicates -----------------------------------------------------------------


async def test_a_task_that_comes_back_to_its_own_router_is_refused_at_once() -> None:
    router = Router(FAST)

    async def forward(message: ReachMessage) -> Any:
        # A badly written agent passes its own task on, id and all, to its own capability.
        result = await router.route("relay", message.raw_payload, task_id=message.meta_info.task_id)
        return result.model_dump(mode="json")

    relay = Capability(name="relay", timeout_ms=10_000)
    router.register(FunctionAgent(forward, agent_id="svc:relay:01", capabilities=[relay]))
    began = time.monotonic()
    outer = await router.route("relay", {"x": 1}, task_id="loop-1")
    assert time.monotonic() - began < 2.0, "waited on itself"
    assert outer.ok
    inner = outer.payload
    assert isinstance(inner, dict)
    assert (inner["status"], inner["error_type"], inner["fault"]) == (
        "rejected",
        "LoopDetectedError",
        "caller",
    )
    assert "came back to this router" in str(inner["error"])
    assert "svc:relay:01" in str(inner["error"])
    # The loop refusal did not take over the record of the task still running.
    assert router.explain("loop-1").chosen == "svc:relay:01"


async def test_an_agent_reaching_its_own_type_is_refused_naming_the_chain() -> None:
    router = Router(FAST)

    async def again(message: ReachMessage) -> Any:
        return (await router.route("again", {})).model_dump(mode="json")

    router.register(FunctionAgent(again, agent_id="svc:again:01", capabilities=[Capability(name="again")]))
    outer = await router.route("again", {})
    inner = outer.payload
    assert isinstance(inner, dict)
    assert (inner["status"], inner["error_type"]) == ("rejected", "LoopDetectedError")
    assert "svc:again:01 → svc:again:01" in str(inner["error"])


async def test_depth_is_checked_before_a_duplicate_waits() -> None:
    gate = Gate("svc:gate:01")
    router = Router(FAST.model_copy(update={"max_depth": 2}))
    router.register(gate.agent)
    first = asyncio.create_task(router.route("work", "a", task_id="deep", timeout_ms=5000))
    while not gate.running:
        await asyncio.sleep(0.01)
    began = time.monotonic()
    # The same task again, now too deep: refused at once, not left waiting for the first run.
    deep = await router.route(
        "work", "a", task_id="deep", depth=3, lineage=["a:b:1", "c:d:1", "e:f:1"], timeout_ms=5000
    )
    assert time.monotonic() - began < 1.0
    assert (deep.status, deep.error_type, deep.fault) == (
        ResultStatus.REJECTED,
        "LoopDetectedError",
        Fault.CALLER,
    )
    assert "depth 3 exceeds max_depth 2" in (deep.error or "")
    gate.release.set()
    assert (await first).ok


async def test_a_loop_is_found_after_a_waiting_duplicate_takes_the_task_over() -> None:
    router = Router(FAST)

    async def forward(message: ReachMessage) -> Any:
        await asyncio.sleep(0.3)
        result = await router.route("relay", message.raw_payload, task_id=message.meta_info.task_id)
        return result.model_dump(mode="json")

    relay = Capability(name="relay", timeout_ms=4000, idempotent=True)  # so the waiting repeat takes over
    router.register(FunctionAgent(forward, agent_id="svc:relay:01", capabilities=[relay]))
    first = asyncio.create_task(router.route("relay", {"x": 1}, task_id="L1"))
    await asyncio.sleep(0.05)
    retry = asyncio.create_task(router.route("relay", {"x": 1}, task_id="L1"))
    await asyncio.sleep(0.05)
    first.cancel()
    began = time.monotonic()
    result = await retry
    assert time.monotonic() - began < 2.0, "the run that took over waited on itself"
    inner = result.payload
    assert isinstance(inner, dict)
    assert inner["error_type"] == "LoopDetectedError"


async def test_the_same_request_through_another_path_is_a_duplicate_not_a_loop() -> None:
    gate = Gate("svc:gate:01")
    router = Router(FAST)
    router.register(gate.agent)
    first = asyncio.create_task(router.route("work", "a", task_id="order-42", timeout_ms=5000))
    while not gate.running:
        await asyncio.sleep(0.01)
    # A client retry through another gateway arrives with that gateway's agent in its lineage.
    again = asyncio.create_task(
        router.route("work", "a", task_id="order-42", depth=1, lineage=["mcp:here:0"], timeout_ms=5000)
    )
    await asyncio.sleep(0.1)
    assert not again.done()
    gate.release.set()
    results = await asyncio.gather(first, again)
    assert [r.status for r in results] == [ResultStatus.OK, ResultStatus.OK]
    assert results[1].served_by == "deduplicated"
    assert gate.calls == {"a": 1}


async def test_naming_a_directed_calls_only_capability_is_the_same_request() -> None:
    router = Router(FAST)
    router.register(echo_agent("util:echo:01"))
    first = await router.send("util:echo:01", None, task_id="d-1")
    again = await router.send("util:echo:01", {}, task_id="d-1", capability="echo")
    assert again.served_by == "deduplicated"
    assert again.payload == first.payload
