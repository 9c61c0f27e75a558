"""The attempts of one dispatch: the best candidate, the next ones on transient failures (with
backoff and a retry budget), then the fallback chain. Unary calls and streams alike."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Protocol

from opentelemetry.trace import Tracer

from middleware import Fault, ReachMessage, ReachResult, ResultStatus
from middleware.fast import amend
from reach_adapters.router.compensation import abandoned
from reach_adapters.router.decisions import DecisionRecord, Exclusion, ExclusionKind
from reach_adapters.router.delivery import deliver
from reach_adapters.router.faults import ANSWERED, RETRIED
from reach_adapters.router.guard import Guard
from reach_adapters.router.outcomes import UNKNOWN_OUTCOME, ErrorKind, cut_short, error_result
from reach_adapters.router.planning import Plan, slot_for
from reach_adapters.router.policy import AgentErrors, RoutingPolicy
from reach_adapters.router.registry import Registry
from reach_adapters.router.repeats import Settle
from reach_adapters.router.retry import RetryBudget, backoff_s, may_resend
from reach_adapters.router.selection import exclusion, forbidden
from reach_adapters.router.state import Slot
from reach_adapters.router.tracing import ATTEMPT, spanned

if TYPE_CHECKING:
    from reach_adapters.router.consensus.voting import LocalVote
    from reach_adapters.router.deferral import Deferral

__all__ = ["Opener", "Run", "fall_back", "given_up", "in_turn", "loop_refused"]

logger = logging.getLogger(__name__)

Deliver = Callable[[Slot, ReachMessage, float, AgentErrors], Coroutine[Any, Any, tuple[ReachResult, float]]]


class Opener(Protocol):
    """A stream's way through the dispatch (see `streaming`): each attempt opens the agent's
    stream up to its first chunk, and the stream, once open, finishes the record itself."""

    def attempt(
        self, slot: Slot, message: ReachMessage, deadline: float, errors: AgentErrors
    ) -> Coroutine[Any, Any, tuple[ReachResult, float]]: ...

    def takes_over(
        self, record: DecisionRecord, result: ReachResult, keep: bool, start: float, leave: Callable[[], None]
    ) -> bool: ...

    def settles(self, result: ReachResult, settle: Settle, limit: int) -> None:
        """Hand `settle` what a repeat of this stream's task id is answered with, and whether it
        is kept for later repeats: its chunks (up to `limit` bytes) once it ends, how it ended when
        it failed or its caller left it early, or None when it may be streamed again then."""


class Run:
    """One dispatch of a task here: the lineage it came with, the agents it has gone to, and how
    each attempt is made (`deliver`, or a stream's opener)."""

    __slots__ = (
        "admitted",
        "cancelled",
        "deferral",
        "deliver",
        "lineage",
        "local",
        "open",
        "stream",
        "targets",
    )

    def __init__(
        self,
        lineage: list[str],
        stream: Opener | None = None,
        *,
        admitted: bool = False,
        local: LocalVote | None = None,
    ) -> None:
        self.lineage = lineage
        # Admitted (and deduplicated) by another router of the cluster, which may send the same
        # task to another agent here next: not a reuse of its task id.
        self.admitted = admitted
        self.targets: set[str] = set()
        self.stream = stream
        # A stream open past its dispatch: the task runs here until the stream ends.
        self.open = False
        self.deliver: Deliver = deliver if stream is None else stream.attempt
        # Its stay in the deferred queue, once it waits there (``defer=True``).
        self.deferral: Deferral | None = None
        # A consensus's vote function and normaliser, which stay in this process.
        self.local = local
        # What the call came to when its caller gave up on it (`given_up`).
        self.cancelled: ReachResult | None = None

    def sent_back(self, lineage: list[str]) -> bool:
        """Whether the same task arriving with `lineage` went out through one of this run's
        agents: its chain continues this run's, through a target of it. A retry of the task
        through another path does not."""
        n = len(self.lineage)
        return len(lineage) > n and lineage[n] in self.targets and lineage[:n] == self.lineage


def given_up(message: ReachMessage, record: DecisionRecord) -> ReachResult:
    """What a call its caller cancelled came to: whether, and by which agent, the task was had
    (the last attempt that reached one), as its record says."""
    kind = ErrorKind.CANCELLED
    had = [attempt.agent_id for attempt in record.attempts if attempt.delivered]
    if not had:
        return error_result(
            message, ResultStatus.CANCELLED, kind, "the caller cancelled the call", fault=Fault.CALLER
        )
    error = f"the caller cancelled the call after agent {had[-1]} had it; {UNKNOWN_OUTCOME}"
    return error_result(
        message, ResultStatus.CANCELLED, kind, error, fault=Fault.CALLER, agent_id=had[-1], delivered=True
    )


def loop_refused(message: ReachMessage, came_back: bool, max_depth: int) -> ReachResult:
    """The refusal of a task that came back to a run of it still going on here (`came_back`),
    or that went deeper than `max_depth`."""
    meta = message.meta_info
    chain = " → ".join(meta.lineage) or "(top level)"
    if came_back:
        error = (
            f"recursive reach refused: task {meta.task_id} came back to this router, which is "
            f"still running it, through {chain}"
        )
    else:
        error = f"recursive reach refused: depth {meta.depth} exceeds max_depth {max_depth}: {chain}"
    return error_result(message, ResultStatus.REJECTED, ErrorKind.LOOP_DETECTED, error, fault=Fault.CALLER)


async def in_turn(
    message: ReachMessage,
    record: DecisionRecord,
    plan: Plan,
    deadline: float,
    tracer: Tracer | None,
    run: Run,
    policy: RoutingPolicy,
    budget: RetryBudget,
    errors: AgentErrors,
) -> tuple[ReachResult, Slot]:
    """Deliver to the best slot; on a transient failure retry on the next-best, with backoff.

    A task safe to repeat gives each attempt only a share of the time left while another
    candidate could take over, so one hung replica cannot use up the whole deadline; never
    less than twice the agent's usual latency for the capability, and only once that is known.
    Returns the last result and the slot that gave it.
    """
    meta = message.meta_info
    budget.earn()
    tried: set[int] = set()
    retries = 0
    refused: ReachResult | None = None
    failed: tuple[ReachResult, Slot] | None = None
    # The first candidate was screened just now, with no await since: no need to check it again.
    slot = plan.slots[0]
    # When the attempt began, should a cancellation cut it short: the first, with the dispatch
    # (no clock read on the common path).
    began = record.created_at
    while True:
        tried.add(id(slot))
        run.targets.add(slot.runtime.agent_id)
        if slot.capability.name != meta.capability:
            # A matched task served under another of its top matches: its agent reads the
            # payload as that one, which is what it was checked against.
            amend(meta, {"capability": slot.capability.name})
        ends = deadline
        if (
            len(tried) < len(plan.slots)
            and policy.attempt_timeout_share < 1.0
            and retries < policy.max_retries
            and slot.capability.safe_to_repeat
        ):
            now = time.time()
            share = (deadline - now) * policy.attempt_timeout_share
            usual = slot.avg_ms
            # Never cut an attempt below what the agent needs for the capability (twice its
            # usual latency), nor one whose needs are not known yet: before the capability's
            # first success on it, how fast its other capabilities answer says nothing (an MCP
            # server's 2 ms echo would cut its 2 s report short).
            if usual is not None and share * 1000.0 >= 2 * usual:
                ends = now + share
        try:
            result, elapsed_ms = await spanned(
                tracer, ATTEMPT, run.deliver(slot, message, ends, errors), slot, record
            )
        except asyncio.CancelledError as cancelled:
            _cut_short(message, record, slot.runtime.agent_id, began, cancelled)
            raise
        record.add_attempt(slot.runtime.agent_id, result, elapsed_ms)
        if (
            result.status is ResultStatus.INVALID
            and result.error_type == ErrorKind.PAYLOAD_VALIDATION
            and not result.delivered
        ):
            # Only this candidate's declaration refused the payload (another version, say): one
            # of another may take it; the best one's complaint stands when none does.
            refused = refused or result
            if plan.takes(slot, message.raw_payload):
                # Not this router's refusal but the agent's own word, its declaration took it.
                plan.refusers = (*plan.refusers, slot)
            following = _next_slot(plan, tried, message, policy, fitting=True, again=False)
            if following is None:
                # A declaration that took the payload failed before: its failure is the answer,
                # not the refusal that followed it.
                return failed or (refused, slot)
            slot = following
            began = time.time()
            continue
        if result.status in ANSWERED:
            return result, slot
        if not result.retryable or result.fault not in RETRIED:
            return result, slot
        cap = slot.capability
        if not may_resend(result, cap.safe_to_repeat):
            record.note = f"not re-sent: {cap.name!r} is not idempotent and the work may have started"
            return result, slot
        answer = failed if failed is not None and _undelivered(result) else (result, slot)
        failed = answer
        if retries >= policy.max_retries:
            return answer
        if not budget.spend():
            record.note = f"retry budget of {cap.name!r} exhausted"
            logger.warning("task %s: retry budget of %r exhausted, not retrying", meta.task_id, cap.name)
            return answer
        delay = backoff_s(retries + 1, policy.backoff_ms, policy.backoff_multiplier, policy.jitter_ms)
        if time.time() + delay >= deadline:
            return answer
        retries += 1
        await asyncio.sleep(delay)
        following = _next_slot(plan, tried, message, policy, fitting=refused is not None)
        if following is None:
            return answer
        slot = following
        began = time.time()


def _cut_short(
    message: ReachMessage,
    record: DecisionRecord,
    agent_id: str,
    began: float,
    cancelled: asyncio.CancelledError,
    path: str = "candidate",
) -> None:
    """Record the attempt a cancellation cut short: the agent had the task and may have done the
    work, and whoever asks which agent that was (a cancelled async task's result, `explain`)
    finds it here. The deadline's cancellations end as timeouts before this; what is left is the
    caller giving up, or the router abandoning the call (closing, a task taken over)."""
    who, fault = (
        ("the router abandoned the call", Fault.ROUTER)
        if abandoned(cancelled)
        else ("the caller cancelled it", Fault.CALLER)
    )
    cut = error_result(
        message,
        ResultStatus.CANCELLED,
        ErrorKind.CANCELLED,
        cut_short(who, agent_id),
        fault=fault,
        agent_id=agent_id,
        delivered=True,
    )
    # Unix time (`time.time`) it began: the record's creation for a first attempt.
    record.add_attempt(agent_id, cut, (time.time() - began) * 1000.0, path)


def _next_slot(
    plan: Plan,
    tried: set[int],
    message: ReachMessage,
    policy: RoutingPolicy,
    *,
    fitting: bool = False,
    again: bool = True,
) -> Slot | None:
    """The best slot not tried yet that may still serve, else (`again`) the best tried one that
    may; `fitting` (a candidate refused the payload already): only one whose declaration takes it."""
    now = time.monotonic()
    check_breaker = not plan.forced
    payload = message.raw_payload
    best_tried: Slot | None = None
    for slot in plan.slots:
        if not again and id(slot) in tried:
            continue
        if fitting and not plan.takes(slot, payload):
            continue
        if exclusion(slot, message.meta_info, policy, now, breaker=check_breaker) is not None:
            continue
        if id(slot) not in tried:
            return slot
        best_tried = best_tried or slot
    return best_tried


async def fall_back(
    message: ReachMessage,
    record: DecisionRecord,
    result: ReachResult,
    caller_deadline: bool,
    run: Run,
    registry: Registry,
    policy: RoutingPolicy,
    errors: AgentErrors,
    guard: Guard | None,
) -> tuple[ReachResult, str]:
    """Try the hint's fallback agents, then the policy's default agent, in that order; those the
    caller's principal may not reach are passed over.

    Returns the result and the path that gave it: ``fallback``, ``default``, or ``none`` with
    the last failure when none answered.
    """
    meta = message.meta_info
    fallback = message.routing_hint.fallback
    chain = [(agent_id, "fallback") for agent_id in fallback]
    default = policy.default_agent
    if default is not None and default not in fallback:
        chain.append((default, "default"))
    tried = {attempt.agent_id for attempt in record.attempts}
    exclusions = record.exclusions
    for agent_id, path in chain:
        runtime = registry.get(agent_id)
        if runtime is None:
            exclusions.append(
                Exclusion(agent_id, f"{path} agent is not registered", ExclusionKind.UNREGISTERED)
            )
            continue
        if agent_id in tried:
            continue
        if not runtime.slots:
            reason = f"{path} agent declares no capabilities now"
            exclusions.append(Exclusion(agent_id, reason, ExclusionKind.UNDECLARED))
            continue
        slot = slot_for(runtime.slots, meta.capability) or runtime.slots[0]
        if guard is not None and meta.principal is not None and forbidden(guard, meta.principal, slot):
            # Passed over unrecorded: the caller's records name nothing it may not reach.
            continue
        excluded = exclusion(slot, meta, policy, time.monotonic())
        if excluded is not None:
            excluded.reason = f"{path} agent: {excluded.reason}"
            exclusions.append(excluded)
            continue
        now = time.time()
        if not caller_deadline:
            # No deadline from the caller: the fallback agent gets its own capability timeout.
            amend(meta, {"deadline": now + slot.capability.timeout_ms / 1000.0})
        elif (meta.deadline or 0.0) <= now:
            reason = f"{path} agent: the caller's deadline has passed"
            exclusions.append(Exclusion(agent_id, reason, ExclusionKind.DEADLINE))
            break
        run.targets.add(agent_id)
        try:
            outcome, elapsed_ms = await run.deliver(slot, message, meta.deadline or now, errors)
        except asyncio.CancelledError as cancelled:
            _cut_short(message, record, agent_id, now, cancelled, path)
            raise
        record.add_attempt(agent_id, outcome, elapsed_ms, path)
        if outcome.status in ANSWERED:
            return outcome, path
        if not _undelivered(outcome):
            result = outcome
    return result, "none"


def _undelivered(result: ReachResult) -> bool:
    """Whether `result` is a try the router itself could not deliver (the agent busy, say): it
    says less than the failure before it, which stays the answer unless a later try gives one."""
    return result.fault is Fault.ROUTER and not result.delivered
