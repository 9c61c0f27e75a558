"""Resilience: deadlines, retries with failover, breakers, concurrency, idempotency, loops, health."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from typing import Any

import pytest

from middleware import ReachMessage, ResultStatus
from reach_adapters import (
    AgentBusyError,
    AgentHandle,
    AgentState,
    BreakerSettings,
    Capability,
    FunctionAgent,
    LoopDetectedError,
    Router,
    RoutingPolicy,
    raise_for_status,
)
from tests.core.conftest import FAST, Down, Gate, echo_agent, failing_agent
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(30)


# -- deadlines -------------------------------------------------------------------------------


async def test_deadline_is_the_shorter_of_capability_and_message_timeouts() -> None:
    async def slow(payload: Any) -> Any:
        await asyncio.sleep(2)
        return "late"

    router = Router(FAST)
    router.register(
        FunctionAgent(slow, agent_id="svc:slow:01", capabilities=[Capability(name="s", timeout_ms=5000)])
    )
    # The agent would answer after 2 s: only the message's 50 ms can make this a timeout.
    result = await router.route("s", {}, timeout_ms=50)
    assert result.status is ResultStatus.TIMEOUT
    assert result.error_type == "ReachTimeoutError"
    router.register(
        FunctionAgent(slow, agent_id="svc:slow:02", capabilities=[Capability(name="t", timeout_ms=50)])
    )
    assert (await router.route("t", {}, timeout_ms=5000)).status is ResultStatus.TIMEOUT


async def test_expired_agent_call_is_cancelled() -> None:
    cancelled = asyncio.Event()

    async def hang(payload: Any) -> Any:
        try:
            await asyncio.sleep(10)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return None

    router = Router(FAST)
    router.register(
        FunctionAgent(hang, agent_id="svc:hang:01", capabilities=[Capability(name="h", timeout_ms=30)])
    )
    assert (await router.route("h", {})).status is ResultStatus.TIMEOUT
    await asyncio.wait_for(cancelled.wait(), 1)


async def test_nested_calls_inherit_deadline_trace_depth_and_lineage() -> None:
    seen: dict[str, Any] = {}
    router = Router(FAST)

    async def inner(message: ReachMessage) -> Any:
        seen["inner"] = message.meta_info
        return "inner-done"

    async def outer(message: ReachMessage) -> Any:
        seen["outer"] = message.meta_info
        result = await router.route("inner", {})
        return result.payload

    router.register(FunctionAgent(outer, agent_id="app:outer:01", capabilities=[Capability(name="outer")]))
    router.register(FunctionAgent(inner, agent_id="app:inner:01", capabilities=[Capability(name="inner")]))
    result = await router.route("outer", {}, timeout_ms=3000)
    assert result.payload == "inner-done"
    outer_meta, inner_meta = seen["outer"], seen["inner"]
    assert inner_meta.trace_id == outer_meta.trace_id
    assert inner_meta.depth == 1
    assert inner_meta.lineage == ["app:outer:01"]
    assert inner_meta.source == "app:outer:01"
    assert inner_meta.deadline == pytest.approx(outer_meta.deadline)


# -- retries ---------------------------------------------------------------------------------


async def test_transient_failure_fails_over_to_the_next_candidate() -> None:
    router = Router(FAST)
    router.register(failing_agent("svc:work:01", Down("refused"), weight=100))
    router.register(echo_agent("svc:work:02", capability="work", weight=10))
    result = await router.route("work", {"n": 1})
    assert result.ok
    assert result.agent_id == "svc:work:02"
    assert result.attempts == 2
    attempts = router.explain(result.task_id).attempts
    assert [(a.agent_id, a.error_type) for a in attempts] == [
        ("svc:work:01", "Down"),
        ("svc:work:02", None),
    ]


async def test_business_errors_are_not_retried() -> None:
    router = Router(FAST)
    router.register(failing_agent("svc:work:01", ValueError("no such order"), weight=100))
    router.register(echo_agent("svc:work:02", capability="work", weight=10))
    result = await router.route("work", {})
    assert result.error_type == "ValueError"
    assert result.attempts == 1


async def test_retries_stop_at_max_retries() -> None:
    router = Router(FAST)
    for i in range(5):
        router.register(failing_agent(f"svc:work:{i}", AgentBusyError("full")))
    result = await router.route("work", {})
    assert result.status is ResultStatus.ERROR
    assert result.attempts == 3  # the first try and max_retries=2
    assert len({a.agent_id for a in router.explain(result.task_id).attempts}) == 3


async def test_backoff_grows_between_retries() -> None:
    router = Router(RoutingPolicy(backoff_ms=40.0, jitter_ms=0.0))
    router.register(failing_agent("svc:work:01", Down("down")))
    began = time.monotonic()
    await router.route("work", {}, timeout_ms=5000)
    # 40 ms then 80 ms: at least 120 ms in all (a lower bound, not a timing target).
    assert time.monotonic() - began >= 0.12


async def test_timeouts_of_non_idempotent_work_are_not_resent() -> None:
    calls: Counter[str] = Counter()

    async def slow(payload: Any) -> Any:
        calls["n"] += 1
        await asyncio.sleep(1)

    router = Router(FAST)
    router.register(
        FunctionAgent(slow, agent_id="pay:charge:01", capabilities=[Capability(name="charge", timeout_ms=30)])
    )
    router.register(
        FunctionAgent(slow, agent_id="pay:charge:02", capabilities=[Capability(name="charge", timeout_ms=30)])
    )
    result = await router.route("charge", {}, timeout_ms=2000)
    assert result.status is ResultStatus.TIMEOUT
    assert calls["n"] == 1
    assert "not idempotent" in (router.explain(result.task_id).note or "")


async def test_timeouts_of_idempotent_work_are_retried_elsewhere() -> None:
    async def slow(payload: Any) -> Any:
        await asyncio.sleep(1)

    router = Router(FAST)
    router.register(
        FunctionAgent(
            slow,
            agent_id="kb:search:01",
            capabilities=[Capability(name="search", timeout_ms=30, weight=100, idempotent=True)],
        )
    )
    router.register(echo_agent("kb:search:02", capability="search", idempotent=True, weight=1))
    result = await router.route("search", {}, timeout_ms=2000)
    assert result.ok
    assert result.agent_id == "kb:search:02"


async def test_retry_budget_caps_retries_during_an_outage() -> None:
    never_open = BreakerSettings(consecutive_failures=1000, min_calls=1000)
    policy = RoutingPolicy(
        backoff_ms=0.0, jitter_ms=0.0, retry_budget_floor=2.0, retry_budget_ratio=0.0, breaker=never_open
    )
    router = Router(policy)
    router.register(failing_agent("svc:work:01", Down("down"), max_concurrency=100))
    router.register(failing_agent("svc:work:02", Down("down"), max_concurrency=100))
    attempts = [(await router.route("work", {})).attempts for _ in range(4)]
    assert sum(attempts) - len(attempts) == 2  # only the budget's two retries happened


async def test_an_outage_of_one_capability_leaves_the_others_their_retries() -> None:
    never_open = BreakerSettings(consecutive_failures=1000, min_calls=1000)
    policy = RoutingPolicy(
        backoff_ms=0.0, jitter_ms=0.0, retry_budget_floor=2.0, retry_budget_ratio=0.0, breaker=never_open
    )
    router = Router(policy)
    for n in (1, 2):
        router.register(failing_agent(f"svc:reports:0{n}", Down("down"), "reports", max_concurrency=100))
    for _ in range(4):
        await router.route("reports", {})
    router.register(failing_agent("svc:pay:01", Down("restarting"), "pay", weight=100))
    router.register(echo_agent("svc:pay:02", "pay", weight=1))
    paid = await router.route("pay", {})
    assert (paid.ok, paid.agent_id, paid.attempts) == (True, "svc:pay:02", 2), paid.error
    spent = await router.route("reports", {})
    assert router.explain(spent.task_id).note == "retry budget of 'reports' exhausted"


# -- circuit breaker -------------------------------------------------------------------------


async def test_consecutive_failures_open_the_breaker_and_traffic_moves() -> None:
    router = Router(FAST)
    router.register(failing_agent("svc:work:01", ConnectionError("down"), weight=100))
    router.register(echo_agent("svc:work:02", capability="work", weight=1))
    for _ in range(2):
        await router.route("work", {})
    info = {a.agent_id: a for a in router.catalog()}
    assert info["svc:work:01"].breaker == "open"
    assert info["svc:work:01"].quarantined_for_s > 20
    result = await router.route("work", {})
    assert result.attempts == 1
    assert result.agent_id == "svc:work:02"
    reason = router.explain(result.task_id).why_not("svc:work:01")
    assert "circuit open" in reason


async def test_error_rate_over_the_window_opens_the_breaker() -> None:
    flips = iter([True, False] * 20)

    async def flaky(payload: Any) -> Any:
        if next(flips):
            raise ConnectionError("flaky")
        return "ok"

    policy = RoutingPolicy(
        backoff_ms=0.0, max_retries=0, breaker=BreakerSettings(consecutive_failures=5, min_calls=6)
    )
    router = Router(policy)
    router.register(FunctionAgent(flaky, agent_id="svc:flaky:01", capabilities=[Capability(name="f")]))
    router.register(echo_agent("svc:steady:01", capability="f", weight=0))
    for _ in range(6):
        await router.send("svc:flaky:01", {})
    # Three failures in six calls is 50 %, but the rate is judged when a failure comes in.
    assert {a.agent_id: a.breaker for a in router.catalog()}["svc:flaky:01"] == "closed"
    await router.send("svc:flaky:01", {})
    assert {a.agent_id: a.breaker for a in router.catalog()}["svc:flaky:01"] == "open"


async def test_the_last_candidate_is_never_ejected() -> None:
    router = Router(FAST)
    router.register(failing_agent("svc:only:01", ConnectionError("down")))
    for _ in range(3):
        result = await router.route("work", {})
        assert result.attempts >= 1
        assert result.error_type == "ConnectionError"
    record = router.explain(result.task_id)
    assert any("last candidates" in e.reason for e in record.exclusions)


async def test_drill_flapping_agent_is_quarantined_then_recovers_through_half_open() -> None:
    healthy = False

    async def flapping(payload: Any) -> Any:
        if not healthy:
            raise Down("flap")
        return "back"

    breaker = BreakerSettings(quarantine_s=0.2, max_quarantine_s=1.0)
    router = Router(RoutingPolicy(backoff_ms=0.0, jitter_ms=0.0, breaker=breaker))
    router.register(
        FunctionAgent(flapping, agent_id="svc:flap:01", capabilities=[Capability(name="w", weight=100)])
    )
    router.register(echo_agent("svc:spare:01", capability="w", weight=1))
    for _ in range(2):
        await router.send("svc:flap:01", {})
    state = {a.agent_id: a.breaker for a in router.catalog()}
    assert state["svc:flap:01"] == "open"
    during = await router.route("w", {})
    assert during.agent_id == "svc:spare:01"
    await asyncio.sleep(0.25)
    # Half-open: one probe call is let through; it fails, so the quarantine doubles.
    assert (await router.route("w", {})).agent_id == "svc:spare:01"
    assert {a.agent_id: a.breaker for a in router.catalog()}["svc:flap:01"] == "open"
    assert {a.agent_id: a.quarantined_for_s for a in router.catalog()}["svc:flap:01"] > 0.25
    healthy = True
    await asyncio.sleep(0.45)
    probe = await router.route("w", {})
    assert probe.agent_id == "svc:flap:01"
    assert probe.payload == "back"
    assert {a.agent_id: a.breaker for a in router.catalog()}["svc:flap:01"] == "closed"


# -- concurrency -----------------------------------------------------------------------------


async def test_saturated_callers_wait_in_a_bounded_queue() -> None:
    gate = Gate("svc:work:01", max_concurrency=1)
    router = Router(RoutingPolicy(max_waiting=1))
    router.register(gate.agent)
    first = asyncio.create_task(router.route("work", "a", timeout_ms=3000))
    await asyncio.sleep(0.02)
    second = asyncio.create_task(router.route("work", "b", timeout_ms=3000))
    await asyncio.sleep(0.02)
    third = await router.route("work", "c", timeout_ms=3000)
    assert third.status is ResultStatus.NO_CANDIDATE
    assert "saturated" in (third.error or "")
    gate.release.set()
    assert [r.payload for r in await asyncio.gather(first, second)] == ["a", "b"]
    assert gate.peak == 1


async def test_waiting_for_capacity_respects_the_deadline() -> None:
    gate = Gate("svc:work:01", max_concurrency=1)
    router = Router()
    router.register(gate.agent)
    hold = asyncio.create_task(router.route("work", "hold", timeout_ms=5000))
    await asyncio.sleep(0.02)
    late = await router.route("work", "late", timeout_ms=100)
    assert late.status is ResultStatus.TIMEOUT
    assert "waited" in (late.error or "")
    gate.release.set()
    await hold


async def test_busy_agents_serve_only_high_priority() -> None:
    handles: list[AgentHandle] = []

    class Reporting:
        agent_id = "svc:work:01"
        capabilities = [Capability(name="work")]

        def attach(self, handle: AgentHandle) -> None:
            handles.append(handle)

        async def invoke(self, message: ReachMessage) -> Any:
            from reach_adapters.router.agent import ok_result

            return ok_result(message, self.agent_id, "done")

    router = Router()
    router.register(Reporting())
    handles[0].set_state(AgentState.BUSY, "queue full")
    low = await router.route("work", {}, priority=1)
    assert low.status is ResultStatus.NO_CANDIDATE
    assert "busy" in (low.error or "")
    assert (await router.route("work", {}, priority=8)).ok


# -- idempotency -----------------------------------------------------------------------------


async def test_repeated_task_id_returns_the_first_result() -> None:
    gate = Gate("svc:work:01")
    router = Router()
    router.register(gate.agent)
    first = asyncio.create_task(router.route("work", "x", task_id="order-1"))
    await asyncio.sleep(0.02)
    duplicate = asyncio.create_task(router.route("work", "x", task_id="order-1"))
    await asyncio.sleep(0.02)
    gate.release.set()
    a, b = await asyncio.gather(first, duplicate)
    later = await router.route("work", "x", task_id="order-1")
    assert gate.calls["x"] == 1
    assert a.served_by == "candidate"
    assert b.served_by == "deduplicated"
    assert later.served_by == "deduplicated"
    assert b.payload == a.payload == later.payload


async def test_nothing_delivered_is_not_remembered() -> None:
    router = Router()
    missing = await router.route("work", "x", task_id="order-2")
    assert missing.status is ResultStatus.NO_CANDIDATE
    router.register(echo_agent("svc:work:01", capability="work"))
    assert (await router.route("work", "x", task_id="order-2")).served_by == "candidate"


async def test_drill_non_idempotent_counter_increments_once_per_task() -> None:
    """Forced timeouts and busy refusals, caller retries: exactly one increment per task id."""
    counter: Counter[str] = Counter()
    attempts: Counter[str] = Counter()

    async def increment(message: ReachMessage) -> Any:
        task = message.meta_info.task_id
        attempts[task] += 1
        n = int(task.split("-")[1])
        if n % 3 == 0 and attempts[task] == 1:
            raise AgentBusyError("try another")  # refused before doing anything
        counter[task] += 1
        if n % 2 == 0:
            await asyncio.sleep(1)  # did the work, then hangs past the timeout
        return counter[task]

    router = Router(FAST)
    for i in range(2):
        router.register(
            FunctionAgent(
                increment, agent_id=f"acct:counter:{i}", capabilities=[Capability(name="inc", timeout_ms=40)]
            )
        )

    async def caller(n: int) -> None:
        for _ in range(3):  # the caller retries whatever it got back
            await router.route("inc", {}, task_id=f"task-{n}", timeout_ms=500)

    await asyncio.gather(*(caller(n) for n in range(60)))
    assert set(counter) == {f"task-{n}" for n in range(60)}
    assert set(counter.values()) == {1}


# -- validation ------------------------------------------------------------------------------


async def test_output_that_breaks_the_schema_goes_to_the_next_candidate() -> None:
    async def wrong(payload: Any) -> Any:
        return {"answer": 42}

    schema = {"type": "object", "properties": {"answer": {"type": "string"}}, "required": ["answer"]}
    router = Router(FAST)
    router.register(
        FunctionAgent(
            wrong,
            agent_id="qa:ans:01",
            capabilities=[Capability(name="ask", output_schema=schema, weight=100, read_only=True)],
        )
    )

    async def right(payload: Any) -> Any:
        return {"answer": "42"}

    router.register(
        FunctionAgent(
            right,
            agent_id="qa:ans:02",
            capabilities=[Capability(name="ask", output_schema=schema, weight=1, read_only=True)],
        )
    )
    result = await router.route("ask", {})
    assert result.payload == {"answer": "42"}
    first = router.explain(result.task_id).attempts[0]
    assert first.error_type == "OutputValidationError"
    assert "field 'answer'" in (first.error or "")


# -- recursive reach -------------------------------------------------------------------------


async def test_drill_a_b_a_loop_is_stopped_at_the_first_repeat() -> None:
    router = Router(FAST)
    invoked: Counter[str] = Counter()

    async def a(message: ReachMessage) -> Any:
        invoked["a"] += 1
        return (await router.route("b", {})).model_dump(mode="json")

    async def b(message: ReachMessage) -> Any:
        invoked["b"] += 1
        return (await router.route("a", {})).model_dump(mode="json")

    router.register(FunctionAgent(a, agent_id="x:alpha:01", capabilities=[Capability(name="a")]))
    router.register(FunctionAgent(b, agent_id="x:beta:01", capabilities=[Capability(name="b")]))
    outer = await router.route("a", {})
    assert invoked == Counter({"a": 1, "b": 1})
    assert isinstance(outer.payload, dict)
    inner = outer.payload["payload"]
    assert isinstance(inner, dict)
    assert isinstance(inner["error"], str)
    assert inner["status"] == "rejected"
    assert inner["error_type"] == "LoopDetectedError"
    assert "x:alpha:01 → x:beta:01 → x:alpha:01" in inner["error"]
    rejected = await router.route("a", {}, lineage=["x:alpha:02"], depth=1)
    with pytest.raises(LoopDetectedError):
        raise_for_status(rejected)


async def test_depth_above_the_limit_is_rejected() -> None:
    router = Router(RoutingPolicy(max_depth=2))
    router.register(echo_agent("svc:work:01", capability="work"))
    result = await router.route("work", {}, depth=3, lineage=["a:a:1", "b:b:1", "c:c:1"])
    assert result.status is ResultStatus.REJECTED
    assert "depth 3 exceeds max_depth 2: a:a:1 → b:b:1 → c:c:1" in (result.error or "")


# -- health ----------------------------------------------------------------------------------


class Probed:
    def __init__(self, agent_id: str) -> None:
        self.agent_id = agent_id
        self.capabilities = [Capability(name="work")]
        self.healthy = True

    async def probe(self) -> bool:
        return self.healthy

    async def invoke(self, message: ReachMessage) -> Any:
        from reach_adapters.router.agent import ok_result

        return ok_result(message, self.agent_id, self.agent_id)


async def test_probes_take_agents_out_and_back() -> None:
    router = Router()
    agent = Probed("svc:probed:01")
    router.register(agent)
    router.register(echo_agent("svc:other:01", capability="work", weight=1))
    agent.healthy = False
    await router.probe_now()
    assert {a.agent_id: a.state for a in router.catalog()}["svc:probed:01"] is AgentState.SUSPICIOUS
    await router.probe_now()
    assert {a.agent_id: a.state for a in router.catalog()}["svc:probed:01"] is AgentState.OFFLINE
    assert "svc:probed:01" not in {(await router.route("work", {})).agent_id for _ in range(5)}
    agent.healthy = True
    await router.probe_now()
    assert {a.agent_id: a.state for a in router.catalog()}["svc:probed:01"] is AgentState.ONLINE


async def test_only_the_probe_lifts_an_offline_state_the_probe_set() -> None:
    class ProbedWithHandle(Probed):
        def attach(self, handle: AgentHandle) -> None:
            self.handle = handle

    router = Router()
    agent = ProbedWithHandle("svc:probed:01")
    router.register(agent)
    # The adapter's own word, even in the probe's words, is the adapter's to take back.
    agent.handle.set_state(AgentState.OFFLINE, "health probe failed")
    await router.probe_now()
    assert router.catalog()[0].state is AgentState.OFFLINE
    agent.handle.set_state(AgentState.ONLINE, "reconnected")
    agent.healthy = False
    await router.probe_now()
    await router.probe_now()
    assert router.catalog()[0].state is AgentState.OFFLINE
    agent.healthy = True
    await router.probe_now()
    assert router.catalog()[0].state is AgentState.ONLINE


async def test_background_probing_runs_on_its_interval() -> None:
    router = Router(RoutingPolicy(probe_interval_s=0.02, probe_timeout_s=0.5))
    agent = Probed("svc:probed:01")
    router.register(agent)
    agent.healthy = False
    await router.route("work", {})  # starts the background loop
    await eventually(lambda: router.catalog()[0].state is AgentState.OFFLINE, timeout=5)
    await router.aclose()


async def test_deregister_drains_in_flight_work_first() -> None:
    gate = Gate("svc:work:01")
    router = Router()
    router.register(gate.agent)
    router.register(echo_agent("svc:work:02", capability="work", weight=0))
    running = asyncio.create_task(router.send("svc:work:01", "in-flight"))
    await asyncio.sleep(0.02)
    leaving = asyncio.create_task(router.deregister("svc:work:01"))
    await asyncio.sleep(0.02)
    assert {a.agent_id: a.state for a in router.catalog()}["svc:work:01"] is AgentState.DRAINING
    assert (await router.route("work", "new")).agent_id == "svc:work:02"
    assert not leaving.done()
    gate.release.set()
    assert (await running).payload == "in-flight"
    await asyncio.wait_for(leaving, 2)
    assert [a.agent_id for a in router.catalog()] == ["svc:work:02"]


# -- drill: a replica dies mid-run -----------------------------------------------------------


async def test_drill_replica_killed_mid_run_loses_no_task() -> None:
    alive = {f"svc:replica:{i}": True for i in range(3)}
    done: Counter[str] = Counter()

    def replica(agent_id: str) -> FunctionAgent:
        async def work(message: ReachMessage) -> Any:
            await asyncio.sleep(0.002)
            if not alive[agent_id]:
                raise Down(f"{agent_id} is gone")
            done[message.meta_info.task_id] += 1
            return agent_id

        return FunctionAgent(
            work, agent_id=agent_id, capabilities=[Capability(name="job", max_concurrency=50)]
        )

    router = Router(FAST)
    for agent_id in alive:
        router.register(replica(agent_id))

    # Callers keep 30 tasks in flight, as a worker pool would.
    pool = asyncio.Semaphore(30)

    async def submit(n: int) -> Any:
        async with pool:
            if n == 250:
                alive["svc:replica:1"] = False
            return await router.route("job", {"n": n}, task_id=f"job-{n}", timeout_ms=5000)

    results = await asyncio.gather(*(submit(n) for n in range(600)))
    assert all(r.ok for r in results), Counter(r.status for r in results)
    assert len(done) == 600
    assert set(done.values()) == {1}
    late = [r.agent_id for r in results[400:]]
    assert "svc:replica:1" not in late
    assert {a.agent_id: a.breaker for a in router.catalog()}["svc:replica:1"] == "open"


async def test_probing_starts_when_a_probed_agent_is_registered_not_with_the_first_call() -> None:
    # A router that serves only an MCP server's reads, or waits, routes nothing for a while.
    router = Router(RoutingPolicy(probe_interval_s=0.02, probe_timeout_s=0.5))
    agent = Probed("svc:probed:01")
    agent.healthy = False
    router.register(agent)
    await eventually(lambda: router.catalog()[0].state is AgentState.OFFLINE, timeout=5)
    await router.aclose()


@pytest.mark.parametrize("closed", [True, False])
def test_probing_started_in_a_setup_loop_starts_again_on_the_loop_that_routes(closed: bool) -> None:
    router = Router(RoutingPolicy(probe_interval_s=0.02, probe_timeout_s=0.5))
    agent = Probed("svc:probed:01")

    async def setup() -> None:
        router.register(agent)

    setup_loop = asyncio.new_event_loop()
    # Stopped with the probing task still pending, as `run_until_complete` leaves it.
    setup_loop.run_until_complete(setup())
    if closed:
        setup_loop.close()

    async def serve() -> AgentState:
        agent.healthy = False
        await router.route("work", {})
        await eventually(lambda: router.catalog()[0].state is AgentState.OFFLINE, timeout=5)
        state = router.catalog()[0].state
        await router.aclose()
        return state

    try:
        assert asyncio.run(serve()) is AgentState.OFFLINE
    finally:
        setup_loop.close()


def test_a_router_probing_on_another_threads_loop_closes_from_this_one() -> None:
    class Counted(Probed):
        probes = 0

        async def probe(self) -> bool:
            Counted.probes += 1
            return True

    router = Router(RoutingPolicy(probe_interval_s=0.01, probe_timeout_s=0.5))
    loop = asyncio.new_event_loop()
    # Debug mode refuses a task of this loop being cancelled from another thread but through it.
    loop.set_debug(True)
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()

    async def setup() -> None:
        router.register(Counted("svc:probed:01"))

    try:
        asyncio.run_coroutine_threadsafe(setup(), loop).result(timeout=5)
        time.sleep(0.1)
        asyncio.run(router.aclose())
        time.sleep(0.05)
        probed = Counted.probes
        time.sleep(0.1)
        assert 0 < probed == Counted.probes
    finally:
        loop.call_soon_threadsafe(loop.stop)
        thread.join(timeout=5)
        loop.close()
