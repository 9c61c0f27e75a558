"""Which candidates may serve a task right now, and why the others may not."""

from __future__ import annotations

from collections.abc import Sequence

from middleware import MetaInfo
from reach_adapters.router.decisions import Exclusion
from reach_adapters.router.policy import RoutingPolicy
from reach_adapters.router.registry import Registry
from reach_adapters.router.state import AgentState, Slot

__all__ = ["eligible", "exclusion_reason", "why_no_candidate"]


def exclusion_reason(slot: Slot, meta: MetaInfo, policy: RoutingPolicy) -> str | None:
    """Why `slot` may not take this task now, or None when it may."""
    state = slot.runtime.state
    if state is AgentState.OFFLINE or state is AgentState.DRAINING:
        return f"state {state}"
    if state is AgentState.BUSY and meta.priority < policy.high_priority:
        return f"state busy and priority {meta.priority} < {policy.high_priority}"
    if slot.in_flight >= slot.capability.max_concurrency:
        return f"saturated: {slot.in_flight} in flight, max_concurrency {slot.capability.max_concurrency}"
    if slot.capability.triggers and not slot.capability.triggers_match(meta.attributes):
        return "triggers do not match meta_info.attributes"
    return None


def eligible(
    slots: Sequence[Slot], meta: MetaInfo, policy: RoutingPolicy, exclusions: list[Exclusion]
) -> list[Slot]:
    out: list[Slot] = []
    for slot in slots:
        reason = exclusion_reason(slot, meta, policy)
        if reason is None:
            out.append(slot)
        else:
            exclusions.append(Exclusion(slot.runtime.agent_id, reason))
    return out


def why_no_candidate(registry: Registry, meta: MetaInfo) -> str:
    """Say why no agent declares the capability in scope, and what would fix it."""
    name = meta.capability or ""
    versions = registry.versions(name)
    if not versions:
        known = registry.capability_names()
        shown = ", ".join(known[:20]) + (" ..." if len(known) > 20 else "")
        return (
            f"no agent declares capability {name!r}; register one that does, or use one of: "
            f"{shown or '(no agents registered)'}"
        )
    if meta.version is not None and meta.version not in versions:
        return f"capability {name!r} is offered in version(s) {versions}, not {meta.version!r}"
    return f"no agent in namespace {meta.namespace!r} declares capability {name!r}"
