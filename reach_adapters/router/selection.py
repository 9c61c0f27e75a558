"""Which candidates may serve a task right now, and why the others may not."""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from middleware import Fault, MetaInfo, ResultStatus
from reach_adapters.router.breaker import CIRCUIT
from reach_adapters.router.decisions import Exclusion
from reach_adapters.router.policy import RoutingPolicy
from reach_adapters.router.registry import Registry
from reach_adapters.router.state import SATURATED, UNUSABLE_STATES, AgentState, Slot

__all__ = ["Problem", "exclusion_reason", "loop_chain", "screen", "why_no_candidate"]


# The start of a loop exclusion's reason: all loops means the call is refused, not unserved.
LOOP = "loop"


@dataclass(slots=True, frozen=True)
class Problem:
    """Why nothing can serve, and whose `Fault` that is.

    `wait_for` names what would change that (capacity freeing up, an agent reconnecting) when
    the task may wait for it within its deadline; None when waiting cannot help.
    """

    status: ResultStatus
    error_type: str
    error: str
    fault: Fault
    wait_for: str | None = None


def loop_chain(meta: MetaInfo, slot: Slot) -> str | None:
    """The call chain if routing to `slot` repeats an agent type already in the lineage."""
    if not meta.lineage:
        return None
    kind = slot.runtime.ident.kind
    if any(agent_id.rpartition(":")[0] == kind for agent_id in meta.lineage):
        return " → ".join([*meta.lineage, slot.runtime.agent_id])
    return None


def exclusion_reason(
    slot: Slot, meta: MetaInfo, policy: RoutingPolicy, now: float, *, breaker: bool = True
) -> str | None:
    """Why `slot` may not take this task now, or None when it may.

    ``breaker=False`` skips the circuit check, for candidates admitted by the last-candidate rule.
    """
    runtime = slot.runtime
    state = runtime.state
    if state in UNUSABLE_STATES:
        return f"state {state}" + (f" ({runtime.state_reason})" if runtime.state_reason else "")
    if state is AgentState.BUSY and meta.priority < policy.high_priority:
        return f"state busy and priority {meta.priority} < {policy.high_priority}"
    chain = loop_chain(meta, slot)
    if chain is not None:
        return f"{LOOP}: {chain}"
    if slot.capability.triggers and not slot.capability.triggers_match(meta.attributes):
        return "triggers do not match meta_info.attributes"
    if breaker:
        blocked = runtime.breaker.blocks(now)
        if blocked is not None:
            return blocked
    return slot.saturation()


def screen(
    slots: Sequence[Slot], meta: MetaInfo, policy: RoutingPolicy, exclusions: list[Exclusion]
) -> tuple[list[Slot], Problem | None, bool]:
    """Split `slots` into usable ones and exclusions (appended with reasons).

    The last candidates are never all ejected by their breakers: when only open circuits stand in
    the way, those agents serve anyway, and the third value, ``forced``, is True.
    """
    now = time.monotonic()
    usable: list[Slot] = []
    quarantined: list[Slot] = []
    saturated = reconnecting = False
    for slot in slots:
        reason = exclusion_reason(slot, meta, policy, now)
        if reason is None:
            usable.append(slot)
            continue
        if reason.startswith(CIRCUIT):
            # The last-candidate rule lifts the breaker, never max_concurrency.
            busy = slot.saturation()
            if busy is None:
                quarantined.append(slot)
            else:
                saturated = True
                reason = f"{reason}; {busy}"
        elif reason.startswith(SATURATED):
            saturated = True
        elif slot.runtime.state is AgentState.RECONNECTING:
            reconnecting = True
        exclusions.append(Exclusion(slot.runtime.agent_id, reason))
    if usable:
        return usable, None, False
    if quarantined and not saturated:
        for slot in quarantined:
            exclusions.append(Exclusion(slot.runtime.agent_id, "serving anyway: last candidates"))
        return quarantined, None, True
    reasons = "; ".join(f"{e.agent_id}: {e.reason}" for e in exclusions)
    if exclusions and all(e.reason.startswith(LOOP) for e in exclusions):
        error = f"recursive reach refused: {reasons}"
        return [], Problem(ResultStatus.REJECTED, "LoopDetectedError", error, Fault.CALLER), False
    error = f"every agent declaring {meta.capability!r} is excluded ({reasons})"
    wait_for = "capacity" if saturated else "a reconnecting agent" if reconnecting else None
    problem = Problem(ResultStatus.NO_CANDIDATE, "NoCandidateError", error, Fault.ROUTER, wait_for)
    return [], problem, False


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
