"""Across MCP: tool errors are the task's, hops carry the chain, loops are refused (issue 10)."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import pytest

from middleware import Fault, ReachMessage, ResultStatus
from reach_adapters import BreakerState, CallOptions, Capability, FunctionAgent, Router, RoutingPolicy
from reach_adapters.mcp import MCPOptions, MCPServerAgent, RouterMCPServer
from tests.mcp_adapter.conftest import CALC, PYTHON

pytestmark = pytest.mark.timeout(90)


async def test_a_tool_error_is_the_tasks_and_leaves_the_server_healthy(
    router: Router, calc: MCPServerAgent
) -> None:
    router.register(calc)
    for _ in range(6):
        result = await router.route("fail", {"reason": "bad revision"})
        assert (result.status, result.fault, result.delivered) == (ResultStatus.ERROR, Fault.TASK, True)
        assert result.error_type == "MCPToolError"
        assert "bad revision" in (result.error or "")
        assert result.attempts == 1
    info = router.catalog()[0]
    assert (info.breaker, info.failures) == (BreakerState.CLOSED, 0)
    assert (await router.route("add", {"a": 1, "b": 2})).payload == 3


async def test_caller_mistakes_and_tool_errors_under_load_never_open_a_healthy_breaker() -> None:
    """20 % caller mistakes, 10 % tool errors, the rest good: every breaker stays closed."""

    def plus(a: int, b: int) -> int:
        return a + b

    policy = RoutingPolicy(backoff_ms=0.0, jitter_ms=0.0, breaker={"min_calls": 5})
    async with Router(policy) as router:
        for instance in ("a", "b"):
            router.register(
                await MCPServerAgent.connect(
                    "calc", command=PYTHON, args=[CALC], options=MCPOptions(instance=instance)
                )
            )
        for n in (1, 2):
            router.register(FunctionAgent(plus, agent_id=f"math:plus:0{n}"))
        rng = random.Random(10)
        calls: list[Any] = []
        for i in range(300):
            kind = rng.random()
            if kind < 0.1:
                calls.append(("tool error", router.route("fail", {"reason": f"no such file {i}"})))
            elif kind < 0.2:
                calls.append(("caller", router.route("add", {"a": "one", "b": 2})))
            elif kind < 0.3:
                calls.append(("caller", router.route("plus", {"a": 1, "b": 2, "c": 3})))
            elif kind < 0.65:
                calls.append(("ok", router.route("add", {"a": i, "b": 1})))
            else:
                calls.append(("ok", router.route("plus", {"a": i, "b": 1})))
        kinds = [kind for kind, _ in calls]
        results = []
        for start in range(0, len(calls), 30):
            results += await asyncio.gather(*(coro for _, coro in calls[start : start + 30]))
        for kind, result in zip(kinds, results, strict=True):
            if kind == "ok":
                assert result.ok, result.error
            elif kind == "caller":
                assert (result.status, result.fault) == (ResultStatus.INVALID, Fault.CALLER)
            else:
                assert (result.status, result.fault) == (ResultStatus.ERROR, Fault.TASK)
        assert kinds.count("caller") >= 40
        assert kinds.count("tool error") >= 20
        for info in router.catalog():
            assert (info.agent_id, info.breaker, info.failures) == (info.agent_id, BreakerState.CLOSED, 0)


async def test_an_mcp_hop_carries_the_task_one_level_deeper(router: Router) -> None:
    seen: list[Any] = []

    async def record(message: ReachMessage) -> Any:
        meta = message.meta_info
        seen.append((meta.task_id, meta.trace_id, meta.depth, meta.lineage))
        return "seen"

    async with Router() as far_router:
        far_router.register(
            FunctionAgent(record, agent_id="far:record:01", capabilities=[Capability(name="record")])
        )
        served = RouterMCPServer(far_router)
        router.register(await MCPServerAgent.connect("far", server=served.server))
        result = await router.route("record", {}, task_id="hop-1")
    assert result.ok, result.error
    assert seen == [("hop-1", result.trace_id, 1, ["mcp:far:0"])]


async def test_a_task_looping_between_two_routers_is_refused_at_once(router: Router) -> None:
    async def ping(payload: Any) -> str:
        return "pong"

    router.register(FunctionAgent(ping, agent_id="near:ping:01", capabilities=[Capability(name="ping")]))
    async with Router() as far_router:
        near_served = RouterMCPServer(router)
        far_served = RouterMCPServer(far_router)
        # far reaches near's tools, then near reaches far's: each is the other's agent.
        far_router.register(await MCPServerAgent.connect("near", server=near_served.server))
        router.register(await MCPServerAgent.connect("far", server=far_served.server))
        for options in (CallOptions(timeout_ms=20_000, task_id="loop-7"), CallOptions(timeout_ms=20_000)):
            began = time.monotonic()
            result = await router.send("mcp:far:0", {}, capability="ping", **options)
            assert time.monotonic() - began < 5.0, "the task waited on itself"
            assert (result.status, result.error_type, result.fault) == (
                ResultStatus.REJECTED,
                "LoopDetectedError",
                Fault.CALLER,
            )
            assert "mcp:far:0 → mcp:near:0" in (result.error or "")
        for info in [*router.catalog(), *far_router.catalog()]:
            assert (info.breaker, info.failures) == (BreakerState.CLOSED, 0)
        assert (await router.route("ping", {}, namespace="near")).payload == "pong"


async def test_a_retry_through_another_gateway_shares_the_first_run(router: Router) -> None:
    runs: list[Any] = []

    async def work(payload: Any) -> Any:
        runs.append(payload)
        await asyncio.sleep(0.5)
        return {"done": payload}

    router.register(FunctionAgent(work, agent_id="near:work:01", capabilities=[Capability(name="work")]))
    async with Router() as gateway:
        gateway.register(await MCPServerAgent.connect("near", server=RouterMCPServer(router).server))
        first = asyncio.create_task(router.route("work", {"n": 1}, task_id="order-42", timeout_ms=10_000))
        await asyncio.sleep(0.1)
        # The client gave up waiting and retries through the other gateway, payload and all.
        again = await gateway.route("work", {"n": 1}, task_id="order-42", timeout_ms=10_000)
        assert (await first).ok
    assert again.ok, again.error
    assert again.payload == {"done": {"n": 1}}
    assert runs == [{"n": 1}]


async def test_no_payload_and_an_empty_one_are_the_same_request_across_a_hop(router: Router) -> None:
    async def hello() -> str:
        return "hello"

    router.register(FunctionAgent(hello, agent_id="near:hello:01"))
    async with Router() as gateway:
        gateway.register(await MCPServerAgent.connect("near", server=RouterMCPServer(router).server))
        first = await router.route("hello", None, task_id="h-1")
        again = await gateway.route("hello", None, task_id="h-1")
    assert (first.ok, again.ok) == (True, True), again.error


async def test_a_far_routers_word_on_delivery_and_fault_carries_over(router: Router) -> None:
    gate = asyncio.Event()

    async def work(payload: Any) -> str:
        await gate.wait()
        return "done"

    async def broken(payload: Any) -> str:
        raise RuntimeError("bug far away")

    async with Router(RoutingPolicy(max_waiting=0)) as far:
        far.register(
            FunctionAgent(
                work, agent_id="far:work:01", capabilities=[Capability(name="work", max_concurrency=1)]
            )
        )
        far.register(
            FunctionAgent(broken, agent_id="far:broken:01", capabilities=[Capability(name="broken")])
        )
        router.register(await MCPServerAgent.connect("far", server=RouterMCPServer(far).server))
        busy = asyncio.create_task(far.route("work", {}))
        await asyncio.sleep(0.1)
        refused = await router.route("work", {}, task_id="w-1")
        # Far never delivered it: near says so too, and a repeat may try again.
        assert (refused.status, refused.fault, refused.delivered) == (
            ResultStatus.NO_CANDIDATE,
            Fault.ROUTER,
            False,
        )
        gate.set()
        await busy
        assert (await router.route("work", {}, task_id="w-1")).ok
        for _ in range(3):
            failed = await router.route("broken", {})
            assert failed.fault is Fault.ROUTER
        # Far's agent is quarantined there; the far gateway itself stays healthy here.
        assert [i.breaker for i in far.catalog() if i.agent_id == "far:broken:01"] == [BreakerState.OPEN]
        assert router.catalog()[0].breaker is BreakerState.CLOSED
        assert (await router.route("work", {})).ok
