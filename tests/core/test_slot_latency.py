"""The usual latency is kept per capability of an agent, not one average over all its tools.

An MCP server serves a 2 ms ``echo`` and a 2 s report alike: judging the report by the echo's
time cut its attempts short on healthy replicas and held a caller's own tight deadline against
the server (quarantining it), against docs/reliability.md.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from middleware import Fault, ReachMessage, ResultStatus
from reach_adapters import BreakerState, Capability, FunctionAgent, Router
from tests.core.conftest import FAST, KeepsHandle, agent_info

pytestmark = pytest.mark.timeout(30)

SLOW_S = 0.3


class Tools(KeepsHandle, FunctionAgent):
    """An agent with a fast ``echo`` and a slow ``report`` (``slow_s``, as any capability
    re-declared later); `delays` sets a capability's own time. A call whose payload says ``hold``
    waits for `held` first. Keeps its handle, to re-declare its capabilities."""

    def __init__(self, agent_id: str, slow_s: float = SLOW_S) -> None:
        self.held = asyncio.Event()
        self.slow_s = slow_s
        self.delays: dict[str, float] = {"echo": 0.0}

        async def handle(message: ReachMessage) -> Any:
            payload = message.raw_payload
            if isinstance(payload, dict) and payload.get("hold"):
                await self.held.wait()
            await asyncio.sleep(self.delays.get(message.meta_info.capability or "", self.slow_s))
            return agent_id

        super().__init__(handle, agent_id=agent_id, capabilities=capabilities("echo", "report"))


def capabilities(*names: str, version: str = "1.0.0") -> list[Capability]:
    return [Capability(name=name, read_only=True, version=version) for name in names]


async def warm(router: Router, agent_id: str, capability: str, times: int) -> None:
    for _ in range(times):
        result = await router.send(agent_id, {}, capability=capability)
        assert result.ok, result.error


async def test_replicas_of_a_slow_tool_are_not_cut_by_their_fast_tools_time() -> None:
    # The everything server's long-running tool on two replicas, after echo calls only: each
    # attempt was cut to half the deadline (twice the echo's time fitted in it) and timed out.
    router = Router(FAST)
    for n in (1, 2):
        router.register(Tools(f"mcp:tools:0{n}"))
        await warm(router, f"mcp:tools:0{n}", "echo", 6)
    result = await router.route("report", {}, timeout_ms=500)
    assert result.ok, result.error
    assert result.attempts == 1
    assert all(agent_info(router, f"mcp:tools:0{n}").failures == 0 for n in (1, 2))


async def test_the_share_keeps_twice_the_slow_tools_own_usual_time() -> None:
    # Each replica answered the report once, then many echoes: its usual time for the report is
    # still 0.3 s, so half of 0.5 s is too little to cut an attempt to.
    router = Router(FAST)
    for n in (1, 2):
        router.register(Tools(f"mcp:tools:0{n}"))
        await warm(router, f"mcp:tools:0{n}", "report", 1)
        await warm(router, f"mcp:tools:0{n}", "echo", 10)
    results = [await router.route("report", {}, timeout_ms=500) for _ in range(2)]
    assert [(r.ok, r.attempts) for r in results] == [(True, 1)] * 2, [r.error for r in results]


async def test_a_tight_caller_deadline_after_fast_calls_is_not_held_against_the_agent() -> None:
    router = Router(FAST)
    router.register(Tools("mcp:tools:01"))
    await warm(router, "mcp:tools:01", "report", 1)
    await warm(router, "mcp:tools:01", "echo", 5)
    results = [await router.route("report", {}, timeout_ms=200) for _ in range(2)]
    assert [(r.status, r.fault) for r in results] == [(ResultStatus.TIMEOUT, Fault.ROUTER)] * 2
    assert all("it usually answers in 3" in (r.error or "") for r in results), results[0].error
    info = agent_info(router, "mcp:tools:01")
    assert (info.failures, info.breaker) == (0, BreakerState.CLOSED)
    # The agent-wide figure is still the catalog's: mostly the echoes'.
    assert info.avg_ms < 100


async def test_a_hung_fast_tool_is_not_excused_by_the_slow_tools_time() -> None:
    # 200 ms is far more than echo needs: its timeout is the agent's, whatever the report takes.
    router = Router(FAST)
    agent = Tools("mcp:tools:01")
    router.register(agent)
    await warm(router, "mcp:tools:01", "report", 5)
    await warm(router, "mcp:tools:01", "echo", 1)
    agent.delays["echo"] = 5.0
    result = await router.send("mcp:tools:01", {}, capability="echo", timeout_ms=200)
    assert (result.status, result.fault) == (ResultStatus.TIMEOUT, Fault.AGENT), result.error


async def test_a_new_capability_of_a_known_agent_is_judged_by_the_agent_wide_time() -> None:
    router = Router(FAST)
    agent = Tools("mcp:tools:01")
    router.register(agent)
    await warm(router, "mcp:tools:01", "report", 5)
    agent.handle.set_capabilities(capabilities("echo", "report", "digest"))
    agent.delays["digest"] = 5.0
    # No digest has answered yet: it usually needs what the agent's calls do (0.3 s).
    result = await router.send("mcp:tools:01", {}, capability="digest", timeout_ms=200)
    assert (result.status, result.fault) == (ResultStatus.TIMEOUT, Fault.ROUTER), result.error
    # ... and a hang past twice that is its own.
    result = await router.send("mcp:tools:01", {}, capability="digest", timeout_ms=700)
    assert (result.status, result.fault) == (ResultStatus.TIMEOUT, Fault.AGENT), result.error


async def test_a_re_declaration_keeps_each_tools_usual_time() -> None:
    # An MCP server's tools/list_changed re-declares its tools: the ones it still serves keep
    # their figures; one in another version starts again from the agent-wide figure.
    router = Router(FAST)
    agent = Tools("mcp:tools:01")
    router.register(agent)
    await warm(router, "mcp:tools:01", "report", 1)
    await warm(router, "mcp:tools:01", "echo", 10)
    agent.handle.set_capabilities(capabilities("echo", "report", "digest"))
    kept = await router.route("report", {}, timeout_ms=200)
    assert (kept.status, kept.fault) == (ResultStatus.TIMEOUT, Fault.ROUTER), kept.error
    agent.handle.set_capabilities(capabilities("echo", "report", version="2.0.0"))
    again = await router.route("report", {}, timeout_ms=200)
    assert (again.status, again.fault) == (ResultStatus.TIMEOUT, Fault.AGENT), again.error


async def test_least_wait_weighs_the_queue_by_the_capabilitys_own_time() -> None:
    # A's echoes are fast, its report slow (1 s); B has only a 0.2 s report. With one report in
    # flight on each, the next waits least on B.
    router = Router(FAST.model_copy(update={"strategy": "least_wait"}))
    a, b = Tools("mcp:tools:01", slow_s=1.0), Tools("mcp:tools:02", slow_s=0.2)
    router.register(a)
    router.register(b)
    await warm(router, "mcp:tools:01", "report", 1)
    await warm(router, "mcp:tools:01", "echo", 15)
    await warm(router, "mcp:tools:02", "report", 1)
    held = [
        asyncio.create_task(router.send(agent_id, {"hold": True}, capability="report"))
        for agent_id in ("mcp:tools:01", "mcp:tools:02")
    ]
    await asyncio.sleep(0.05)
    a.slow_s = b.slow_s = 0.0
    result = await router.route("report", {})
    assert result.agent_id == "mcp:tools:02"
    scores = {c.agent_id: c.breakdown for c in router.explain(result.task_id).candidates}
    assert scores["mcp:tools:01"]["avg_ms"] > 900
    a.held.set()
    b.held.set()
    assert all(r.ok for r in await asyncio.gather(*held))
