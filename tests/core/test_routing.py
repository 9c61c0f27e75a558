"""Routing through a real in-process router: modes, strategies, fallback, errors, records."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections import Counter
from typing import Any

import pytest

from middleware import Fault, MetaInfo, ReachMessage, ReachResult, ResultStatus, RoutingHint
from reach_adapters import (
    AgentState,
    Capability,
    DuplicateAgentError,
    FunctionAgent,
    InvalidDeclarationError,
    InvalidMessageError,
    InvalidPolicyError,
    NoCandidateError,
    PayloadValidationError,
    Router,
    RoutingPolicy,
    SyncCallError,
    UnknownAgentError,
    UnknownTaskError,
    raise_for_status,
)
from reach_adapters.router import error_result
from tests.core.conftest import FAST, Gate, echo_agent

pytestmark = pytest.mark.timeout(20)


async def test_route_reaches_the_agent_and_records_the_decision() -> None:
    router = Router()
    router.register(echo_agent("util:echo:01"))
    router.register(echo_agent("util:echo:02", weight=10))
    result = await router.route("echo", {"text": "hi"})
    assert result.ok
    assert result.payload == {"agent": "util:echo:01", "payload": {"text": "hi"}}
    assert result.agent_id == "util:echo:01"
    assert result.attempts == 1
    assert result.served_by == "candidate"
    assert result.capability == "echo"
    assert result.trace_id
    assert result.timings.total_ms >= result.timings.agent_ms > 0
    record = router.explain(result.task_id)
    assert record.chosen == "util:echo:01"
    assert [c.agent_id for c in record.candidates] == ["util:echo:01", "util:echo:02"]
    top = record.candidates[0]
    assert top.breakdown == {"weight": 0.4, "health": 0.3, "load": -0.0, "affinity": 0.0}
    assert "scored" in record.why_not("util:echo:02")
    assert record.why_not("util:echo:01").endswith("was chosen")


async def test_payload_reaches_function_as_keyword_arguments() -> None:
    async def polish(content: str, style: str = "formal") -> str:
        return f"{style}:{content}"

    router = Router()
    router.register(FunctionAgent(polish, agent_id="writer:polish:01"))
    assert (await router.route("polish", {"content": "x", "style": "casual"})).payload == "casual:x"
    bad = await router.route("polish", {"style": "casual"})
    assert bad.status is ResultStatus.INVALID
    assert bad.error_type == "PayloadValidationError"
    assert "field 'content': \"content\" is a required property" in (bad.error or "")
    with pytest.raises(PayloadValidationError):
        raise_for_status(bad)


async def test_sync_functions_run_off_the_loop() -> None:
    loop_thread = threading.get_ident()
    seen: list[int] = []

    def blocking(payload: Any) -> Any:
        seen.append(threading.get_ident())
        return payload

    router = Router()
    router.register(FunctionAgent(blocking, agent_id="util:block:01", capabilities=[Capability(name="b")]))
    assert (await router.route("b", 5)).payload == 5
    assert seen
    assert seen[0] != loop_thread


async def test_unknown_capability_says_what_exists() -> None:
    router = Router()
    router.register(echo_agent("util:echo:01"))
    result = await router.route("ecko", {})
    assert result.status is ResultStatus.NO_CANDIDATE
    assert result.error_type == "NoCandidateError"
    assert "'ecko'" in (result.error or "")
    assert "echo" in (result.error or "")
    with pytest.raises(NoCandidateError, match="ecko"):
        raise_for_status(result)
    # The router keeps serving every other call.
    assert (await router.route("echo", 1)).ok


async def test_version_and_namespace_scope_candidates() -> None:
    router = Router()
    router.register(echo_agent("legal:review:01", capability="review", version="1"))
    router.register(echo_agent("legal:review:02", capability="review", version="2"))
    router.register(echo_agent("sales:review:01", capability="review", version="2"))
    v2 = await router.route("review", {}, version="2", namespace="legal")
    assert v2.agent_id == "legal:review:02"
    missing = await router.route("review", {}, version="3")
    assert "version(s) ['1', '2'], not '3'" in (missing.error or "")
    nowhere = await router.route("review", {}, namespace="hr")
    assert "namespace 'hr'" in (nowhere.error or "")


async def test_send_is_directed_and_unknown_agents_are_named() -> None:
    router = Router()
    router.register(echo_agent("util:echo:01"))
    router.register(echo_agent("util:echo:02"))
    for _ in range(3):
        assert (await router.send("util:echo:02", {"n": 1})).agent_id == "util:echo:02"
    unknown = await router.send("util:echo:99", {})
    assert unknown.status is ResultStatus.NO_CANDIDATE
    assert unknown.error_type == "UnknownAgentError"
    with pytest.raises(UnknownAgentError, match="util:echo:99"):
        raise_for_status(unknown)
    wrong = await router.send("util:echo:01", {}, capability="summarize")
    assert "does not declare 'summarize'" in (wrong.error or "")


async def test_dispatch_takes_messages_and_dicts() -> None:
    router = Router()
    router.register(echo_agent("util:echo:01"))
    message = ReachMessage(raw_payload=[1], meta_info=MetaInfo(capability="echo"))
    assert (await router.dispatch(message)).payload == {"agent": "util:echo:01", "payload": [1]}
    as_dict = {"raw_payload": "x", "meta_info": {"capability": "echo"}, "routing_hint": {"mode": "unicast"}}
    assert (await router.dispatch(as_dict)).ok
    directed = ReachMessage(raw_payload=2, routing_hint=RoutingHint(mode="directed", target="util:echo:01"))
    assert (await router.dispatch(directed)).agent_id == "util:echo:01"


@pytest.mark.parametrize(
    "bad",
    [
        {"raw_payload": 1, "meta_info": {"capability": 5}},
        {"raw_payload": 1, "meta_info": {"priority": "high"}},
        {"raw_payload": 1, "routing_hint": {"mode": "sideways"}},
        {"meta_info": {}, "extra_field": 1},
        "not a message",
    ],
)
async def test_malformed_messages_raise_invalid_message(bad: Any) -> None:
    router = Router()
    router.register(echo_agent("util:echo:01"))
    with pytest.raises(InvalidMessageError):
        await router.dispatch(bad)
    assert (await router.route("echo", 1)).ok


async def test_bad_call_arguments_raise_invalid_message() -> None:
    router = Router()
    router.register(echo_agent("util:echo:01"))
    with pytest.raises(
        InvalidMessageError, match=r"payload is not JSON data: payload\.f is a builtins\.builtin_function"
    ):
        await router.route("echo", {"f": print})
    with pytest.raises(InvalidMessageError, match="field 'timeout_ms'"):
        await router.route("echo", {}, timeout_ms=-1)
    with pytest.raises(InvalidMessageError, match="capability must be a non-empty string"):
        await router.route("", {})
    with pytest.raises(InvalidMessageError, match="'colour'"):
        await router.route("echo", {}, colour="red")  # type: ignore[call-arg]
    unknown_strategy = await router.route("echo", {}, strategy="fastest")
    assert unknown_strategy.status is ResultStatus.INVALID
    assert "fastest" in (unknown_strategy.error or "")


async def test_registration_errors() -> None:
    router = Router()
    router.register(echo_agent("util:echo:01"))
    with pytest.raises(DuplicateAgentError, match="already registered") as duplicate:
        router.register(echo_agent("util:echo:01"))
    assert "another type for a different agent" in str(duplicate.value)
    with pytest.raises(InvalidDeclarationError, match="is not an agent"):
        router.register(object())  # type: ignore[arg-type]
    with pytest.raises(UnknownAgentError):
        await router.deregister("util:echo:77")
    with pytest.raises(UnknownTaskError, match="decision_log_size"):
        router.explain("no-such-task")


async def test_agent_that_raises_becomes_an_error_result_and_counts_against_it() -> None:
    async def broken(payload: Any) -> Any:
        raise ValueError("bad ledger")

    router = Router()
    router.register(FunctionAgent(broken, agent_id="acct:ledger:01", capabilities=[Capability(name="post")]))
    result = await router.route("post", {})
    assert result.status is ResultStatus.ERROR
    assert result.error_type == "ValueError"
    assert result.error == "bad ledger"
    (info,) = router.catalog()
    assert info.failures == 1
    assert info.success_rate < 1


async def test_non_json_output_is_a_clear_error() -> None:
    async def leaky(payload: Any) -> Any:
        return {"handle": object()}

    router = Router()
    router.register(FunctionAgent(leaky, agent_id="x:leak:01", capabilities=[Capability(name="leak")]))
    result = await router.route("leak", {})
    assert result.error_type == "NotJsonSafeError"
    assert "output.handle is a builtins.object" in (result.error or "")


async def test_broadcast_merges_and_reports_every_target() -> None:
    async def fail(payload: Any) -> Any:
        raise RuntimeError("nope")

    async def slow(payload: Any) -> Any:
        await asyncio.sleep(5)
        return "late"

    router = Router()
    router.register(echo_agent("news:sum:01", capability="summarize"))
    router.register(FunctionAgent(fail, agent_id="news:sum:02", capabilities=[Capability(name="summarize")]))
    everyone = await router.broadcast("summarize", {"text": "t"})
    assert everyone.status is ResultStatus.PARTIAL
    assert set(everyone.payload) == {"news:sum:01"}  # type: ignore[arg-type]
    by_agent = {r.agent_id: r for r in everyone.results or []}
    assert by_agent["news:sum:02"].error_type == "RuntimeError"

    router.register(FunctionAgent(slow, agent_id="news:sum:03", capabilities=[Capability(name="summarize")]))
    first = await router.broadcast("summarize", {"text": "t"}, merge="first_success")
    assert first.ok
    assert first.agent_id == "news:sum:01"
    statuses = {r.agent_id: r.status for r in first.results or []}
    assert statuses["news:sum:03"] is ResultStatus.CANCELLED
    assert len(first.results or []) == 3
    record = router.explain(first.task_id)
    assert {a.agent_id for a in record.attempts} >= {"news:sum:01"}


async def test_broadcast_all_failing_is_an_error_not_silence() -> None:
    async def fail(payload: Any) -> Any:
        raise RuntimeError("down")

    router = Router()
    for i in range(2):
        router.register(FunctionAgent(fail, agent_id=f"x:f:{i}", capabilities=[Capability(name="c")]))
    result = await router.broadcast("c", {})
    assert result.status is ResultStatus.ERROR
    assert "no target of the broadcast succeeded" in (result.error or "")
    assert [r.error for r in result.results or []] == ["down", "down"]


async def test_broadcast_whose_targets_all_fail_alike_says_how() -> None:
    async def hang(payload: Any) -> Any:
        await asyncio.sleep(5)

    router = Router()
    for i in range(2):
        router.register(FunctionAgent(hang, agent_id=f"x:h:{i}", capabilities=[Capability(name="c")]))
    result = await router.broadcast("c", {}, timeout_ms=100)
    await router.aclose()
    assert (result.status, result.error_type) == (ResultStatus.TIMEOUT, "ReachTimeoutError"), result.error
    assert "no target of the broadcast succeeded" in (result.error or "")


async def test_broadcast_whose_targets_all_answered_part_is_an_error_of_its_own() -> None:
    """`partial` (some targets answered) or a refusal whose details only each target's result
    holds (a quota's retry time) would say what is not so of the broadcast as a whole."""

    class Part:
        capabilities = (Capability(name="c"),)

        def __init__(self, agent_id: str) -> None:
            self.agent_id = agent_id

        async def invoke(self, message: ReachMessage) -> ReachResult:
            return error_result(message, ResultStatus.PARTIAL, "Partial", "half", fault=Fault.TASK)

    router = Router()
    for i in range(2):
        router.register(Part(f"x:p:{i}"))
    result = await router.broadcast("c", {})
    await router.aclose()
    assert (result.status, result.error_type) == (ResultStatus.ERROR, "AgentCallError"), result.error


async def test_fallback_then_default_agent() -> None:
    async def fail(payload: Any) -> Any:
        raise RuntimeError("primary down")

    router = Router(FAST, default_agent="ops:human:01")
    # Safe to repeat: an agent that raised may have started the work, and only then may another redo it.
    main = Capability(name="handle", idempotent=True)
    router.register(FunctionAgent(fail, agent_id="svc:main:01", capabilities=[main]))
    router.register(echo_agent("svc:backup:01", capability="handle"))
    router.register(echo_agent("ops:human:01", capability="anything"))
    via_fallback = await router.send("svc:main:01", {}, fallback=["svc:backup:01"])
    assert via_fallback.ok
    assert via_fallback.served_by == "fallback"
    assert via_fallback.agent_id == "svc:backup:01"
    via_default = await router.route("unheard-of", {})
    assert via_default.ok
    assert via_default.served_by == "default"
    assert via_default.agent_id == "ops:human:01"
    record = router.explain(via_default.task_id)
    assert record.path == "default"
    assert record.attempts[-1].path == "default"


async def test_max_concurrency_is_never_exceeded() -> None:
    gate = Gate("svc:work:01", max_concurrency=3, timeout_ms=5000)
    router = Router()
    router.register(gate.agent)
    calls = [asyncio.create_task(router.route("work", i)) for i in range(12)]
    await asyncio.sleep(0.05)
    assert gate.running == 3
    gate.release.set()
    results = await asyncio.gather(*calls)
    assert all(r.ok for r in results)
    assert gate.peak == 3
    assert max(r.timings.queueing_ms for r in results) > 0


async def test_weighted_prefers_idle_and_heavier_agents() -> None:
    busy = Gate("svc:work:01", max_concurrency=4)
    idle = Gate("svc:work:02", max_concurrency=4)
    router = Router()
    router.register(busy.agent)
    router.register(idle.agent)
    first = asyncio.create_task(router.send("svc:work:01", "hold"))
    await asyncio.sleep(0.02)
    second = asyncio.create_task(router.route("work", "next"))
    await asyncio.sleep(0.02)
    assert idle.calls["next"] == 1
    busy.release.set()
    idle.release.set()
    await asyncio.gather(first, second)


async def test_rating_strategy_spreads_by_rating() -> None:
    router = Router(RoutingPolicy(strategy="rating"))
    for i in range(3):
        router.register(echo_agent(f"svc:echo:{i}"))
    seen = Counter([(await router.route("echo", i)).agent_id for i in range(30)])
    assert seen == Counter({"svc:echo:0": 10, "svc:echo:1": 10, "svc:echo:2": 10})


async def test_least_wait_picks_the_shortest_queue() -> None:
    slow = Gate("svc:work:01")
    fast = Gate("svc:work:02")
    router = Router(RoutingPolicy(strategy="least_wait"))
    router.register(slow.agent)
    router.register(fast.agent)
    fast.release.set()
    for i in range(3):
        await router.send("svc:work:02", i)
    holds = [asyncio.create_task(router.send("svc:work:01", f"h{i}")) for i in range(3)]
    await asyncio.sleep(0.02)
    chosen = await router.route("work", "q")
    assert chosen.agent_id == "svc:work:02"
    assert router.explain(chosen.task_id).candidates[0].breakdown["queue"] == 0.0
    slow.release.set()
    await asyncio.gather(*holds)


async def test_decision_log_is_bounded() -> None:
    router = Router(RoutingPolicy(decision_log_size=5))
    router.register(echo_agent("util:echo:01"))
    ids = [(await router.route("echo", i)).task_id for i in range(8)]
    router.explain(ids[-1])
    with pytest.raises(UnknownTaskError):
        router.explain(ids[0])


async def test_catalog_and_reachable() -> None:
    router = Router()
    router.register(echo_agent("util:echo:01"))
    router.register(echo_agent("util:other:01", capability="other"))
    changes: list[int] = []
    remove = router.on_catalog_change(lambda: changes.append(1))
    assert set(router.reachable()) == {"echo", "other"}
    await router.deregister("util:other:01")
    assert set(router.reachable()) == {"echo"}
    assert changes == [1, 1]  # draining, then removed
    remove()
    info = router.catalog()[0]
    assert info.agent_id == "util:echo:01"
    assert info.state is AgentState.ONLINE
    assert info.breaker == "closed"


def test_sync_twins_without_a_loop() -> None:
    router = Router()
    router.register(echo_agent("util:echo:01"))
    try:
        assert router.route_sync("echo", 1).ok
        assert router.send_sync("util:echo:01", 2).ok
        assert router.broadcast_sync("echo", 3).ok
        assert router.dispatch_sync({"raw_payload": 4, "meta_info": {"capability": "echo"}}).ok
    finally:
        router.close()


async def test_sync_twin_from_another_thread_while_the_loop_runs() -> None:
    router = Router()
    router.register(echo_agent("util:echo:01"))
    await router.route("echo", 0)  # binds the router to this loop
    result = await asyncio.to_thread(router.route_sync, "echo", 7)
    assert result.ok
    assert result.payload == {"agent": "util:echo:01", "payload": 7}


async def test_sync_twin_inside_the_serving_loop_is_refused() -> None:
    router = Router()
    router.register(echo_agent("util:echo:01"))
    await router.route("echo", 0)
    with pytest.raises(SyncCallError, match=r"await router\.route"):
        router.route_sync("echo", 1)


async def test_policy_can_be_updated_while_running() -> None:
    router = Router()
    for i in range(3):
        router.register(echo_agent(f"svc:echo:{i}"))
    await router.route("echo", 0)
    router.update_policy(RoutingPolicy(strategy="rating", decision_log_size=2))
    seen = Counter([(await router.route("echo", i)).agent_id for i in range(6)])
    assert seen == Counter({"svc:echo:0": 2, "svc:echo:1": 2, "svc:echo:2": 2})
    assert router.explain((await router.route("echo", 9)).task_id).strategy == "rating"
    assert len(router.catalog()) == 3
    with pytest.raises(InvalidPolicyError):
        router.update_policy({"strategy": "rating"})  # type: ignore[arg-type]


async def test_no_payload_is_an_empty_object_for_object_schemas() -> None:
    async def pid() -> int:
        return 7

    router = Router()
    router.register(FunctionAgent(pid, agent_id="sys:pid:01"))
    assert router.catalog()[0].capabilities[0].input_schema["type"] == "object"
    assert (await router.route("pid")).payload == 7


async def test_an_agent_may_be_redeclared_with_no_capabilities() -> None:
    handles: list[Any] = []

    class Server:
        agent_id = "mcp:tools:0"
        capabilities = [Capability(name="t")]

        def attach(self, handle: Any) -> None:
            handles.append(handle)

        async def invoke(self, message: ReachMessage) -> Any:
            raise AssertionError("never called")

    router = Router(default_agent="mcp:tools:0")
    router.register(Server())
    handles[0].set_capabilities([])
    assert router.reachable() == {}
    result = await router.route("t", {})
    assert result.status is ResultStatus.NO_CANDIDATE
    assert "declares no capabilities now" in router.explain(result.task_id).why_not("mcp:tools:0")


async def test_a_sync_call_its_blocked_home_loop_would_have_to_serve_is_refused() -> None:
    calls: list[int] = []

    async def count(payload: int) -> int:
        calls.append(payload)
        return payload

    router = Router(RoutingPolicy(sync_start_timeout_s=0.5))
    router.register(FunctionAgent(count, agent_id="util:count:01", call_style="payload"))
    await router.route("count", 0)
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        # This loop's thread waits on the worker, as a sync agent.invoke() in async code does.
        waiting = pool.submit(router.route_sync, "count", 1)
        with pytest.raises(SyncCallError, match="runs but does not take the call"):
            waiting.result(timeout=30)
    await asyncio.sleep(0.05)
    assert calls == [0]  # refused before it started, so it never runs later either


async def test_a_sync_call_is_refused_on_the_routers_loop_whatever_ran_first() -> None:
    router = Router()
    router.register(echo_agent("util:echo:01"))
    try:
        # Never awaited yet: the call runs on the private loop (this loop waits, as in a notebook).
        assert router.route_sync("echo", 1).ok
        await router.route("echo", 2)
        with pytest.raises(SyncCallError, match=r"await router\.route"):
            router.route_sync("echo", 3)
    finally:
        await asyncio.to_thread(router.close)


def test_sync_calls_queue_on_the_private_loop_however_long_it_is_busy() -> None:
    gate = threading.Event()

    async def hog(payload: str) -> str:
        gate.wait(5)  # blocks the private loop, as a badly written async agent does
        return payload

    router = Router(RoutingPolicy(sync_start_timeout_s=0.1))
    router.register(FunctionAgent(hog, agent_id="util:hog:01", call_style="payload"))
    try:
        with concurrent.futures.ThreadPoolExecutor(2) as pool:
            first = pool.submit(router.route_sync, "hog", "a")
            second = pool.submit(router.route_sync, "hog", "b")
            threading.Timer(0.5, gate.set).start()
            assert first.result(timeout=30).payload == "a"
            assert second.result(timeout=30).payload == "b"
    finally:
        router.close()


def test_a_sync_call_from_an_agent_on_the_private_loop_is_refused_at_once() -> None:
    async def nested(payload: Any) -> Any:
        return router.route_sync("echo", payload)

    router = Router()
    router.register(echo_agent("util:echo:01"))
    router.register(FunctionAgent(nested, agent_id="util:nested:01", call_style="payload"))
    try:
        result = router.route_sync("nested", 1)
        assert (result.status, result.error_type) == (ResultStatus.ERROR, "SyncCallError")
        assert "await router.route" in (result.error or "")
    finally:
        router.close()


async def test_membership_says_which_agent_ids_are_registered() -> None:
    router = Router()
    router.register(echo_agent("util:echo:01"))
    assert "util:echo:01" in router
    assert "util:echo:02" not in router
    await router.deregister("util:echo:01")
    assert "util:echo:01" not in router


async def test_recent_decisions_come_newest_first_and_by_capability() -> None:
    router = Router()
    router.register(echo_agent("util:echo:01"))
    router.register(FunctionAgent(str.upper, agent_id="util:upper:01", call_style="payload"))
    first = await router.route("echo", 1)
    upper = await router.route("upper", "a")
    last = await router.route("echo", 2)
    assert [r.task_id for r in router.recent_decisions()] == [last.task_id, upper.task_id, first.task_id]
    assert [r.task_id for r in router.recent_decisions(capability="echo")] == [last.task_id, first.task_id]
    assert [r.task_id for r in router.recent_decisions(1)] == [last.task_id]
