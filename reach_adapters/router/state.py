"""Live state the router keeps per agent and per (agent, capability) slot."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from enum import StrEnum

from reach_adapters.router.agent import Agent
from reach_adapters.router.capability import Capability
from reach_adapters.router.identity import AgentId

__all__ = ["AgentRuntime", "AgentState", "Slot"]

# Smoothing of the moving averages: recent calls matter most, one outlier does not swing routing.
_LATENCY_ALPHA = 0.2
_SUCCESS_ALPHA = 0.2


class AgentState(StrEnum):
    ONLINE = "online"
    BUSY = "busy"
    DRAINING = "draining"
    OFFLINE = "offline"
    SUSPICIOUS = "suspicious"


# What each state contributes to the health score; DRAINING and OFFLINE are never candidates.
_STATE_HEALTH = {
    AgentState.ONLINE: 1.0,
    AgentState.BUSY: 0.5,
    AgentState.SUSPICIOUS: 0.3,
    AgentState.DRAINING: 0.0,
    AgentState.OFFLINE: 0.0,
}


@dataclass(slots=True, eq=False)
class AgentRuntime:
    """One registered agent: its identity, state and call statistics."""

    agent: Agent
    agent_id: str
    ident: AgentId
    state: AgentState = AgentState.ONLINE
    in_flight: int = 0
    calls: int = 0
    failures: int = 0
    avg_ms: float = 0.0
    success_rate: float = 1.0
    registered_at: float = field(default_factory=time.time)
    last_call_at: float = 0.0
    slots: list[Slot] = field(default_factory=list)

    @property
    def health(self) -> float:
        return _STATE_HEALTH[self.state] * self.success_rate

    def record(self, success: bool, elapsed_ms: float) -> None:
        self.calls += 1
        self.last_call_at = time.time()
        if not success:
            self.failures += 1
        self.avg_ms = (
            elapsed_ms if self.calls == 1 else self.avg_ms + _LATENCY_ALPHA * (elapsed_ms - self.avg_ms)
        )
        self.success_rate += _SUCCESS_ALPHA * ((1.0 if success else 0.0) - self.success_rate)


@dataclass(slots=True, eq=False)
class Slot:
    """One capability of one agent: the unit that selection ranks and limits."""

    runtime: AgentRuntime
    capability: Capability
    in_flight: int = 0
    swrr_current: float = 0.0

    @property
    def agent_id(self) -> str:
        return self.runtime.agent_id

    @property
    def saturated(self) -> bool:
        return self.in_flight >= self.capability.max_concurrency
