"""What `Router.catalog()` shows: each agent, its state, load and declarations."""

from __future__ import annotations

import time
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict, computed_field

from reach_adapters.router.breaker import BreakerState
from reach_adapters.router.capability import Capability, cautious
from reach_adapters.router.ratings import Ratings
from reach_adapters.router.registry import Registry
from reach_adapters.router.state import UNUSABLE_STATES, AgentRuntime, AgentState, Slot

__all__ = ["AgentInfo", "agent_info", "list_agents", "reachable_capabilities"]


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
    # The cluster node hosting the agent when another node does (its ``hosted_on`` attribute); None: here.
    node: str | None = None
    # Each capability's rating from feedback (1.0: as declared), as this router has learnt it.
    ratings: dict[str, float] = {}

    @computed_field  # type: ignore[prop-decorator]
    @property
    def problem(self) -> str | None:
        """Why the agent is not fully in service (offline, reconnecting, quarantined...), or None.

        A half-open circuit is no problem: the agent takes calls, and the next one decides.
        """
        parts = []
        if self.state not in (AgentState.ONLINE, AgentState.BUSY):
            parts.append(f"{self.state}" + (f" ({self.state_reason})" if self.state_reason else ""))
        if self.breaker is BreakerState.OPEN:
            parts.append(f"quarantined for {self.quarantined_for_s:.1f} s more (circuit open)")
        if self.stuck:
            parts.append(f"{self.stuck} call(s) stuck past their deadline")
        return "; ".join(parts) or None


def agent_info(runtime: AgentRuntime, slots: list[Slot] | None, ratings: Ratings) -> AgentInfo:
    """The agent as the catalog shows it, with the declarations of `slots` (default: all)."""
    shown = runtime.slots if slots is None else slots
    breaker = runtime.breaker
    now = time.monotonic()
    state = breaker.state_at(now)
    open_for = breaker.open_until - now if state is BreakerState.OPEN else 0.0
    return AgentInfo(
        agent_id=runtime.agent_id,
        state=runtime.state,
        state_reason=runtime.state_reason,
        breaker=state,
        quarantined_for_s=round(max(open_for, 0.0), 3),
        in_flight=runtime.in_flight,
        stuck=runtime.stuck,
        health=round(runtime.health, 4),
        success_rate=round(runtime.success_rate, 4),
        calls=runtime.calls,
        failures=runtime.failures,
        avg_ms=round(runtime.avg_ms, 3),
        capabilities=[slot.capability for slot in shown],
        node=getattr(runtime.agent, "hosted_on", None),
        ratings={slot.capability.name: round(ratings.slot(slot), 4) for slot in shown},
    )


def list_agents(
    registry: Registry, visible: Callable[[Slot], bool] | None, ratings: Ratings
) -> list[AgentInfo]:
    """The catalog: every agent, or (with `visible`) the agents and capabilities a principal may
    reach."""
    if visible is None:
        return [agent_info(runtime, None, ratings) for runtime in registry]
    out = []
    for runtime in registry:
        info = agent_info(runtime, [slot for slot in runtime.slots if visible(slot)], ratings)
        if info.capabilities:
            out.append(info)
    return out


def reachable_capabilities(
    registry: Registry, visible: Callable[[Slot], bool] | None
) -> dict[str, Capability]:
    """Each capability some usable (and `visible`) agent declares, with its most cautious
    declaration standing for the replicas."""
    out: dict[str, Capability] = {}
    for name in registry.capability_names():
        usable = [
            slot.capability
            for slot in registry.slots_named(name)
            if slot.runtime.state not in UNUSABLE_STATES and (visible is None or visible(slot))
        ]
        if usable:
            out[name] = cautious(usable)
    return out
