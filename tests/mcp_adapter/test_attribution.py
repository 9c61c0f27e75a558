"""Across MCP: tool errors are the task's, hops carry the chain, loops are refused (issue 10)."""

from __future__ import annotations

import asyncio
import random
import time
from typing import Any

import pytest

from middleware import Fault, ReachMessage, ResultStatus
from reach_adapters import BreakerState, Capability, FunctionAgent, Router, RoutingPolicy
from reach_adapters.mcp import MCPServerAgent, RouterMCPServer
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
    assert (await router.route("add", {"a": 1, "b": 2})).payload == {"result": 3}


async def test_caller_mistakes_and_tool_errors_under_load_never_open_a_healthy_breaker() -> None:
    """20 % caller mistakes, 10 % tool errors, the rest good: every breaker stays closed."""

    def plus(a: int, b: int) -> int:
        return a + b

    policy = RoutingPolicy(backoff_ms=0.0, jitter_ms=0.0, breaker={"min_calls": 5})
    async with Router(policy) as router:
        for instance in ("a", "b"):
            router.register(
                await MCPServerAgent.connect("calc", command=PYTHON, args=[CALC], instance=instance)
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
        for options in ({"task_id": "loop-7"}, {}):
            began = time.monotonic()
            result = await router.send("mcp:far:0", {}, capability="ping", timeout_ms=20_000, **options)
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
