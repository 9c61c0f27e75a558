"""Selection for one task: match its text, find and screen candidates, wait for capacity, rank."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

from middleware import Fault, MetaInfo, ReachMessage, ReachResult, ResultStatus
from middleware.fast import amend
from reach_adapters.router.capability import Capability
from reach_adapters.router.decisions import DecisionRecord
from reach_adapters.router.delivery import resumes
from reach_adapters.router.guard import Guard
from reach_adapters.router.matching import Matcher, task_text
from reach_adapters.router.outcomes import ErrorKind, error_result
from reach_adapters.router.policy import RoutingPolicy
from reach_adapters.router.registry import Registry
from reach_adapters.router.selection import (
    Problem,
    permitted,
    sample,
    screen,
    visible_to,
    why_no_candidate,
)
from reach_adapters.router.state import Slot
from reach_adapters.router.strategies import Strategy
from reach_adapters.router.threads import ThreadAffinity

__all__ = ["NAME_ONE", "Plan", "Planner", "slot_for"]

logger = logging.getLogger(__name__)

# How a directed call names one of its agent's capabilities, as the Python API says it; other
# surfaces (the CLI's ``--capability``) put their own words in its place.
NAME_ONE = "(capability=...)"


class Plan:
    """The outcome of selection: ranked slots to try, or the problem that left none.

    `forced` marks slots admitted past open breakers because they are the last candidates.
    `refusers`: slots whose agents refused the payload by their own word (another router's,
    across a hop) although their declarations took it, as the delivery finds them.
    """

    __slots__ = ("forced", "problem", "queued_ms", "refusers", "slots")

    def __init__(
        self, slots: list[Slot], problem: Problem | None, queued_ms: float, forced: bool = False
    ) -> None:
        self.slots = slots
        self.problem = problem
        self.queued_ms = queued_ms
        self.forced = forced
        self.refusers: tuple[Slot, ...] = ()

    def takes(self, slot: Slot, payload: object) -> bool:
        """Whether the slot's declaration takes `payload`. Once an agent refused it by its own
        word, so do its replicas' declarations of that capability, the same as its own."""
        refusers = self.refusers
        if refusers and (slot in refusers or _kin(slot, refusers)):
            return False
        read = _read(slot, payload)
        return read is _UNREAD or slot.fits(read) or slot.text_read(read) is not None


class Planner:
    """Turns a message into a `Plan`; the dispatcher then delivers it."""

    def __init__(self, registry: Registry, policy: RoutingPolicy, matcher: Matcher) -> None:
        self.registry = registry
        self.policy = policy
        self.matcher = matcher
        self.guard: Guard | None = None
        self.threads = ThreadAffinity()

    async def plan(self, message: ReachMessage, record: DecisionRecord, strategy: Strategy) -> Plan:
        """Find the slots that may serve, waiting while every candidate is saturated or reconnecting."""
        meta = message.meta_info
        names: list[str] | None = None
        if meta.capability is None and message.routing_hint.mode != "directed":
            names, problem = await self._match(message, record)
            if problem is not None:
                return Plan([], problem, 0.0)
        waited = 0.0
        while True:
            slots, problem, forced = self._select(message, record, names)
            if problem is None or problem.wait_for is None:
                break
            waitlist = self.registry.waitlist(meta.capability or "")
            remaining = (meta.deadline or 0.0) - time.time()
            if waitlist is None or remaining <= 0 or len(waitlist) >= self.policy.max_waiting:
                break
            began = time.perf_counter()
            try:
                await waitlist.wait(remaining)
            except TimeoutError:
                waited += (time.perf_counter() - began) * 1000.0
                error = (
                    f"{problem.error}; waited {waited / 1000.0:.1f} s for {problem.wait_for}, never delivered"
                )
                problem = Problem(ResultStatus.TIMEOUT, ErrorKind.TIMEOUT, error, Fault.ROUTER)
                break
            waited += (time.perf_counter() - began) * 1000.0
            record.exclusions.clear()
        if problem is not None:
            return Plan([], problem, waited)
        if message.routing_hint.mode == "directed":
            return Plan(slots, None, waited, forced)
        ranked = strategy.rank(slots, meta)
        if len(record.matches) > 1:
            # Several capabilities matched: better matches first, the strategy's order within each.
            fit = dict(record.matches)
            ranked.sort(key=lambda pair: -fit.get(pair[0].capability.name, 0.0))
        record.candidates = [scored for _, scored in ranked]
        ordered = [slot for slot, _ in ranked]
        if meta.configurable is not None:
            ordered = self.threads.first(ordered, meta)
        return Plan(ordered, None, waited, forced)

    def directed_capability(self, message: ReachMessage) -> str | None:
        """The capability a directed call reaches: the one it names, else its agent's only one."""
        meta = message.meta_info
        if meta.capability is not None or message.routing_hint.mode != "directed":
            return meta.capability
        runtime = self.registry.get(message.routing_hint.target or "")
        if runtime is None or len(runtime.slots) != 1:
            return None
        return runtime.slots[0].capability.name

    def unavailable_fit(self, message: ReachMessage, refused: ReachResult, plan: Plan) -> ReachResult | None:
        """When the candidates refused the payload (`refused`, their best one's complaint) but a
        declaration whose agent cannot serve now takes it (`Plan.takes`): the router's failure to
        serve it, not the caller's mistake (so fallback applies). Else None."""
        if refused.error_type != ErrorKind.PAYLOAD_VALIDATION or refused.delivered:
            return None
        slots = self._declared(message)
        if not any(plan.takes(slot, message.raw_payload) for slot in slots):
            return None
        error = (
            "the payload fits a declaration of the capability whose agent cannot take it now (see "
            f"explain(task_id).exclusions), not one of those that could: {refused.error}"
        )
        return error_result(
            message, ResultStatus.NO_CANDIDATE, ErrorKind.NO_CANDIDATE, error, fault=Fault.ROUTER
        )

    def invalid_payload(self, message: ReachMessage) -> str | None:
        """Why the payload fits no declaration of the requested capability, or None.

        For tasks no candidate took: a payload the capability would refuse is the caller's
        mistake, which no fallback agent may hide.
        """
        slots = self._declared(message)
        if not slots:
            return None
        payload = message.raw_payload
        problems = [_refusal(slot, payload) for slot in slots]
        if None in problems:
            return None
        return problems[0]

    def _declared(self, message: ReachMessage) -> tuple[Slot, ...]:
        """The declarations of the capability the message asks for, where its payload is the
        task's input (not a resume's answer)."""
        meta = message.meta_info
        if meta.capability is None or resumes(message):
            return ()
        if message.routing_hint.mode == "directed":
            runtime = self.registry.get(message.routing_hint.target or "")
            found = slot_for(runtime.slots, meta.capability) if runtime is not None else None
            return () if found is None else (found,)
        return self.registry.candidates(meta.capability, meta.version, meta.namespace)

    async def _match(self, message: ReachMessage, record: DecisionRecord) -> tuple[list[str], Problem | None]:
        """Capabilities for a task that names none: the sure match, or the top few, or none."""
        policy = self.policy
        text = task_text(message)
        if not text:
            error = (
                "meta_info.capability is empty and there is no task text to match; name the capability, "
                "or give the task as meta_info.text or a string payload"
            )
            return [], Problem(ResultStatus.INVALID, ErrorKind.INVALID_MESSAGE, error, Fault.CALLER)
        try:
            scores = await self.matcher.match(text, self._declarations(message.meta_info.principal))
        except Exception as exc:
            # An embedding service that is down must not break routing: the task is answered,
            # by the fallback or default agent if there is one, else with this error.
            logger.warning("matcher %s failed", type(self.matcher).__name__, exc_info=True)
            error = f"matching the task text to a capability failed: {type(exc).__name__}: {exc}"
            return [], Problem(ResultStatus.ERROR, type(exc).__name__, error, Fault.ROUTER)
        ranked = [(name, score) for name, score in scores[: policy.match_top] if score > 0]
        if ranked and ranked[0][1] >= policy.match_direct:
            record.matches = ranked[:1]
        else:
            record.matches = [(name, score) for name, score in ranked if score >= policy.match_confirm]
        if not record.matches:
            record.best_matches = scores[: policy.match_top]
            best = ", ".join(f"{name} {score:.2f}" for name, score in scores[: policy.match_top])
            record.note = (
                f"no capability scored {policy.match_confirm:.2f} (match_confirm) or more; "
                f"best: {best or 'no capabilities registered'}"
            )
            error = f"no capability matches the task well enough ({record.note})"
            return [], Problem(ResultStatus.NO_CANDIDATE, ErrorKind.NO_CANDIDATE, error, Fault.ROUTER)
        amend(message.meta_info, {"capability": record.matches[0][0]})
        record.capability = record.matches[0][0]
        return [name for name, _ in record.matches], None

    def _declarations(self, principal: str | None) -> dict[str, Capability]:
        """What a task's text is matched against: the capabilities `principal` may reach."""
        declared = self.registry.declarations()
        named = self._named_visible(principal)
        return declared if named is None else {name: cap for name, cap in declared.items() if named(name)}

    def visible(self, principal: str | None) -> Callable[[Slot], bool] | None:
        """Whether `principal` may reach a slot under the guard; None: it may reach all."""
        return None if self.guard is None else visible_to(self.guard, principal)

    def _named_visible(self, principal: str | None) -> Callable[[str], bool] | None:
        """Whether `principal` may reach some agent declaring a capability; None: it may reach all."""
        visible = self.visible(principal)
        if visible is None:
            return None
        registry = self.registry
        return lambda name: any(map(visible, registry.slots_named(name)))

    def _select(
        self, message: ReachMessage, record: DecisionRecord, names: list[str] | None
    ) -> tuple[list[Slot], Problem | None, bool]:
        meta = message.meta_info
        if message.routing_hint.mode == "directed":
            return self._directed(message, record)
        if names is not None and len(names) > 1:
            slots: tuple[Slot, ...] = tuple(
                slot
                for name in names
                for slot in self.registry.candidates(name, meta.version, meta.namespace)
            )
        else:
            slots = self.registry.candidates(meta.capability or "", meta.version, meta.namespace)
        if not slots:
            missing = why_no_candidate(self.registry, meta, self._named_visible(meta.principal))
            return (
                [],
                Problem(ResultStatus.NO_CANDIDATE, ErrorKind.NO_CANDIDATE, missing, Fault.ROUTER),
                False,
            )
        usable = None
        if (
            len(slots) > self.policy.sample_above
            and message.routing_hint.mode == "unicast"
            # A thread's agent may not be drawn: all are screened, so it can serve again.
            and (meta.configurable is None or not self.threads.holds(meta))
        ):
            usable = self._sample(slots, meta, record)
        if usable is not None:
            problem, forced = None, False
        else:
            if self.guard is not None and meta.principal is not None:
                allowed, refused = permitted(self.guard, meta.principal, slots, meta.capability)
                if refused is not None:
                    return [], refused, False
                slots = tuple(allowed)
            usable, problem, forced = screen(slots, meta, self.policy, record.exclusions)
        if meta.deadline is None:
            timeout_ms = (usable or slots)[0].capability.timeout_ms
            amend(meta, {"deadline": time.time() + timeout_ms / 1000.0})
        return usable, problem, forced

    def _sample(self, slots: tuple[Slot, ...], meta: MetaInfo, record: DecisionRecord) -> list[Slot] | None:
        """A random sample of the usable among many candidates, so one call's work does not grow
        with the replicas; the record says it sampled. None when the draw found none usable."""
        policy = self.policy
        exclusions = record.exclusions
        mark = len(exclusions)
        visible = self.visible(meta.principal)
        usable = sample(slots, policy.sample_size, meta, policy, exclusions, visible)
        if usable:
            # The count would tell a principal how many agents it may not reach: kept for the
            # program's own calls only.
            record.sampled_from = len(slots) if visible is None else None
            return usable
        # Screening them all records every exclusion, these among them.
        del exclusions[mark:]
        return None

    def _directed(
        self, message: ReachMessage, record: DecisionRecord
    ) -> tuple[list[Slot], Problem | None, bool]:
        meta = message.meta_info
        target = message.routing_hint.target or ""
        runtime = self.registry.get(target)
        visible = self.visible(meta.principal)
        # An agent the principal may not reach at all is answered as one that is not there: its
        # existence is not the principal's to learn.
        if runtime is None or (visible is not None and not any(map(visible, runtime.slots))):
            error = f"agent {target} is not registered; see router.catalog()"
            return [], Problem(ResultStatus.NO_CANDIDATE, ErrorKind.UNKNOWN_AGENT, error, Fault.ROUTER), False
        slots = runtime.slots
        if self.guard is not None and meta.principal is not None:
            # Only what the principal may reach is named back to it, in errors as in records.
            named = None if meta.capability is None else slot_for(slots, meta.capability)
            slots, refused = permitted(
                self.guard, meta.principal, slots if named is None else [named], meta.capability or target
            )
            if refused is not None:
                return [], refused, False
        if meta.capability is None and len(slots) > 1:
            error = f"agent {target} declares several capabilities {_names(slots)}; name the one to call "
            error += NAME_ONE
            return [], Problem(ResultStatus.INVALID, ErrorKind.INVALID_MESSAGE, error, Fault.CALLER), False
        slot = slot_for(slots, meta.capability)
        if slot is None:
            # The caller named both: no fallback agent may stand in for that mistake.
            error = f"agent {target} does not declare {meta.capability!r}; it declares {_names(slots)}"
            return [], Problem(ResultStatus.INVALID, ErrorKind.INVALID_MESSAGE, error, Fault.CALLER), False
        amend(meta, {"capability": slot.capability.name})
        record.capability = slot.capability.name
        if meta.deadline is None:
            amend(meta, {"deadline": time.time() + slot.capability.timeout_ms / 1000.0})
        # Directed delivery bypasses scoring, but never the breaker's last-candidate rule.
        return screen([slot], meta, self.policy, record.exclusions)


def _names(slots: list[Slot]) -> list[str]:
    return [slot.capability.name for slot in slots]


def slot_for(slots: list[Slot], capability: str | None) -> Slot | None:
    if capability is None:
        return slots[0] if slots else None
    for slot in slots:
        # An agent whose capability the router renamed is still reached by its own name.
        if capability in (slot.capability.name, slot.own_name):
            return slot
    return None


# A payload the slot's agent could not read (its `adapt_payload` raised): its failure, told when
# it is delivered to, never the caller's mistake.
_UNREAD = object()


def _read(slot: Slot, payload: Any) -> Any:
    """`payload` as the slot's agent reads it, or `_UNREAD`."""
    try:
        return slot.adapted(payload)
    except Exception:  # noqa: BLE001 - the agent's failure, not the payload's
        return _UNREAD


def _refusal(slot: Slot, payload: Any) -> str | None:
    """What is wrong with `payload` for the slot's declaration, as its agent reads it, or None."""
    read = _read(slot, payload)
    return None if read is _UNREAD else slot.refuses(read)


def _kin(slot: Slot, others: tuple[Slot, ...]) -> bool:
    """Whether `slot` is a replica's declaration of the capability one of `others` declares: the
    same namespace, type, capability and version, which replicas declare alike."""
    ident, cap = slot.runtime.ident, slot.capability
    return any(
        other.runtime.ident[:2] == ident[:2]
        and other.capability.name == cap.name
        and other.capability.version == cap.version
        for other in others
    )
