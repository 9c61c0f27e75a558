"""Edge cases found in review: each test failed before its fix."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Mapping
from typing import Any

import pytest

from middleware import Fault, MergePolicy, ReachMessage, ResultStatus
from reach_adapters import (
    AgentHandle,
    AgentState,
    Capability,
    FunctionAgent,
    InvalidDeclarationError,
    PayloadValidationError,
    ReachError,
    Router,
    RoutingPolicy,
)
from reach_adapters.router.agent import ok_result
from reach_adapters.router.hops import current_hop
from tests.core.conftest import FAST, Down, Gate, echo_agent

pytestmark = pytest.mark.timeout(20)


async def test_fallback_does_not_redo_work_that_timed_out() -> None:
    calls: list[str] = []

    async def pay(payload: Any) -> Any:
        calls.append("primary")
        await asyncio.sleep(1)

    async def pay_again(payload: Any) -> Any:
        calls.append("fallback")
        return "paid twice"

    router = Router(FAST)
    router.register(
        FunctionAgent(pay, agent_id="bank:pay:01", capabilities=[Capability(name="pay", timeout_ms=50)])
    )
    router.register(FunctionAgent(pay_again, agent_id="bank:pay:02", capabilities=[Capability(name="other")]))
    result = await router.route("pay", {}, fallback=["bank:pay:02"])
    assert result.status is ResultStatus.TIMEOUT
    assert calls == ["primary"]
    assert "may have started" in (router.explain(result.task_id).note or "")


async def test_fallback_stays_within_the_callers_deadline() -> None:
    async def fail(payload: Any) -> Any:
        raise Down("down")

    async def slow(payload: Any) -> Any:
        await asyncio.sleep(2)
        return "late"

    router = Router(FAST)
    router.register(FunctionAgent(fail, agent_id="svc:a:01", capabilities=[Capability(name="w")]))
    router.register(FunctionAgent(slow, agent_id="svc:b:01", capabilities=[Capability(name="w2")]))
    # The agent answers after 2 s: only the caller's 200 ms can make this a timeout.
    result = await router.route("w", {}, timeout_ms=200, fallback=["svc:b:01"])
    assert result.status is ResultStatus.TIMEOUT


async def test_broadcast_respects_max_concurrency() -> None:
    gate = Gate("svc:work:01", max_concurrency=1)
    router = Router()
    router.register(gate.agent)
    calls = [asyncio.create_task(router.broadcast("work", i)) for i in range(5)]
    await asyncio.sleep(0.05)
    gate.release.set()
    results = await asyncio.gather(*calls)
    assert gate.peak == 1
    assert sum(r.status is ResultStatus.OK for r in results) >= 1
    refused = [t for r in results for t in r.results or [] if t.status is ResultStatus.REJECTED]
    assert all("saturated" in (t.error or "") for t in refused)


async def test_duplicate_waiter_survives_the_first_callers_cancellation() -> None:
    gate = Gate("svc:work:01", idempotent=True)
    router = Router()
    router.register(gate.agent)
    first = asyncio.create_task(router.route("work", "x", task_id="T1"))
    await asyncio.sleep(0.02)
    second = asyncio.create_task(router.route("work", "x", task_id="T1"))
    await asyncio.sleep(0.02)
    first.cancel()
    await asyncio.sleep(0.02)
    gate.release.set()
    result = await asyncio.wait_for(second, 5)
    assert result.ok
    # Safe to repeat: it delivered the task itself once the first gave up.
    assert result.served_by == "candidate"


@pytest.mark.parametrize("merge", ["all", "first"])
async def test_a_broadcast_its_caller_gave_up_on_is_not_delivered_again(merge: MergePolicy) -> None:
    router = Router()
    gates = [Gate(f"svc:work:0{n}") for n in (1, 2)]
    for gate in gates:
        router.register(gate.agent)
    first = asyncio.create_task(router.broadcast("work", "x", task_id="B1", merge=merge))
    await asyncio.sleep(0.05)
    first.cancel()
    for gate in gates:
        gate.release.set()
    repeat = await asyncio.wait_for(router.broadcast("work", "x", task_id="B1", merge=merge), 5)
    assert (repeat.status, repeat.served_by, repeat.delivered) == (
        ResultStatus.CANCELLED,
        "deduplicated",
        True,
    )
    assert [gate.calls["x"] for gate in gates] == [1, 1]
    attempts = router.explain("B1").attempts
    assert {(a.agent_id, a.status, a.delivered) for a in attempts} == {
        (f"svc:work:0{n}", ResultStatus.CANCELLED, True) for n in (1, 2)
    }


async def test_a_repeat_waits_for_the_first_call_no_longer_than_its_own_deadline() -> None:
    gate = Gate("svc:work:01")
    router = Router()
    router.register(gate.agent)
    first = asyncio.create_task(router.route("work", "x", task_id="T1"))
    await asyncio.sleep(0.02)
    repeat = await asyncio.wait_for(router.route("work", "x", task_id="T1", timeout_ms=200), 5)
    assert (repeat.status, repeat.fault, repeat.delivered) == (ResultStatus.TIMEOUT, Fault.ROUTER, False)
    assert "still running for its first caller" in (repeat.error or "")
    gate.release.set()
    assert (await first).ok
    assert gate.calls["x"] == 1


async def test_work_its_caller_gave_up_on_is_not_delivered_again_under_its_task_id() -> None:
    gate = Gate("svc:work:01")
    router = Router()
    router.register(gate.agent)
    first = asyncio.create_task(router.route("work", "x", task_id="T1"))
    await asyncio.sleep(0.02)
    waiting = asyncio.create_task(router.route("work", "x", task_id="T1"))
    await asyncio.sleep(0.02)
    first.cancel()
    gate.release.set()
    # The agent had it and may have done the work: neither the repeat already waiting nor a
    # later one delivers it a second time; both get how the first ended.
    for result in (await asyncio.wait_for(waiting, 5), await router.route("work", "x", task_id="T1")):
        assert (result.status, result.served_by, result.delivered) == (
            ResultStatus.CANCELLED,
            "deduplicated",
            True,
        )
        assert "after agent svc:work:01 had it" in (result.error or "")
    assert gate.calls["x"] == 1
    # A call cancelled before any agent had it did nothing: its repeat runs it.
    full = Gate("svc:full:01", capability="full", max_concurrency=1)
    router.register(full.agent)
    holder = asyncio.create_task(router.route("full", "a"))
    await asyncio.sleep(0.02)
    queued = asyncio.create_task(router.route("full", "b", task_id="T2"))
    await asyncio.sleep(0.02)
    queued.cancel()
    full.release.set()
    await asyncio.wait_for(holder, 5)
    again = await asyncio.wait_for(router.route("full", "b", task_id="T2"), 5)
    assert (again.status, again.served_by) == (ResultStatus.OK, "candidate")
    assert full.calls["b"] == 1


async def test_a_woken_waiter_cancelled_passes_capacity_on() -> None:
    gate = Gate("svc:work:01", max_concurrency=1, timeout_ms=5000)
    router = Router()
    router.register(gate.agent)
    waiters: dict[str, asyncio.Task[Any]] = {}

    async def holder() -> Any:
        result = await router.route("work", "a")
        waiters["b"].cancel()  # woken (capacity handed to it) but not yet running
        return result

    a = asyncio.create_task(holder())
    await asyncio.sleep(0.02)
    waiters["b"] = asyncio.create_task(router.route("work", "b"))
    await asyncio.sleep(0.02)
    c = asyncio.create_task(router.route("work", "c"))
    await asyncio.sleep(0.02)
    gate.release.set()
    await a
    # C gets the freed slot at once instead of waiting out its whole deadline.
    result = await asyncio.wait_for(c, 2)
    assert result.ok


async def test_capacity_timeouts_are_not_remembered_as_deliveries() -> None:
    gate = Gate("svc:work:01", max_concurrency=1)
    router = Router()
    router.register(gate.agent)
    hold = asyncio.create_task(router.route("work", "hold", timeout_ms=5000))
    await asyncio.sleep(0.02)
    late = await router.route("work", "k", task_id="K1", timeout_ms=50)
    assert late.status is ResultStatus.TIMEOUT
    assert late.attempts == 0
    gate.release.set()
    await hold
    again = await router.route("work", "k", task_id="K1", timeout_ms=2000)
    assert again.ok
    assert again.served_by == "candidate"


async def test_a_draining_agent_is_not_revived_by_its_own_reports() -> None:
    handles: list[AgentHandle] = []
    release = asyncio.Event()

    class Server:
        agent_id = "x:mcp:01"
        capabilities = [Capability(name="job")]

        def attach(self, handle: AgentHandle) -> None:
            handles.append(handle)

        async def invoke(self, message: ReachMessage) -> Any:
            await release.wait()
            return ok_result(message, self.agent_id, "done")

    router = Router()
    router.register(Server())
    router.register(echo_agent("x:spare:01", capability="job", weight=1))
    running = asyncio.create_task(router.send("x:mcp:01", {}))
    await asyncio.sleep(0.02)
    leaving = asyncio.create_task(router.deregister("x:mcp:01"))
    await asyncio.sleep(0.02)
    handles[0].set_state(AgentState.ONLINE, "reconnected")
    assert (await router.route("job", {})).agent_id == "x:spare:01"
    release.set()
    await running
    await leaving
    handles[0].set_state(AgentState.ONLINE, "late report")  # after removal: ignored
    assert [a.agent_id for a in router.catalog()] == ["x:spare:01"]


class Streamer:
    def __init__(self, agent_id: str, *, fail: BaseException | None = None, weight: float = 50) -> None:
        self.agent_id = agent_id
        schema = {"type": "object", "properties": {"n": {"type": "integer"}}}
        self.capabilities = [Capability(name="gen", input_schema=schema, weight=weight)]
        self.fail = fail
        self.started = 0
        self.hops: list[Any] = []

    async def invoke(self, message: ReachMessage) -> Any:
        return ok_result(message, self.agent_id, "whole")

    async def astream(self, message: ReachMessage) -> AsyncIterator[Any]:
        self.started += 1
        self.hops.append(current_hop())
        if self.fail is not None:
            raise self.fail
        yield "a"
        yield "b"


async def test_streams_validate_input_and_set_the_hop() -> None:
    router = Router()
    agent = Streamer("w:gen:01")
    router.register(agent)
    with pytest.raises(PayloadValidationError):
        [chunk async for chunk in router.stream("gen", {"n": "not a number"})]
    assert agent.started == 0
    chunks = [chunk async for chunk in router.stream("gen", {"n": 1})]
    assert chunks == ["a", "b"]
    assert agent.hops[0] is not None
    assert agent.hops[0].agent_id == "w:gen:01"
    assert current_hop() is None


async def test_streams_do_not_resend_non_idempotent_work_that_may_have_started() -> None:
    router = Router(FAST)
    first = Streamer("w:gen:01", fail=RuntimeError("crashed mid-way"), weight=100)
    second = Streamer("w:gen:02", weight=1)
    router.register(first)
    router.register(second)
    with pytest.raises(ReachError, match="crashed mid-way"):
        [chunk async for chunk in router.stream("gen", {"n": 1})]
    assert first.started + second.started == 1


async def test_a_deregistered_agent_is_closed_only_after_its_last_call() -> None:
    release = asyncio.Event()
    closed: list[bool] = []

    class Held:
        agent_id = "x:held:01"
        capabilities = [Capability(name="job", timeout_ms=5000)]

        async def invoke(self, message: ReachMessage) -> Any:
            await release.wait()
            return ok_result(message, self.agent_id, "finished" if not closed else "cut off")

        async def aclose(self) -> None:
            closed.append(True)

    router = Router()
    router.register(Held())
    running = asyncio.create_task(router.send("x:held:01", {}))
    await asyncio.sleep(0.02)
    await router.deregister("x:held:01", drain_timeout=0.05, close=True)
    assert closed == []
    release.set()
    assert (await running).payload == "finished"
    await router.aclose()
    assert closed == [True]


async def test_replace_serves_new_calls_at_once_and_lets_old_ones_finish() -> None:
    release = asyncio.Event()
    closed: list[str] = []

    class Version:
        def __init__(self, tag: str, *, hold: bool, declares: bool = True) -> None:
            self.tag = tag
            self.hold = hold
            self.agent_id = "svc:api:01"
            self.capabilities = [Capability(name="job", timeout_ms=5000)] if declares else []

        async def invoke(self, message: ReachMessage) -> Any:
            if self.hold:
                await release.wait()
            return ok_result(message, self.agent_id, self.tag)

        async def aclose(self) -> None:
            closed.append(self.tag)

    router = Router()
    router.register(Version("v1", hold=True))
    running = asyncio.create_task(router.route("job", {}))
    await asyncio.sleep(0.02)
    await router.replace(Version("v2", hold=False))
    assert (await router.route("job", {})).payload == "v2"
    assert closed == []
    release.set()
    assert (await running).payload == "v1"
    broken = Version("v3", hold=False, declares=False)
    with pytest.raises(InvalidDeclarationError, match="declares no capabilities"):
        await router.replace(broken)
    assert (await router.route("job", {})).payload == "v2"
    await router.aclose()
    assert closed == ["v1", "v2"]


async def test_a_matched_task_is_not_redone_by_a_fallback_after_its_second_match_timed_out() -> None:
    calls: list[str] = []

    class TwoMatches:
        async def match(self, text: str, capabilities: Mapping[str, Capability]) -> list[tuple[str, float]]:
            return [("capa", 0.8), ("capb", 0.75)]

    async def down(payload: Any) -> Any:
        calls.append("a")
        raise Down("down")

    async def slow(payload: Any) -> Any:
        calls.append("b")
        await asyncio.sleep(1)

    async def fallback(payload: Any) -> Any:
        calls.append("fallback")
        return "done"

    router = Router(RoutingPolicy(backoff_ms=0, jitter_ms=0), matcher=TwoMatches())
    router.register(FunctionAgent(down, agent_id="t:a:01", capabilities=[Capability(name="capa")]))
    router.register(
        FunctionAgent(slow, agent_id="t:b:01", capabilities=[Capability(name="capb", timeout_ms=100)])
    )
    router.register(FunctionAgent(fallback, agent_id="t:fb:01", capabilities=[Capability(name="other")]))
    result = await router.route(None, "do it", fallback=["t:fb:01"])
    assert result.status is ResultStatus.TIMEOUT
    assert calls == ["a", "b"]  # capb may have done the work: the fallback must not do it again


async def test_after_a_failed_replace_callers_still_wait_for_capacity() -> None:
    gate = Gate("svc:work:01", max_concurrency=1)
    router = Router()
    router.register(gate.agent)

    class NotAnAgent:
        agent_id = "svc:work:01"

    with pytest.raises(InvalidDeclarationError):
        await router.replace(NotAnAgent())  # type: ignore[arg-type]
    first = asyncio.create_task(router.route("work", "a", timeout_ms=3000))
    await asyncio.sleep(0.02)
    second = asyncio.create_task(router.route("work", "b", timeout_ms=3000))
    await asyncio.sleep(0.02)
    gate.release.set()
    assert [r.payload for r in await asyncio.gather(first, second)] == ["a", "b"]
