"""Streaming delivery: chunks from agents that stream, one payload from those that do not."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Sequence

from pydantic import JsonValue

from middleware import Fault, ReachMessage, ReachResult, ResultStatus, ensure_json
from middleware.fast import ZERO_TIMINGS, build_trusted
from reach_adapters.errors import (
    AgentCallError,
    InvalidMessageError,
    NoCandidateError,
    PayloadValidationError,
    ReachError,
    ReachTimeoutError,
    raise_for_status,
)
from reach_adapters.router.decisions import Attempt, DecisionRecord
from reach_adapters.router.delivery import (
    UNKNOWN_OUTCOME,
    AgentBusyError,
    adapted,
    deliver,
    input_problem,
    resumes,
)
from reach_adapters.router.dispatcher import Dispatcher, apply_caller_timeout
from reach_adapters.router.faults import RETRIED, is_transient, never_started
from reach_adapters.router.hops import Hop, enter_hop, leave_hop
from reach_adapters.router.retry import may_resend
from reach_adapters.router.state import Slot

__all__ = ["stream_message"]

_PROBLEMS: dict[ResultStatus, type[ReachError]] = {
    ResultStatus.TIMEOUT: ReachTimeoutError,
    ResultStatus.INVALID: InvalidMessageError,
}


async def stream_message(dispatcher: Dispatcher, message: ReachMessage) -> AsyncIterator[JsonValue]:
    """Select like `route`, then yield the chosen agent's chunks.

    An agent streams when it has ``astream(message)``, an async iterator of JSON-safe chunks.
    Until the first chunk arrives a failing candidate is replaced by the next, when the failure
    is transient and the work is safe to repeat (as `route` decides); after it, a failure raises,
    since the caller already holds part of the answer.
    """
    strategy = dispatcher.strategy_for(message)
    if strategy is None:
        msg = f"routing_hint.strategy {message.routing_hint.strategy!r} is unknown"
        raise InvalidMessageError(msg)
    meta = message.meta_info
    apply_caller_timeout(meta)
    record = dispatcher.record_for(message, strategy)
    plan = await dispatcher.plan(message, record, strategy)
    if plan.problem is not None:
        problem = plan.problem
        _close(dispatcher, record, message, None, problem.status, f"{problem.error_type}: {problem.error}")
        raise _PROBLEMS.get(problem.status, NoCandidateError)(problem.error)
    deadline = meta.deadline or 0.0
    last_error: ReachError | None = None
    for slot in plan.slots[: dispatcher.policy.max_retries + 1]:
        if getattr(slot.runtime.agent, "astream", None) is None:
            result, elapsed_ms = await deliver(slot, message, deadline, transient=dispatcher.transient)
            record.add_attempt(slot.runtime.agent_id, result, elapsed_ms)
            if result.ok:
                _close(dispatcher, record, message, slot, ResultStatus.OK)
                yield result.payload
                return
            try:
                raise_for_status(result)
            except ReachError as exc:
                last_error = exc
            if not (result.retryable and result.fault in RETRIED):
                break
            if not may_resend(result, slot.capability.safe_to_repeat):
                break
            continue
        sent = adapted(slot, message)
        invalid = None if resumes(sent) else input_problem(slot, sent)
        if invalid is not None:
            _close(dispatcher, record, message, None, ResultStatus.INVALID, invalid)
            raise PayloadValidationError(invalid)
        started = False
        began = time.perf_counter()
        try:
            async for chunk in _chunks(slot, sent, deadline, dispatcher.transient):
                started = True
                yield chunk
        except _StreamFailedError as failure:
            elapsed_ms = (time.perf_counter() - began) * 1000.0
            error = failure.error
            record.attempts.append(
                Attempt(
                    slot.runtime.agent_id,
                    failure.status,
                    elapsed_ms,
                    "candidate",
                    failure.error_type,
                    str(error),
                    failure.fault,
                    failure.delivered,
                )
            )
            last_error = error
            resend = failure.transient and (slot.capability.safe_to_repeat or not failure.delivered)
            if started or not resend:
                _close(dispatcher, record, message, slot, failure.status, str(error))
                raise error from failure.__cause__
            continue
        elapsed_ms = (time.perf_counter() - began) * 1000.0
        record.attempts.append(Attempt(slot.runtime.agent_id, "ok", elapsed_ms))
        _close(dispatcher, record, message, slot, ResultStatus.OK)
        return
    _close(dispatcher, record, message, None, ResultStatus.ERROR, str(last_error) if last_error else None)
    if last_error is not None:
        raise last_error
    msg = f"no candidate could stream {meta.capability!r}"
    raise NoCandidateError(msg)


class _StreamFailedError(Exception):
    """A stream that failed, with what the retry rules need to know about it."""

    def __init__(
        self,
        error: ReachError,
        status: ResultStatus,
        error_type: str,
        transient: bool,
        fault: Fault,
        delivered: bool = True,
    ) -> None:
        super().__init__(str(error))
        self.error = error
        self.status = status
        self.error_type = error_type
        self.transient = transient
        self.fault = fault
        self.delivered = delivered


async def _chunks(
    slot: Slot, message: ReachMessage, deadline: float, transient: Sequence[type[BaseException]]
) -> AsyncIterator[JsonValue]:
    """The agent's chunks under the deadline, with in-flight counted and the outcome recorded.

    The routed-call context (`current_hop`) is set around each step of the agent's iterator only,
    so nested calls the agent makes inherit the task, while the caller's code between chunks does
    not.
    """
    runtime = slot.runtime
    agent_id = runtime.agent_id
    stream = runtime.agent.astream(message)  # type: ignore[attr-defined]
    hop = Hop(message.meta_info, agent_id)
    slot.in_flight += 1
    runtime.in_flight += 1
    runtime.breaker.on_start()
    began = time.perf_counter()
    # None while running; stays None when the caller stops early, which is no fault of the agent.
    success: bool | None = None
    try:
        while True:
            token = enter_hop(hop)
            try:
                # The timeout wraps one step only, never a yield, so it cannot fire in the caller.
                async with asyncio.timeout(max(deadline - time.time(), 0.0)):
                    chunk = ensure_json(await anext(stream), where="chunk")
            except StopAsyncIteration:
                success = True
                return
            except TimeoutError:
                success = False
                msg = f"agent {agent_id} stopped streaming at the deadline; {UNKNOWN_OUTCOME}"
                raise _StreamFailedError(
                    ReachTimeoutError(msg), ResultStatus.TIMEOUT, "ReachTimeoutError", True, Fault.AGENT
                ) from None
            except InvalidMessageError as exc:
                # The agent found the request malformed: the caller's to fix, not held against it.
                raise _StreamFailedError(
                    exc, ResultStatus.INVALID, type(exc).__name__, False, Fault.CALLER, delivered=False
                ) from exc
            except AgentBusyError as exc:
                msg = f"agent {agent_id} is busy: {exc}"
                raise _StreamFailedError(
                    AgentCallError(msg),
                    ResultStatus.ERROR,
                    type(exc).__name__,
                    True,
                    Fault.ROUTER,
                    delivered=False,
                ) from exc
            except Exception as exc:
                success = False
                msg = f"agent {agent_id} failed while streaming: {type(exc).__name__}: {exc}"
                failure = _StreamFailedError(
                    AgentCallError(msg),
                    ResultStatus.ERROR,
                    type(exc).__name__,
                    is_transient(exc, transient),
                    Fault.AGENT,
                    delivered=not never_started(exc),
                )
                raise failure from exc
            finally:
                leave_hop(token)
            yield chunk
    finally:
        slot.in_flight -= 1
        runtime.in_flight -= 1
        if success is None:
            runtime.breaker.probing = False
        aclose = getattr(stream, "aclose", None)
        if aclose is not None:
            await aclose()
        if success is not None:
            runtime.record(success, (time.perf_counter() - began) * 1000.0)
        if slot.waitlist:
            slot.waitlist.wake_one()


def _close(
    dispatcher: Dispatcher,
    record: DecisionRecord,
    message: ReachMessage,
    slot: Slot | None,
    status: ResultStatus,
    error: str | None = None,
) -> None:
    """Finish a stream's decision record like any reach: kept, logged, observed."""
    agent_id = slot.runtime.agent_id if slot is not None else None
    record.status = status
    record.path = "candidate" if slot is not None else "none"
    if status is ResultStatus.OK:
        record.chosen = agent_id
    meta = message.meta_info
    summary = build_trusted(
        ReachResult,
        {
            "status": status,
            "task_id": meta.task_id,
            "trace_id": meta.trace_id,
            "capability": meta.capability,
            "agent_id": agent_id,
            "attempts": len(record.attempts),
            "served_by": record.path,
            "error": error,
            "timings": ZERO_TIMINGS,
        },
    )
    dispatcher.record_outcome(record, summary)
