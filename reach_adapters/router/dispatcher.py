"""The delivery engine behind `Router.dispatch`: select, deliver, retry, fall back, record."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from opentelemetry.trace import StatusCode, Tracer

from middleware import Fault, MetaInfo, ReachMessage, ReachResult, ResultStatus, Timings
from middleware.fast import amend, build_trusted
from reach_adapters.errors import IdempotencyConflictError
from reach_adapters.router.broadcast import fan_out
from reach_adapters.router.decisions import DecisionLog, DecisionRecord, Exclusion
from reach_adapters.router.delivery import deliver, error_result
from reach_adapters.router.faults import ANSWERED, RETRIED
from reach_adapters.router.hops import reset_current_reach, set_current_reach
from reach_adapters.router.idempotency import IdempotencyStore, fingerprint
from reach_adapters.router.matching import LexicalMatcher, Matcher
from reach_adapters.router.observe import DECISION_LOGGER, ReachObserver, log_decision
from reach_adapters.router.planning import Plan, Planner, slot_for
from reach_adapters.router.policy import RoutingPolicy
from reach_adapters.router.registry import Registry
from reach_adapters.router.retry import RetryBudget, backoff_s, may_resend
from reach_adapters.router.selection import exclusion_reason
from reach_adapters.router.state import Slot
from reach_adapters.router.strategies import Strategy, make_strategies
from reach_adapters.router.tracing import active_tracer

__all__ = ["Dispatcher", "Plan"]

logger = logging.getLogger(__name__)


def apply_caller_timeout(meta: MetaInfo) -> bool:
    """Turn the caller's ``timeout_ms`` into a deadline; True when the caller bounds the task.

    A deadline the caller set (or inherited) bounds fallbacks too; one derived later from a
    capability's timeout does not, since a fallback agent has a timeout of its own.
    """
    if meta.deadline is None and meta.timeout_ms is not None:
        amend(meta, {"deadline": meta.created_at + meta.timeout_ms / 1000.0})
    return meta.deadline is not None


class _Run:
    """One dispatch of a task here: the lineage it came with, and the agents it has gone to."""

    __slots__ = ("lineage", "targets")

    def __init__(self, lineage: list[str]) -> None:
        self.lineage = lineage
        self.targets: set[str] = set()

    def sent_back(self, lineage: list[str]) -> bool:
        """Whether the same task arriving with `lineage` went out through one of this run's
        agents: its chain continues this run's, through a target of it. A retry of the task
        through another path does not."""
        n = len(self.lineage)
        return len(lineage) > n and lineage[n] in self.targets and lineage[:n] == self.lineage


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
        self.registry = registry
        self.policy = policy
        self.planner = Planner(registry, policy, matcher or LexicalMatcher())
        self.decisions = DecisionLog(policy.decision_log_size)
        self.strategies = make_strategies(policy)
        self.dedupe = IdempotencyStore(policy.dedupe_window_s, policy.dedupe_max_entries)
        self.budget = RetryBudget(policy.retry_budget_ratio, policy.retry_budget_floor)
        self.transient = policy.transient_types
        self.observers: list[ReachObserver] = []
        # Task id → its runs going on here. The same task coming back through one of them (gateway
        # A → B → A) is a loop, refused at once rather than left waiting on itself.
        self._running: dict[str, list[_Run]] = {}

    def reconfigure(self, policy: RoutingPolicy) -> None:
        self.policy = policy
        self.planner.policy = policy
        self.strategies = make_strategies(policy)
        self.transient = policy.transient_types
        self.decisions.resize(policy.decision_log_size)
        self.dedupe.reconfigure(policy.dedupe_window_s, policy.dedupe_max_entries)
        self.budget.reconfigure(policy.retry_budget_ratio, policy.retry_budget_floor)

    async def dispatch(self, message: ReachMessage) -> ReachResult:
        if self._on_dispatch is not None:
            self._on_dispatch()
        meta = message.meta_info
        token = set_current_reach(meta)
        task_id = meta.task_id
        run = _Run(meta.lineage)
        runs = self._running.get(task_id)
        if runs is None:
            self._running[task_id] = [run]
        else:
            runs.append(run)
        try:
            # Loops first: a task that came back must be refused, not wait on its own first run.
            came_back = runs is not None and any(other.sent_back(meta.lineage) for other in runs[:-1])
            if came_back or meta.depth > self.policy.max_depth:
                return self._loop(message, came_back)
            tracer = active_tracer()
            if tracer is not None:
                return await self._traced(message, tracer, run)
            return await self._run(message, None, run)
        finally:
            runs = self._running[task_id]
            if len(runs) == 1:
                del self._running[task_id]
            else:
                runs.remove(run)
            reset_current_reach(token)

    def plan(
        self, message: ReachMessage, record: DecisionRecord, strategy: Strategy
    ) -> Coroutine[Any, Any, Plan]:
        return self.planner.plan(message, record, strategy)

    def _run(
        self, message: ReachMessage, tracer: Tracer | None, run: _Run
    ) -> Coroutine[Any, Any, ReachResult]:
        # Returns the coroutine rather than awaiting it: one frame less on every routed call.
        # Generated task ids are unique by construction; only ids the caller chose can repeat.
        if "task_id" in message.meta_info.__pydantic_fields_set__ and self.policy.dedupe_window_s:
            return self._deduplicated(message, tracer, run)
        return self._dispatch(message, tracer, run)

    def _loop(self, message: ReachMessage, came_back: bool) -> ReachResult:
        meta = message.meta_info
        chain = " → ".join(meta.lineage) or "(top level)"
        if came_back:
            error = (
                f"recursive reach refused: task {meta.task_id} came back to this router, which is "
                f"still running it, through {chain}"
            )
        else:
            limit = self.policy.max_depth
            error = f"recursive reach refused: depth {meta.depth} exceeds max_depth {limit}: {chain}"
        refused = error_result(message, ResultStatus.REJECTED, "LoopDetectedError", error, fault=Fault.CALLER)
        # A task that came back stays out of the decision log: its id names the run still going on.
        return self._finish(
            message, self.record_for(message, None), refused, time.perf_counter(), "none", keep=not came_back
        )

    async def _traced(self, message: ReachMessage, tracer: Tracer, run: _Run) -> ReachResult:
        meta = message.meta_info
        attributes = {
            "reach.task_id": meta.task_id,
            "reach.trace_id": meta.trace_id,
            "reach.capability": meta.capability or "",
            "reach.mode": message.routing_hint.mode,
        }
        with tracer.start_as_current_span("reach.dispatch", attributes=attributes) as span:
            result = await self._run(message, tracer, run)
            span.set_attributes(
                {
                    "reach.status": str(result.status),
                    "reach.agent_id": result.agent_id or "",
                    "reach.attempts": result.attempts,
                    "reach.served_by": result.served_by,
                    "reach.fault": str(result.fault or ""),
                }
            )
            if not result.ok:
                span.set_status(StatusCode.ERROR, f"{result.error_type}: {result.error}")
            return result

    async def _deduplicated(self, message: ReachMessage, tracer: Tracer | None, run: _Run) -> ReachResult:
        meta = message.meta_info
        request = fingerprint(message, self.planner.directed_capability(message))
        while True:
            try:
                future, first = self.dedupe.claim(meta.task_id, request)
            except IdempotencyConflictError as exc:
                refused = error_result(
                    message, ResultStatus.REJECTED, type(exc).__name__, str(exc), fault=Fault.CALLER
                )
                record = self.record_for(message, None)
                # Kept out of the decision log: the task id's record belongs to the first request.
                return self._finish(message, record, refused, time.perf_counter(), "none", keep=False)
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
            result = await self._dispatch(message, tracer, run)
        except BaseException:
            self.dedupe.abandon(meta.task_id, future)
            raise
        self.dedupe.settle(meta.task_id, future, result)
        return result

    def record_for(self, message: ReachMessage, strategy: Strategy | None) -> DecisionRecord:
        meta = message.meta_info
        hint = message.routing_hint
        record = DecisionRecord(
            meta.task_id,
            meta.trace_id,
            meta.capability,
            hint.mode,
            "" if strategy is None else strategy.name,
            time.time(),
        )
        if hint.target is not None:
            record.target = hint.target
        return record

    def strategy_for(self, message: ReachMessage) -> Strategy | None:
        return self.strategies.get(message.routing_hint.strategy or self.policy.strategy)

    async def _dispatch(self, message: ReachMessage, tracer: Tracer | None, run: _Run) -> ReachResult:
        start = time.perf_counter()
        meta = message.meta_info
        hint = message.routing_hint
        strategy = self.strategy_for(message)
        if strategy is None:
            error = (
                f"routing_hint.strategy {hint.strategy!r} is unknown; use one of {sorted(self.strategies)}"
            )
            unknown = error_result(
                message, ResultStatus.INVALID, "InvalidMessageError", error, fault=Fault.CALLER
            )
            return self._finish(message, self.record_for(message, None), unknown, start, "none")
        caller_deadline = apply_caller_timeout(meta)
        record = self.record_for(message, strategy)
        try:
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
                missing = error_result(
                    message, problem.status, problem.error_type, problem.error, fault=problem.fault
                )
                if problem.fault is Fault.CALLER:
                    return self._finish(message, record, missing, start, "none", plan.queued_ms)
                invalid = self.planner.invalid_payload(message)
                if invalid is not None:
                    # Fallback serves "no agent can take this", never "the caller sent garbage".
                    refused = error_result(
                        message, ResultStatus.INVALID, "PayloadValidationError", invalid, fault=Fault.CALLER
                    )
                    return self._finish(message, record, refused, start, "none", plan.queued_ms)
                return await self._fall_back(
                    message, record, missing, start, plan.queued_ms, caller_deadline, run
                )
            deadline = meta.deadline or 0.0
            if hint.mode == "broadcast":
                run.targets.update(slot.runtime.agent_id for slot in plan.slots)
                merged = await fan_out(plan.slots, message, deadline, hint.merge, record, self.transient)
                return self._finish(message, record, merged, start, "candidate", plan.queued_ms)
            routed = time.perf_counter()
            result, last = await self._attempts(message, record, plan, deadline, tracer, run)
            if result.status in ANSWERED:
                return self._finish(message, record, result, start, "candidate", plan.queued_ms, routed)
            fault = result.fault
            if fault is Fault.TASK:
                # The agent did the task and answered no; another agent would be asked the same.
                return self._finish(message, record, result, start, "candidate", plan.queued_ms, routed)
            if fault is Fault.CALLER:
                return self._finish(message, record, result, start, "none", plan.queued_ms)
            if not may_resend(result, last.capability.safe_to_repeat):
                # The work may have been done already; a fallback would do it a second time.
                record.note = (
                    record.note or "no fallback: the work may have started and is not safe to repeat"
                )
                return self._finish(message, record, result, start, "none", plan.queued_ms)
            return await self._fall_back(message, record, result, start, plan.queued_ms, caller_deadline, run)
        except asyncio.CancelledError:
            # The caller gave up: the task still leaves a record of how far it got.
            gone = error_result(
                message,
                ResultStatus.CANCELLED,
                "Cancelled",
                "the caller cancelled the call",
                fault=Fault.CALLER,
            )
            self._finish(message, record, gone, start, "none")
            raise

    async def _attempts(
        self,
        message: ReachMessage,
        record: DecisionRecord,
        plan: Plan,
        deadline: float,
        tracer: Tracer | None,
        run: _Run,
    ) -> tuple[ReachResult, Slot]:
        """Deliver to the best slot; on a transient failure retry on the next-best, with backoff.

        A task safe to repeat gives each attempt only a share of the time left while another
        candidate could take over, so one hung replica cannot use up the whole deadline; never
        less than twice the agent's usual latency, and only once that is known.
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
            run.targets.add(slot.runtime.agent_id)
            ends = deadline
            if (
                len(tried) < len(plan.slots)
                and policy.attempt_timeout_share < 1.0
                and retries < policy.max_retries
                and slot.capability.safe_to_repeat
            ):
                now = time.time()
                share = (deadline - now) * policy.attempt_timeout_share
                usual = slot.runtime.usual_ms
                # Never cut an attempt below what the agent needs (twice its usual latency), nor
                # one of an agent whose needs are not known yet.
                if usual is not None and share * 1000.0 >= 2 * usual:
                    ends = now + share
            if tracer is None:
                result, elapsed_ms = await deliver(slot, message, ends, transient=self.transient)
            else:
                with tracer.start_as_current_span("reach.attempt") as span:
                    result, elapsed_ms = await deliver(slot, message, ends, transient=self.transient)
                    span.set_attributes(
                        {
                            "reach.agent_id": slot.runtime.agent_id,
                            "reach.attempt": len(record.attempts) + 1,
                            "reach.status": str(result.status),
                        }
                    )
            record.add_attempt(slot.runtime.agent_id, result, elapsed_ms)
            if result.status in ANSWERED:
                if slot.capability.name != meta.capability:
                    # A matched task served under another of its top matches.
                    amend(meta, {"capability": slot.capability.name})
                return result, slot
            if not result.retryable or result.fault not in RETRIED:
                return result, slot
            cap = slot.capability
            if not may_resend(result, cap.safe_to_repeat):
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
        run: _Run,
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
            run.targets.add(agent_id)
            outcome, elapsed_ms = await deliver(slot, message, meta.deadline or now, transient=self.transient)
            record.add_attempt(agent_id, outcome, elapsed_ms, path)
            if outcome.status in ANSWERED:
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
        *,
        keep: bool = True,
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
                # Any attempt that reached an agent may have done the work, not only the last.
                "delivered": result.delivered or record.delivered,
            },
        )
        if result.agent_id is None and attempts and not broadcast:
            amend(result, {"agent_id": attempts[-1].agent_id})
        record.status = result.status
        record.path = path
        if result.status in ANSWERED and not broadcast:
            record.chosen = result.agent_id
        self.record_outcome(record, result, keep=keep)
        return result

    def record_outcome(self, record: DecisionRecord, result: ReachResult, *, keep: bool = True) -> None:
        """Keep the record for `explain`, write the decision log line, tell the observers."""
        if keep:
            self.decisions.add(record)
        if DECISION_LOGGER.isEnabledFor(logging.INFO):
            log_decision(record, result)
        for observer in self.observers:
            try:
                observer.on_reach(record, result)
            except Exception:
                logger.exception("observer %r failed", observer)
