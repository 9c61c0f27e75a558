"""Which candidates may serve a task right now, and why the others may not."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from middleware import Fault, MetaInfo, ResultStatus
from reach_adapters.router.decisions import Exclusion, ExclusionKind
from reach_adapters.router.guard import Guard
from reach_adapters.router.outcomes import ErrorKind
from reach_adapters.router.policy import RoutingPolicy
from reach_adapters.router.registry import Registry
from reach_adapters.router.state import UNUSABLE_STATES, AgentState, Slot

__all__ = [
    "Problem",
    "exclusion",
    "forbidden",
    "loop_chain",
    "permitted",
    "sample",
    "screen",
    "stream_shape",
    "visible_to",
    "why_no_candidate",
]


# Exclusions that are the caller's doing: a loop, chunks asked of agents that do not stream.
_CALLERS = frozenset({ExclusionKind.LOOP, ExclusionKind.UNSTREAMED})


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


def exclusion(
    slot: Slot, meta: MetaInfo, policy: RoutingPolicy, now: float, *, breaker: bool = True
) -> Exclusion | None:
    """Why `slot` may not take this task now, or None when it may.

    ``breaker=False`` skips the circuit check, for candidates admitted by the last-candidate rule.
    """
    runtime = slot.runtime
    if not runtime.streams and (meta.stream_mode is not None or meta.subgraphs):
        # First, as it holds whatever the agent's state: given the call, the agent would answer
        # once, its stream_mode and subgraphs (a misspelt mode too) dropped silently.
        return Exclusion(runtime.agent_id, "does not stream: it answers once", ExclusionKind.UNSTREAMED)
    state = runtime.state
    # Another node's agent whose lease is lapsing may be gone already: skipped, not tried.
    if state in UNUSABLE_STATES or (state is AgentState.SUSPICIOUS and runtime.remote):
        reason = f"state {state}" + (f" ({runtime.state_reason})" if runtime.state_reason else "")
        return Exclusion(runtime.agent_id, reason, ExclusionKind.STATE)
    if state is AgentState.BUSY and meta.priority < policy.high_priority:
        reason = f"state busy and priority {meta.priority} < {policy.high_priority}"
        return Exclusion(runtime.agent_id, reason, ExclusionKind.PRIORITY)
    chain = loop_chain(meta, slot)
    if chain is not None:
        return Exclusion(runtime.agent_id, f"loop: {chain}", ExclusionKind.LOOP)
    if slot.capability.triggers and not slot.capability.triggers_match(meta.attributes):
        reason = "triggers do not match meta_info.attributes"
        return Exclusion(runtime.agent_id, reason, ExclusionKind.TRIGGERS)
    if breaker:
        blocked = runtime.breaker.blocks(now)
        if blocked is not None:
            return Exclusion(runtime.agent_id, blocked, ExclusionKind.CIRCUIT)
    busy = slot.saturation()
    return None if busy is None else Exclusion(runtime.agent_id, busy, ExclusionKind.SATURATED)


def stream_shape(meta: MetaInfo) -> str:
    """The chunks' shape the call asks for, in words: its `stream_mode`, `subgraphs`, or both."""
    mode = meta.stream_mode
    asked = [] if mode is None else [f"stream_mode {mode!r}"]
    if meta.subgraphs:
        asked.append("subgraphs")
    return " and ".join(asked)


def forbidden(guard: Guard, principal: str, slot: Slot) -> Exclusion | None:
    """An exclusion when `principal` may not reach `slot`, naming the rule."""
    runtime = slot.runtime
    rule = guard.forbids(principal, slot.capability.name, runtime.agent_id, runtime.ident.namespace)
    return None if rule is None else Exclusion(runtime.agent_id, rule, ExclusionKind.FORBIDDEN)


def visible_to(guard: Guard, principal: str | None) -> Callable[[Slot], bool] | None:
    """Whether `principal` may reach a slot; None when it may reach all (no principal: the
    program that owns the router)."""
    if principal is None:
        return None
    return lambda slot: forbidden(guard, principal, slot) is None


def permitted(
    guard: Guard, principal: str, slots: Sequence[Slot], capability: str | None
) -> tuple[list[Slot], Problem | None]:
    """The slots `principal` may reach; when none, a `rejected` problem naming the rule.

    Agents it may not reach are left out of the record, not listed as exclusions: a principal
    learns nothing of what it cannot reach from its own records.
    """
    allowed: list[Slot] = []
    rule: str | None = None
    for slot in slots:
        refused = forbidden(guard, principal, slot)
        if refused is None:
            allowed.append(slot)
        elif rule is None:
            rule = refused.reason
    if allowed or rule is None:
        return allowed, None
    error = f"principal {principal!r} may not reach {capability!r}: {rule}"
    return [], Problem(ResultStatus.REJECTED, ErrorKind.PERMISSION_DENIED, error, Fault.CALLER)


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
        excluded = exclusion(slot, meta, policy, now)
        if excluded is None:
            usable.append(slot)
            continue
        kind = excluded.kind
        if kind is ExclusionKind.CIRCUIT:
            # The last-candidate rule lifts the breaker, never max_concurrency.
            busy = slot.saturation()
            if busy is None:
                quarantined.append(slot)
            else:
                saturated = True
                excluded.reason = f"{excluded.reason}; {busy}"
        elif kind is ExclusionKind.SATURATED:
            saturated = True
        elif slot.runtime.state is AgentState.RECONNECTING:
            reconnecting = True
        exclusions.append(excluded)
    if usable:
        return usable, None, False
    if quarantined and not saturated:
        for slot in quarantined:
            exclusions.append(
                Exclusion(
                    slot.runtime.agent_id, "serving anyway: last candidates", ExclusionKind.LAST_CANDIDATE
                )
            )
        return quarantined, None, True
    reasons = "; ".join(f"{e.agent_id}: {e.reason}" for e in exclusions)
    kinds = {e.kind for e in exclusions}
    if kinds and kinds <= _CALLERS:
        # Nothing but the caller's request stands in the way: no wait, no fallback mends it.
        if ExclusionKind.LOOP in kinds:
            error = f"recursive reach refused: {reasons}"
            return [], Problem(ResultStatus.REJECTED, ErrorKind.LOOP_DETECTED, error, Fault.CALLER), False
        error = (
            f"{stream_shape(meta)} shapes the chunks of an agent that streams, and no agent the call "
            f"may go to for {meta.capability!r} does ({reasons}); call it without stream_mode and subgraphs"
        )
        return [], Problem(ResultStatus.INVALID, ErrorKind.INVALID_MESSAGE, error, Fault.CALLER), False
    error = f"every agent declaring {meta.capability!r} is excluded ({reasons})"
    wait_for = "capacity" if saturated else "a reconnecting agent" if reconnecting else None
    problem = Problem(ResultStatus.NO_CANDIDATE, ErrorKind.NO_CANDIDATE, error, Fault.ROUTER, wait_for)
    return [], problem, False


def sample(
    slots: Sequence[Slot],
    size: int,
    meta: MetaInfo,
    policy: RoutingPolicy,
    exclusions: list[Exclusion],
    visible: Callable[[Slot], bool] | None,
) -> list[Slot]:
    """Up to `size` usable slots drawn at random from many (power of d choices), the exclusions
    of those drawn appended; those `visible` rejects are passed over unrecorded, as by `permitted`.

    At most 4·size are drawn (or half of them, if fewer): the work is bounded, and random draws
    starve no replica. An empty list means the draw found none usable; the caller then screens
    them all, so waiting for capacity, the last-candidate rule and refusals stay exact.
    """
    count = len(slots)
    limit = min(count, max(size, min(4 * size, count // 2)))
    drawn: set[int] = set()
    usable: list[Slot] = []
    draw = random.random
    now = time.monotonic()
    while len(drawn) < limit:
        index = int(draw() * count)
        if index in drawn:
            continue
        drawn.add(index)
        slot = slots[index]
        if visible is not None and not visible(slot):
            continue
        excluded = exclusion(slot, meta, policy, now)
        if excluded is not None:
            exclusions.append(excluded)
            continue
        usable.append(slot)
        if len(usable) == size:
            break
    return usable


def why_no_candidate(registry: Registry, meta: MetaInfo, visible: Callable[[str], bool] | None = None) -> str:
    """Say why no agent declares the capability in scope, and what would fix it; the
    capabilities it suggests are those `visible` lets the caller see."""
    name = meta.capability or ""
    versions = registry.versions(name)
    if not versions:
        known = registry.capability_names()
        if visible is not None:
            known = [known_name for known_name in known if visible(known_name)]
        shown = ", ".join(known[:20]) + (" ..." if len(known) > 20 else "")
        return (
            f"no agent declares capability {name!r}; register one that does, or use one of: "
            f"{shown or '(no agents registered)'}"
        )
    if meta.version is not None and meta.version not in versions:
        return f"capability {name!r} is offered in version(s) {versions}, not {meta.version!r}"
    return f"no agent in namespace {meta.namespace!r} declares capability {name!r}"
