"""The delivery engine behind `Router.dispatch` and `Router.stream`: select, deliver, retry,
fall back, record."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from functools import partial
from typing import Any

from opentelemetry.trace import Tracer

from middleware import Fault, ReachMessage, ReachResult, ResultStatus
from middleware.fast import amend
from reach_adapters.router.attempts import Opener, Run, fall_back, given_up, in_turn, loop_refused
from reach_adapters.router.broadcast import fan_out
from reach_adapters.router.consensus.mode import decide, hint_of, missing_judge, pick_voters
from reach_adapters.router.consensus.voting import LocalVote
from reach_adapters.router.deadlines import apply_caller_timeout
from reach_adapters.router.decisions import DecisionLog, DecisionRecord
from reach_adapters.router.deferral import DeferredQueue, RouteAgain, not_deferred
from reach_adapters.router.faults import ANSWERED
from reach_adapters.router.guard import Guard, Refusal, refused_result
from reach_adapters.router.hops import (
    current_hop,
    reset_current_guard,
    reset_current_reach,
    set_current_guard,
    set_current_reach,
)
from reach_adapters.router.idempotency import IdempotencyStore, fingerprint, stream_shape
from reach_adapters.router.matching import LexicalMatcher, Matcher
from reach_adapters.router.observe import ReachObserver
from reach_adapters.router.outcomes import ErrorKind, error_result
from reach_adapters.router.planning import Plan, Planner
from reach_adapters.router.policy import RoutingPolicy
from reach_adapters.router.ratings import Ratings
from reach_adapters.router.recording import new_record, record_outcome, settle
from reach_adapters.router.registry import Registry
from reach_adapters.router.repeats import Repeated, claim, may_run_again, repeat_wait_s, settler
from reach_adapters.router.retry import RetryBudgets, may_resend
from reach_adapters.router.selection import Problem
from reach_adapters.router.state import Slot
from reach_adapters.router.strategies import Strategy, make_strategies
from reach_adapters.router.thread_scope import scope_thread
from reach_adapters.router.tracing import DISPATCH, SELECT, active_tracer, spanned

__all__ = ["Dispatcher", "Plan"]


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
        self.ratings = Ratings(policy.ratings)
        self.strategies = make_strategies(policy, self.ratings)
        self.dedupe = IdempotencyStore(
            policy.dedupe_window_s,
            policy.dedupe_max_entries,
            policy.dedupe_max_bytes,
            policy.dedupe_max_result_bytes,
        )
        self.budgets = RetryBudgets(policy.retry_budget_ratio, policy.retry_budget_floor)
        self.errors = policy.agent_errors
        # The ratings learn from every outcome: an output that broke its schema rates its agent down.
        self.observers: list[ReachObserver] = [self.ratings]
        self.guard: Guard | None = None
        # Told of each succeeded unicast or directed reach of a capability that names its undo
        # (`Capability.compensate_with`), with the message: `Router.compensate` needs its input.
        self.on_compensable: Callable[[ReachMessage, Slot, ReachResult], None] | None = None
        # Calls with defer=True that nothing could serve, waiting for a capable agent.
        self.deferred = DeferredQueue()
        # Task id → its runs going on here. The same task coming back through one of them (gateway
        # A → B → A) is a loop, refused at once rather than left waiting on itself.
        self._running: dict[str, list[Run]] = {}

    def set_guard(self, guard: Guard | None) -> None:
        self.guard = self.planner.guard = guard

    def reconfigure(self, policy: RoutingPolicy) -> None:
        self.policy = policy
        self.planner.policy = policy
        self.ratings.reconfigure(policy.ratings)
        self.strategies = make_strategies(policy, self.ratings)
        self.errors = policy.agent_errors
        self.decisions.resize(policy.decision_log_size)
        self.dedupe.reconfigure(
            policy.dedupe_window_s,
            policy.dedupe_max_entries,
            policy.dedupe_max_bytes,
            policy.dedupe_max_result_bytes,
        )
        self.budgets.reconfigure(policy.retry_budget_ratio, policy.retry_budget_floor)

    async def dispatch(
        self,
        message: ReachMessage,
        stream: Opener | None = None,
        *,
        admitted: bool = False,
        local: LocalVote | None = None,
    ) -> ReachResult:
        """Deliver `message`; with `stream`, its attempts open streams (see `streaming`).

        `admitted`: another router of the cluster admitted the call (its caller, permissions and
        quota) and deduplicated its task id: neither is done again here, though selection still
        keeps to what the guard allows. `local`: a consensus's Python vote function and normaliser.
        """
        if self._on_dispatch is not None:
            self._on_dispatch()
        meta = message.meta_info
        token = set_current_reach(meta)
        task_id = meta.task_id
        run = Run(meta.lineage, stream, admitted=admitted, local=local)
        runs = self._running.get(task_id)
        if runs is None:
            self._running[task_id] = [run]
        else:
            runs.append(run)
        try:
            guard = self.guard
            if guard is not None and not admitted:
                # Who calls, first: even a refused loop is a caller's call, and counts as one.
                hop = current_hop()
                refusal = await guard.admit(message, None if hop is None else hop.agent_id)
                if refusal is not None:
                    return self._refuse(message, run, refusal)
                if meta.configurable:
                    # The caller is settled: its thread becomes its own before anything reads it.
                    scope_thread(meta)
            # Loops next: a task that came back must be refused, not wait on its own first run.
            came_back = runs is not None and any(other.sent_back(meta.lineage) for other in runs[:-1])
            if came_back or meta.depth > self.policy.max_depth:
                return self._loop(message, came_back, run)
            if guard is not None:
                return await self._guarded(guard, message, run)
            tracer = active_tracer()
            return await spanned(tracer, DISPATCH, self._run(message, tracer, run), message)
        finally:
            if not run.open:
                self._leave(task_id, run)
            reset_current_reach(token)

    def _leave(self, task_id: str, run: Run) -> None:
        """`run` of task `task_id` is over here (a stream's when it ends)."""
        runs = self._running[task_id]
        if len(runs) == 1:
            del self._running[task_id]
        else:
            runs.remove(run)

    async def _guarded(self, guard: Guard, message: ReachMessage, run: Run) -> ReachResult:
        tracer = active_tracer()
        # Agents passing the task on to another gateway sign their hop with this guard.
        token = set_current_guard(guard)
        try:
            return await spanned(tracer, DISPATCH, self._run(message, tracer, run), message)
        finally:
            reset_current_guard(token)

    def _refuse(
        self, message: ReachMessage, run: Run, refusal: Refusal, record: DecisionRecord | None = None
    ) -> ReachResult:
        record = new_record(message, None) if record is None else record
        return self._finish(
            run, message, record, refused_result(message, refusal), time.perf_counter(), "none"
        )

    def _run(
        self, message: ReachMessage, tracer: Tracer | None, run: Run
    ) -> Coroutine[Any, Any, ReachResult]:
        # Returns the coroutine rather than awaiting it: one frame less on every routed call.
        # Generated task ids are unique by construction; only ids the caller chose can repeat.
        if (
            "task_id" in message.meta_info.__pydantic_fields_set__
            and self.policy.dedupe_window_s
            and not run.admitted
        ):
            return self._deduplicated(message, tracer, run)
        return self._passes(message, tracer, run)

    def _loop(self, message: ReachMessage, came_back: bool, run: Run) -> ReachResult:
        refused = loop_refused(message, came_back, self.policy.max_depth)
        # A task that came back stays out of the decision log: its id names the run still going on.
        record = new_record(message, None)
        return self._finish(run, message, record, refused, time.perf_counter(), "none", keep=not came_back)

    async def _deduplicated(self, message: ReachMessage, tracer: Tracer | None, run: Run) -> ReachResult:
        request = fingerprint(message, self.planner.directed_capability(message))
        stream = run.stream
        if stream is not None:
            # A repeated stream is answered with chunks, a repeated call with a payload.
            request = request._replace(mode="stream", shape=stream_shape(message.meta_info))
        wait_s = partial(repeat_wait_s, self.registry, message, stream is not None)
        claimed = await claim(self.dedupe, message, request, wait_s)
        if isinstance(claimed, Repeated):
            if not claimed.refused:
                return claimed.result
            # Kept out of the decision log: the task id's record belongs to its first request.
            record = new_record(message, None)
            return self._finish(run, message, record, claimed.result, time.perf_counter(), "none", keep=False)
        task_id = message.meta_info.task_id
        try:
            result = await self._passes(message, tracer, run)
        except BaseException:
            gone = run.cancelled
            if gone is not None and not may_run_again(self.registry, message, gone):
                # The agent had the task and may have done it: a repeat gets this, never a second
                # delivery (a timeout after delivery is kept the same way).
                self.dedupe.settle(task_id, claimed, gone)
            else:
                self.dedupe.abandon(task_id, claimed)
            raise
        if stream is None:
            self.dedupe.settle(task_id, claimed, result)
        else:
            stream.settles(result, settler(self.dedupe, task_id, claimed), self.dedupe.max_result_bytes)
        return result

    def _strategy_for(self, message: ReachMessage) -> Strategy | None:
        return self.strategies.get(message.routing_hint.strategy or self.policy.strategy)

    def _passes(
        self, message: ReachMessage, tracer: Tracer | None, run: Run
    ) -> Coroutine[Any, Any, ReachResult]:
        """A call that may wait deferred loops over passes; every other call takes one pass, with
        no loop around it (no frame more on the common path)."""
        if message.routing_hint.defer:
            return self._dispatch(message, tracer, run)
        return self._dispatch_once(message, tracer, run)

    async def _dispatch(self, message: ReachMessage, tracer: Tracer | None, run: Run) -> ReachResult:
        while True:
            try:
                return await self._dispatch_once(message, tracer, run)
            except RouteAgain:  # parked or woken in the deferred queue: an agent may serve it now
                continue

    async def _dispatch_once(self, message: ReachMessage, tracer: Tracer | None, run: Run) -> ReachResult:
        start = time.perf_counter()
        meta = message.meta_info
        hint = message.routing_hint
        strategy = self._strategy_for(message)
        if strategy is None:
            error = (
                f"routing_hint.strategy {hint.strategy!r} is unknown; use one of {sorted(self.strategies)}"
            )
            kind = ErrorKind.INVALID_MESSAGE
            unknown = error_result(message, ResultStatus.INVALID, kind, error, fault=Fault.CALLER)
            return self._finish(run, message, new_record(message, None), unknown, start, "none")
        caller_deadline = apply_caller_timeout(meta)
        record = new_record(message, strategy)
        try:
            plan = await spanned(tracer, SELECT, self.planner.plan(message, record, strategy), record)
            if plan.problem is not None:
                problem = plan.problem
                missing = error_result(
                    message, problem.status, problem.error_type, problem.error, fault=problem.fault
                )
                if problem.fault is Fault.CALLER:
                    return self._finish(run, message, record, missing, start, "none", plan.queued_ms)
                # Fallback serves "no agent can take this", never "the caller sent garbage".
                refused = self._invalid_payload(message)
                if refused is not None:
                    return self._finish(run, message, record, refused, start, "none", plan.queued_ms)
                if hint.mode == "consensus":
                    # One fallback agent's answer is no consensus, nor is waiting for one.
                    if hint.defer:
                        not_deferred(record, "a consensus call is answered at once")
                    return self._finish(run, message, record, missing, start, "none", plan.queued_ms)
                return await self._fall_back(
                    message, record, missing, start, plan.queued_ms, caller_deadline, run, problem
                )
            deadline = meta.deadline or 0.0
            if hint.mode == "broadcast":
                # The caller's mistake, as a route says, not n targets' refusals merged.
                invalid = self._invalid_payload(message)
                if invalid is not None:
                    return self._finish(run, message, record, invalid, start, "none", plan.queued_ms)
                refused = await self._fan_out_refused(message, run, record, plan.slots)
                if refused is not None:
                    return refused
                merged = await fan_out(plan.slots, message, deadline, hint.merge, record, self.errors)
                return self._finish(run, message, record, merged, start, "candidate", plan.queued_ms)
            if hint.mode == "consensus":
                return await self._consensus(message, record, plan, deadline, start, run)
            routed = time.perf_counter()
            asked = meta.capability
            budget = self.budgets.of(asked or "")
            result, last = await in_turn(
                message, record, plan, deadline, tracer, run, self.policy, budget, self.errors
            )
            if result.status is ResultStatus.OK and last.capability.compensate_with and self.on_compensable:
                self.on_compensable(message, last, result)
            if result.status in ANSWERED or result.fault is Fault.TASK:
                # Answered; or the agent did the task and answered no, which another would too.
                return self._finish(run, message, record, result, start, "candidate", plan.queued_ms, routed)
            if meta.capability != asked:
                # A lower match failed: the fallback chain and the answer name what was asked.
                amend(meta, {"capability": asked})
            if result.fault is Fault.CALLER:
                unavailable = self.planner.unavailable_fit(message, result, plan)
                if unavailable is None:
                    return self._finish(run, message, record, result, start, "none", plan.queued_ms)
                result = unavailable
            if not may_resend(result, last.capability.safe_to_repeat):
                # The work may have been done already; a fallback would do it a second time.
                record.note = (
                    record.note or "no fallback: the work may have started and is not safe to repeat"
                )
                return self._finish(run, message, record, result, start, "none", plan.queued_ms)
            return await self._fall_back(message, record, result, start, plan.queued_ms, caller_deadline, run)
        except asyncio.CancelledError:
            # The caller gave up: the task still leaves a record of how far it got.
            run.cancelled = gone = given_up(message, record)
            self._finish(run, message, record, gone, start, "none")
            raise

    async def _consensus(
        self,
        message: ReachMessage,
        record: DecisionRecord,
        plan: Plan,
        deadline: float,
        start: float,
        run: Run,
    ) -> ReachResult:
        # The caller's mistake, as a route says: no voter is asked to refuse it n times over.
        refused = self._invalid_payload(message)
        if refused is not None:
            return self._finish(run, message, record, refused, start, "none", plan.queued_ms)
        missing = missing_judge(message, self.registry)
        if missing is not None:
            return self._finish(run, message, record, missing, start, "none", plan.queued_ms)
        voters = pick_voters(plan.slots, hint_of(message).n)
        refused = await self._fan_out_refused(message, run, record, voters)
        if refused is not None:
            return refused
        decided = await decide(
            voters,
            message,
            deadline,
            record,
            self.policy,
            self.errors,
            self.ratings,
            self.dispatch,
            run.local,
        )
        return self._finish(run, message, record, decided, start, "candidate", plan.queued_ms)

    async def _fan_out_refused(
        self, message: ReachMessage, run: Run, record: DecisionRecord, slots: list[Slot]
    ) -> ReachResult | None:
        """The refusal of a call sent to several `slots` at once when the caller's quota cannot
        take that many; else None, and the run targets them all."""
        principal = message.meta_info.principal
        if self.guard is not None and principal is not None:
            refusal = await self.guard.fan_out(principal, len(slots))
            if refusal is not None:
                return self._refuse(message, run, refusal, record)
        run.targets.update(slot.runtime.agent_id for slot in slots)
        return None

    def _invalid_payload(self, message: ReachMessage) -> ReachResult | None:
        """The caller's refusal when the payload fits no declaration of its capability, else None."""
        invalid = self.planner.invalid_payload(message)
        if invalid is None:
            return None
        kind = ErrorKind.PAYLOAD_VALIDATION
        return error_result(message, ResultStatus.INVALID, kind, invalid, fault=Fault.CALLER)

    async def _fall_back(
        self,
        message: ReachMessage,
        record: DecisionRecord,
        result: ReachResult,
        start: float,
        queued_ms: float,
        caller_deadline: bool,
        run: Run,
        problem: Problem | None = None,
    ) -> ReachResult:
        """The fallback chain; then, for a `problem` no agent could serve, the deferred queue
        (`RouteAgain`: woken there, route again)."""
        result, path = await fall_back(
            message, record, result, caller_deadline, run, self.registry, self.policy, self.errors, self.guard
        )
        if path == "none" and problem is not None and message.routing_hint.defer:
            deferred = self.deferred.hold(message, record, problem, result, caller_deadline, run, self.policy)
            result = await deferred
        return self._finish(run, message, record, result, start, path, queued_ms)

    def _finish(
        self,
        run: Run,
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
        settle(message, record, result, start, path, queued_ms, routed)
        if message.meta_info.configurable is not None:
            self.planner.threads.remember(message.meta_info, result)
        if run.deferral is not None:
            record.deferred_ms = run.deferral.waited_ms
        if self.policy.record_payloads:
            record.payload = message.raw_payload
            record.result_payload = result.payload
        # An open stream is not over yet: it records the outcome when it ends.
        stream = run.stream
        if stream is not None and stream.takes_over(
            record, result, keep, start, partial(self._leave, message.meta_info.task_id, run)
        ):
            run.open = True
        else:
            record_outcome(self.decisions, self.observers, record, result, keep)
        return result
