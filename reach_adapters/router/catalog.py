"""What `Router.catalog()` shows: each agent, its state, load and declarations."""

from __future__ import annotations

import time

from pydantic import BaseModel, ConfigDict

from reach_adapters.router.breaker import BreakerState
from reach_adapters.router.capability import Capability
from reach_adapters.router.state import AgentRuntime, AgentState

__all__ = ["AgentInfo", "agent_info"]


class AgentInfo(BaseModel):
    model_config = ConfigDict(frozen=True)

    agent_id: str
    state: AgentState
    state_reason: str
    breaker: BreakerState
    quarantined_for_s: float
    in_flight: int
    stuck: int
    health: float
    success_rate: float
    calls: int
    failures: int
    avg_ms: float
    capabilities: list[Capability]


def agent_info(runtime: AgentRuntime) -> AgentInfo:
    breaker = runtime.breaker
    open_for = breaker.open_until - time.monotonic() if breaker.state is BreakerState.OPEN else 0.0
    return AgentInfo(
        agent_id=runtime.agent_id,
        state=runtime.state,
        state_reason=runtime.state_reason,
        breaker=breaker.state,
        quarantined_for_s=round(max(open_for, 0.0), 3),
        in_flight=runtime.in_flight,
        stuck=runtime.stuck,
        health=round(runtime.health, 4),
        success_rate=round(runtime.success_rate, 4),
        calls=runtime.calls,
        failures=runtime.failures,
        avg_ms=round(runtime.avg_ms, 3),
        capabilities=[slot.capability for slot in runtime.slots],
    )
