"""The delivery engine behind `Router.dispatch`: select, deliver, retry, fall back, record."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from opentelemetry.trace import StatusCode, Tracer

from middleware import MetaInfo, ReachMessage, ReachResult, ResultStatus, Timings
from middleware.fast import amend, build_trusted
from reach_adapters.router.broadcast import fan_out
from reach_adapters.router.decisions import DecisionLog, DecisionRecord, Exclusion
from reach_adapters.router.delivery import deliver, error_result, reset_current_reach, set_current_reach
from reach_adapters.router.idempotency import IdempotencyStore
from reach_adapters.router.matching import LexicalMatcher, Matcher, task_text
from reach_adapters.router.observe import DECISION_LOGGER, ReachObserver, log_decision
from reach_adapters.router.policy import RoutingPolicy
from reach_adapters.router.registry import Registry
from reach_adapters.router.retry import RetryBudget, backoff_s, may_resend
from reach_adapters.router.selection import Problem, exclusion_reason, screen, why_no_candidate
from reach_adapters.router.state import Slot
from reach_adapters.router.strategies import Strategy, make_strategies
from reach_adapters.router.tracing import active_tracer

__all__ = ["Dispatcher", "Plan"]

logger = logging.getLogger(__name__)

_OK = ResultStatus.OK


class Plan:
    """The outcome of selection: ranked slots to try, or the problem that left none.

    `forced` marks slots admitted past open breakers because they are the last candidates.
    """

    __slots__ = ("forced", "problem", "queued_ms", "slots")

    def __init__(
        self, slots: list[Slot], problem: Problem | None, queued_ms: float, forced: bool = False
    ) -> None:
        self.slots = slots
        self.problem = problem
        self.queued_ms = queued_ms
        self.forced = forced


def apply_caller_timeout(meta: MetaInfo) -> bool:
    """Turn the caller's ``timeout_ms`` into a deadline; True when the caller bounds the task.

    A deadline the caller set (or inherited) bounds fallbacks too; one derived later from a
    capability's timeout does not, since a fallback agent has a timeout of its own.
    """
    if meta.deadline is None and meta.timeout_ms is not None:
        amend(meta, {"deadline": meta.created_at + meta.timeout_ms / 1000.0})
    return meta.deadline is not None


class Dispatcher:
    def __init__(
        self,
        registry: Registry,
        policy: RoutingPolicy,
        *,
        matcher: Matcher | None = None,
        on_dispatch: Callable[[], None] | None = None,
    ) -> None:
        self._on_dispatch = on_dispatch
        self.matcher: Matcher = matcher or LexicalMatcher()
        self.registry = registry
        self.policy = policy
        self.decisions = DecisionLog(policy.decision_log_size)
        self.strategies = make_strategies(policy)
        self.dedupe = IdempotencyStore(policy.dedupe_window_s, policy.dedupe_max_entries)
        self.budget = RetryBudget(policy.retry_budget_ratio, policy.retry_budget_floor)
        self.observers: list[ReachObserver] = []

    def reconfigure(self, policy: RoutingPolicy) -> None:
        self.policy = policy
        self.strategies = make_strategies(policy)
        self.decisions.resize(policy.decision_log_size)
        self.dedupe.reconfigure(policy.dedupe_window_s, policy.dedupe_max_entries)
        self.budget.reconfigure(policy.retry_budget_ratio, policy.retry_budget_floor)

    async def dispatch(self, message: ReachMessage) -> ReachResult:
        if self._on_dispatch is not None:
            self._on_dispatch()
        meta = message.meta_info
        token = set_current_reach(meta)
        try:
            tracer = active_tracer()
            if tracer is not None:
                return await self._traced(message, tracer)
            return await self._run(message, None)
        finally:
            reset_current_reach(token)

    def _run(self, message: ReachMessage, tracer: Tracer | None) -> Coroutine[Any, Any, ReachResult]:
        # Returns the coroutine rather than awaiting it: one frame less on every routed call.
        # Generated task ids are unique by construction; only ids the caller chose can repeat.
        if "task_id" in message.meta_info.__pydantic_fields_set__ and self.policy.dedupe_window_s:
            return self._deduplicated(message, tracer)
        return self._dispatch(message, tracer)

    async def _traced(self, message: ReachMessage, tracer: Tracer) -> ReachResult:
        meta = message.meta_info
        attributes = {
            "reach.task_id": meta.task_id,
            "reach.trace_id": meta.trace_id,
            "reach.capability": meta.capability or "",
            "reach.mode": message.routing_hint.mode,
        }
        with tracer.start_as_current_span("reach.dispatch", attributes=attributes) as span:
            result = await self._run(message, tracer)
            span.set_attributes(
                {
                    "reach.status": str(result.status),
                    "reach.agent_id": result.agent_id or "",
                    "reach.attempts": result.attempts,
                    "reach.served_by": result.served_by,
                }
            )
            if not result.ok:
                span.set_status(StatusCode.ERROR, f"{result.error_type}: {result.error}")
            return result

    async def _deduplicated(self, message: ReachMessage, tracer: Tracer | None) -> ReachResult:
        meta = message.meta_info
        while True:
            future, first = self.dedupe.claim(meta.task_id)
            if first:
                break
            try:
                earlier = await asyncio.shield(future)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if task is not None and task.cancelling():
                    raise
                continue  # the first caller gave up before an answer: claim it again
            return earlier.model_copy(update={"served_by": "deduplicated"})
        try:
            result = await self._dispatch(message, tracer)
        except BaseException:
            self.dedupe.abandon(meta.task_id, future)
            raise
        self.dedupe.settle(meta.task_id, future, result)
        return result

    def record_for(self, message: ReachMessage, strategy: Strategy | None) -> DecisionRecord:
        meta = message.meta_info
        return DecisionRecord(
            meta.task_id,
            meta.trace_id,
            meta.capability,
            message.routing_hint.mode,
            "" if strategy is None else strategy.name,
            time.time(),
        )

    def strategy_for(self, message: ReachMessage) -> Strategy | None:
        return self.strategies.get(message.routing_hint.strategy or self.policy.strategy)

    async def plan(self, message: ReachMessage, record: DecisionRecord, strategy: Strategy) -> Plan:
        """Find the slots that may serve, waiting for capacity while every candidate is saturated."""
        meta = message.meta_info
        if meta.depth > self.policy.max_depth:
            chain = " → ".join(meta.lineage)
            error = f"depth {meta.depth} exceeds max_depth {self.policy.max_depth}: {chain}"
            return Plan([], Problem(ResultStatus.REJECTED, "LoopDetectedError", error), 0.0)
        names: list[str] | None = None
        if meta.capability is None and message.routing_hint.mode != "directed":
            names, problem = await self._match(message, record)
            if problem is not None:
                return Plan([], problem, 0.0)
        waited = 0.0
        while True:
            slots, problem, forced = self._select(message, record, names)
            if problem is None or not problem.waitable:
                break
            waitlist = self.registry.waitlist(meta.capability or "")
            remaining = (meta.deadline or 0.0) - time.time()
            if waitlist is None or remaining <= 0 or len(waitlist) >= self.policy.max_waiting:
                break
            began = time.perf_counter()
            try:
                await waitlist.wait(remaining)
            except TimeoutError:
                error = f"{problem.error}; waited {remaining * 1000:.0f} ms for capacity"
                problem = Problem(ResultStatus.TIMEOUT, "ReachTimeoutError", error)
                waited += (time.perf_counter() - began) * 1000.0
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
        return Plan([slot for slot, _ in ranked], None, waited, forced)

    async def _match(self, message: ReachMessage, record: DecisionRecord) -> tuple[list[str], Problem | None]:
        """Capabilities for a task that names none: the sure match, or the top few, or none."""
        policy = self.policy
        text = task_text(message)
        if not text:
            error = (
                "meta_info.capability is empty and there is no task text to match; name the capability, "
                "or give the task as meta_info.text or a string payload"
            )
            return [], Problem(ResultStatus.INVALID, "InvalidMessageError", error)
        try:
            scores = await self.matcher.match(text, self.registry.declarations())
        except Exception as exc:
            # An embedding service that is down must not break routing: the task is answered,
            # by the fallback or default agent if there is one, else with this error.
            logger.warning("matcher %s failed", type(self.matcher).__name__, exc_info=True)
            error = f"matching the task text to a capability failed: {type(exc).__name__}: {exc}"
            return [], Problem(ResultStatus.ERROR, type(exc).__name__, error)
        record.matches = [(name, score) for name, score in scores[: policy.match_top] if score > 0]
        if record.matches and record.matches[0][1] >= policy.match_direct:
            record.matches = record.matches[:1]
        else:
            record.matches = [
                (name, score) for name, score in record.matches if score >= policy.match_confirm
            ]
        if not record.matches:
            best = (
                ", ".join(f"{name} {score:.2f}" for name, score in scores[:3]) or "no capabilities registered"
            )
            error = f"no capability matches the task well enough (best: {best}; needs {policy.match_confirm})"
            return [], Problem(ResultStatus.NO_CANDIDATE, "NoCandidateError", error)
        amend(message.meta_info, {"capability": record.matches[0][0]})
        record.capability = record.matches[0][0]
        return [name for name, _ in record.matches], None

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
            missing = why_no_candidate(self.registry, meta)
            return [], Problem(ResultStatus.NO_CANDIDATE, "NoCandidateError", missing), False
        usable, problem, forced = screen(slots, meta, self.policy, record.exclusions)
        if meta.deadline is None:
            timeout_ms = (usable or slots)[0].capability.timeout_ms
            amend(meta, {"deadline": time.time() + timeout_ms / 1000.0})
        return usable, problem, forced

    def _directed(
        self, message: ReachMessage, record: DecisionRecord
    ) -> tuple[list[Slot], Problem | None, bool]:
        meta = message.meta_info
        target = message.routing_hint.target or ""
        runtime = self.registry.get(target)
        if runtime is None:
            error = f"agent {target} is not registered; see router.catalog()"
            return [], Problem(ResultStatus.NO_CANDIDATE, "UnknownAgentError", error), False
        slot = slot_for(runtime.slots, meta.capability)
        if slot is None:
            names = [s.capability.name for s in runtime.slots]
            error = f"agent {target} does not declare {meta.capability!r}; it declares {names}"
            return [], Problem(ResultStatus.NO_CANDIDATE, "NoCandidateError", error), False
        amend(meta, {"capability": slot.capability.name})
        if meta.deadline is None:
            amend(meta, {"deadline": time.time() + slot.capability.timeout_ms / 1000.0})
        # Directed delivery bypasses scoring, but never the breaker's last-candidate rule.
        return screen([slot], meta, self.policy, record.exclusions)

    async def _dispatch(self, message: ReachMessage, tracer: Tracer | None) -> ReachResult:
        start = time.perf_counter()
        meta = message.meta_info
        hint = message.routing_hint
        strategy = self.strategy_for(message)
        if strategy is None:
            error = (
                f"routing_hint.strategy {hint.strategy!r} is unknown; use one of {sorted(self.strategies)}"
            )
            return self._finish(
                message, self.record_for(message, None), _invalid(message, error), start, "none"
            )
        caller_deadline = apply_caller_timeout(meta)
        record = self.record_for(message, strategy)
        if tracer is None:
            plan = await self.plan(message, record, strategy)
        else:
            with tracer.start_as_current_span("reach.select") as span:
                plan = await self.plan(message, record, strategy)
                span.set_attributes(
                    {"reach.candidates": len(plan.slots), "reach.exclusions": len(record.exclusions)}
                )
        if plan.problem is not None:
            problem = plan.problem
            missing = error_result(message, problem.status, problem.error_type, problem.error)
            if problem.status is ResultStatus.REJECTED or problem.status is ResultStatus.INVALID:
                return self._finish(message, record, missing, start, "none", plan.queued_ms)
            return await self._fall_back(message, record, missing, start, plan.queued_ms, caller_deadline)
        deadline = meta.deadline or 0.0
        if hint.mode == "broadcast":
            merged = await fan_out(plan.slots, message, deadline, hint.merge, record)
            return self._finish(message, record, merged, start, "candidate", plan.queued_ms)
        routed = time.perf_counter()
        result, last = await self._attempts(message, record, plan, deadline, tracer)
        if result.status is _OK:
            return self._finish(message, record, result, start, "candidate", plan.queued_ms, routed)
        if not may_resend(result.status, result.error_type, last.capability.safe_to_repeat):
            # The work may have been done already; a fallback would do it a second time.
            record.note = record.note or "no fallback: the work may have started and is not safe to repeat"
            return self._finish(message, record, result, start, "none", plan.queued_ms)
        return await self._fall_back(message, record, result, start, plan.queued_ms, caller_deadline)

    async def _attempts(
        self,
        message: ReachMessage,
        record: DecisionRecord,
        plan: Plan,
        deadline: float,
        tracer: Tracer | None,
    ) -> tuple[ReachResult, Slot]:
        """Deliver to the best slot; on a transient failure retry on the next-best, with backoff.

        Returns the last result and the slot that gave it.
        """
        policy = self.policy
        meta = message.meta_info
        self.budget.earn()
        tried: set[int] = set()
        retries = 0
        # The first candidate was screened just now, with no await since: no need to check it again.
        slot = plan.slots[0]
        while True:
            tried.add(id(slot))
            if tracer is None:
                result, elapsed_ms = await deliver(slot, message, deadline)
            else:
                with tracer.start_as_current_span("reach.attempt") as span:
                    result, elapsed_ms = await deliver(slot, message, deadline)
                    span.set_attributes(
                        {
                            "reach.agent_id": slot.runtime.agent_id,
                            "reach.attempt": len(record.attempts) + 1,
                            "reach.status": str(result.status),
                        }
                    )
            record.add_attempt(slot.runtime.agent_id, result, elapsed_ms)
            if result.status is _OK:
                if slot.capability.name != meta.capability:
                    # A matched task served under another of its top matches.
                    amend(meta, {"capability": slot.capability.name})
                return result, slot
            if not result.retryable:
                return result, slot
            cap = slot.capability
            if not may_resend(result.status, result.error_type, cap.safe_to_repeat):
                record.note = f"not re-sent: {cap.name!r} is not idempotent and the work may have started"
                return result, slot
            if retries >= policy.max_retries:
                return result, slot
            if not self.budget.spend():
                record.note = "retry budget exhausted"
                logger.warning("task %s: retry budget exhausted, not retrying", meta.task_id)
                return result, slot
            delay = backoff_s(retries + 1, policy.backoff_ms, policy.backoff_multiplier, policy.jitter_ms)
            if time.time() + delay >= deadline:
                return result, slot
            retries += 1
            await asyncio.sleep(delay)
            following = self._next_slot(plan, tried, message)
            if following is None:
                return result, slot
            slot = following

    def _next_slot(self, plan: Plan, tried: set[int], message: ReachMessage) -> Slot | None:
        """The best slot not tried yet that may still serve, else the best one that may."""
        now = time.monotonic()
        check_breaker = not plan.forced
        again: Slot | None = None
        for slot in plan.slots:
            if exclusion_reason(slot, message.meta_info, self.policy, now, breaker=check_breaker) is not None:
                continue
            if id(slot) not in tried:
                return slot
            again = again or slot
        return again

    async def _fall_back(
        self,
        message: ReachMessage,
        record: DecisionRecord,
        result: ReachResult,
        start: float,
        queued_ms: float,
        caller_deadline: bool,
    ) -> ReachResult:
        """Try the hint's fallback agents, then the policy's default agent, in that order."""
        meta = message.meta_info
        fallback = message.routing_hint.fallback
        chain = [(agent_id, "fallback") for agent_id in fallback]
        default = self.policy.default_agent
        if default is not None and default not in fallback:
            chain.append((default, "default"))
        tried = {attempt.agent_id for attempt in record.attempts}
        for agent_id, path in chain:
            runtime = self.registry.get(agent_id)
            if runtime is None:
                record.exclusions.append(Exclusion(agent_id, f"{path} agent is not registered"))
                continue
            if agent_id in tried:
                continue
            if not runtime.slots:
                record.exclusions.append(Exclusion(agent_id, f"{path} agent declares no capabilities now"))
                continue
            slot = slot_for(runtime.slots, meta.capability) or runtime.slots[0]
            reason = exclusion_reason(slot, meta, self.policy, time.monotonic())
            if reason is not None:
                record.exclusions.append(Exclusion(agent_id, f"{path} agent: {reason}"))
                continue
            now = time.time()
            if not caller_deadline:
                # No deadline from the caller: the fallback agent gets its own capability timeout.
                amend(meta, {"deadline": now + slot.capability.timeout_ms / 1000.0})
            elif (meta.deadline or 0.0) <= now:
                record.exclusions.append(
                    Exclusion(agent_id, f"{path} agent: the caller's deadline has passed")
                )
                break
            outcome, elapsed_ms = await deliver(slot, message, meta.deadline or now)
            record.add_attempt(agent_id, outcome, elapsed_ms, path)
            if outcome.status is _OK:
                return self._finish(message, record, outcome, start, path, queued_ms)
            result = outcome
        return self._finish(message, record, result, start, "none", queued_ms)

    def _finish(
        self,
        message: ReachMessage,
        record: DecisionRecord,
        result: ReachResult,
        start: float,
        path: str,
        queued_ms: float = 0.0,
        routed: float | None = None,
    ) -> ReachResult:
        meta = message.meta_info
        end = time.perf_counter()
        attempts = record.attempts
        broadcast = message.routing_hint.mode == "broadcast"
        timings = build_trusted(
            Timings,
            {
                "routing_ms": (routed - start) * 1000.0 - queued_ms if routed else 0.0,
                "queueing_ms": queued_ms,
                "agent_ms": attempts[-1].elapsed_ms if attempts and not broadcast else 0.0,
                "total_ms": (end - start) * 1000.0,
            },
        )
        amend(
            result,
            {
                "task_id": meta.task_id,
                "trace_id": meta.trace_id,
                "capability": meta.capability,
                "attempts": len(attempts),
                "served_by": path,
                "timings": timings,
            },
        )
        if result.agent_id is None and attempts and not broadcast:
            amend(result, {"agent_id": attempts[-1].agent_id})
        record.status = result.status
        record.path = path
        if result.status is _OK and not broadcast:
            record.chosen = result.agent_id
        self.record_outcome(record, result)
        return result

    def record_outcome(self, record: DecisionRecord, result: ReachResult) -> None:
        """Keep the record for `explain`, write the decision log line, tell the observers."""
        self.decisions.add(record)
        if DECISION_LOGGER.isEnabledFor(logging.INFO):
            log_decision(record, result)
        for observer in self.observers:
            try:
                observer.on_reach(record, result)
            except Exception:
                logger.exception("observer %r failed", observer)


def _invalid(message: ReachMessage, error: str) -> ReachResult:
    return error_result(message, ResultStatus.INVALID, "InvalidMessageError", error)


def slot_for(slots: list[Slot], capability: str | None) -> Slot | None:
    if capability is None:
        return slots[0] if slots else None
    for slot in slots:
        if slot.capability.name == capability:
            return slot
    return None
