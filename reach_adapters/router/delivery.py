"""One delivery of a message to one agent: deadline, in-flight accounting, errors as results."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Sequence

from middleware import Fault, NotJsonSafeError, ReachMessage, ReachResult, ResultStatus
from middleware.fast import ZERO_TIMINGS, amend, build_trusted
from reach_adapters.errors import InvalidMessageError
from reach_adapters.router.deadlines import watchdog
from reach_adapters.router.faults import (
    ANSWERED,
    counts_against_agent,
    fault_of_returned,
    is_transient,
    never_started,
)
from reach_adapters.router.hops import Hop, enter_hop, free_slot, leave_hop
from reach_adapters.router.schemas import first_error
from reach_adapters.router.state import Slot

__all__ = [
    "UNKNOWN_OUTCOME",
    "AgentBusyError",
    "adapted",
    "deliver",
    "error_result",
    "input_problem",
    "resumes",
]

logger = logging.getLogger(__name__)


class AgentBusyError(Exception):
    """Raise from an agent to say "not now": the router tries another candidate."""


def error_result(
    message: ReachMessage,
    status: ResultStatus,
    error_type: str,
    error: str,
    *,
    fault: Fault | None = None,
    agent_id: str | None = None,
    retryable: bool = False,
    delivered: bool | None = None,
) -> ReachResult:
    """A failed result for `message`. Say whose `fault` it is where you know (see `faults`).

    An agent returning it need not say `delivered`: the router knows the agent had the task. Say
    it only to pass on another router's word (a task that never left it).
    """
    values = {
        "status": status,
        "task_id": message.meta_info.task_id,
        "agent_id": agent_id,
        "error_type": error_type,
        "error": error,
        "fault": fault,
        "retryable": retryable,
        "timings": ZERO_TIMINGS,
    }
    if delivered is not None:
        values["delivered"] = delivered
    return build_trusted(ReachResult, values)


def _from_exception(
    message: ReachMessage, agent_id: str, exc: Exception, transient: Sequence[type[BaseException]]
) -> ReachResult:
    error = str(exc) or repr(exc)
    kind = type(exc).__name__
    if isinstance(exc, InvalidMessageError):
        # The agent found the request malformed (a payload it cannot bind, a bad message).
        return error_result(message, ResultStatus.INVALID, kind, error, fault=Fault.CALLER, agent_id=agent_id)
    if isinstance(exc, AgentBusyError):
        # "Not now": nothing was started, and another agent may have room.
        return error_result(
            message, ResultStatus.ERROR, kind, error, fault=Fault.ROUTER, agent_id=agent_id, retryable=True
        )
    retryable = not isinstance(exc, NotJsonSafeError) and is_transient(exc, transient)
    delivered = not never_started(exc)
    if retryable and delivered:
        error = f"{error}; {UNKNOWN_OUTCOME}"
    return error_result(
        message,
        ResultStatus.ERROR,
        kind,
        error,
        fault=Fault.AGENT,
        agent_id=agent_id,
        retryable=retryable,
        delivered=delivered,
    )


def _timed_out(message: ReachMessage, slot: Slot, budget_s: float) -> ReachResult:
    """A delivery that ran out of time: the agent's failure only if it had the time it usually
    needs (twice its average latency); less time (left after queueing, a per-attempt share, a
    tight caller deadline) is not held against it."""
    runtime = slot.runtime
    usual = runtime.usual_ms
    budget_ms = budget_s * 1000.0
    error = f"agent {runtime.agent_id} did not answer within {budget_ms:.0f} ms; {UNKNOWN_OUTCOME}"
    fault = Fault.AGENT
    if usual is not None and budget_ms < 2 * usual:
        fault = Fault.ROUTER
        error += f" (it usually answers in {usual:.0f} ms: too little time was left, not held against it)"
    return error_result(
        message,
        ResultStatus.TIMEOUT,
        "ReachTimeoutError",
        error,
        fault=fault,
        agent_id=runtime.agent_id,
        retryable=True,
        delivered=True,
    )


# Said of every failure after delivery whose effect the router cannot know.
UNKNOWN_OUTCOME = "the outcome is unknown: the agent may have done the work"


def adapted(slot: Slot, message: ReachMessage) -> ReachMessage:
    """`message` as the slot's agent reads it, a copy when that changes it (the next candidate
    may read it otherwise): its payload through `Agent.adapt_payload` (a plain text for a chat
    agent), its capability under the agent's own name when the router renamed it."""
    own = slot.own_name
    if own is not None:
        meta = message.meta_info.model_copy(update={"capability": own})
        message = message.model_copy(update={"meta_info": meta})
    if slot.adapt is None:
        return message
    payload = slot.adapt(own or slot.capability.name, message.raw_payload)
    if payload is message.raw_payload:
        return message
    return message.model_copy(update={"raw_payload": payload})


def resumes(message: ReachMessage) -> bool:
    """Whether the message answers an agent that asked for input (``resume=``): its payload is
    not the task's input then, and is not checked against the input schema."""
    return "resume" in message.meta_info.__pydantic_fields_set__


def input_problem(slot: Slot, message: ReachMessage) -> str | None:
    """What is wrong with the payload for this slot's input schema, or None.

    No payload means no arguments for a capability that takes an object, so it becomes ``{}``.
    """
    if message.raw_payload is None and slot.object_input:
        amend(message, {"raw_payload": {}})
    return slot.input_problem(message.raw_payload)


async def deliver(
    slot: Slot,
    message: ReachMessage,
    deadline: float,
    *,
    transient: Sequence[type[BaseException]] = (),
    recheck: bool = False,
) -> tuple[ReachResult, float]:
    """Invoke the slot's agent once; return its result and the time it took, in milliseconds.

    Never raises except on cancellation of the caller: an agent that raises, hangs past the
    deadline or returns garbage yields an error result, so one bad agent cannot break routing.
    Every result says whose `Fault` a failure is, and whether the agent received the task;
    only the agent's own failures count against its health. `transient` adds exception types
    worth retrying elsewhere. ``recheck`` is for deliveries started later than their selection
    (broadcast tasks): capacity and the breaker are checked again, in the same step that takes
    the slot.
    """
    runtime = slot.runtime
    agent_id = runtime.agent_id
    if recheck:
        busy = runtime.breaker.blocks(time.monotonic()) or slot.saturation()
        if busy is not None:
            return error_result(
                message, ResultStatus.REJECTED, "AgentBusyError", busy, fault=Fault.ROUTER, agent_id=agent_id
            ), 0.0
    budget = min(slot.capability.timeout_ms / 1000.0, deadline - time.time())
    if budget <= 0:
        return error_result(
            message,
            ResultStatus.TIMEOUT,
            "ReachTimeoutError",
            "the deadline passed before delivery; the task was never delivered",
            fault=Fault.ROUTER,
            agent_id=agent_id,
        ), 0.0
    cap = slot.capability
    if slot.adapt is not None or slot.own_name is not None:
        message = adapted(slot, message)
    # Most capabilities take any object and most calls carry one: skip the check call then.
    problem = (
        input_problem(slot, message)
        if (slot.input_validator is not None or (message.raw_payload is None and slot.object_input))
        and not resumes(message)
        else None
    )
    if problem is not None:
        return error_result(
            message,
            ResultStatus.INVALID,
            "PayloadValidationError",
            problem,
            fault=Fault.CALLER,
            agent_id=agent_id,
        ), 0.0
    task = asyncio.current_task()
    assert task is not None
    watch = watchdog(task.get_loop())
    cancelling = task.cancelling()
    slot.in_flight += 1
    runtime.in_flight += 1
    runtime.breaker.on_start()
    hop = Hop(message.meta_info, agent_id, slot)
    token = enter_hop(hop)
    expiry = watch.watch(task, budget)
    start = time.perf_counter()
    try:
        try:
            result = await runtime.agent.invoke(message)
        except asyncio.CancelledError:
            if expiry.consume() and task.uncancel() <= cancelling:
                raise TimeoutError from None
            raise
        finally:
            watch.release(expiry)
            if expiry.consume():
                # The agent swallowed our cancellation: take it back, as asyncio.timeout does.
                task.uncancel()
        if not isinstance(result, ReachResult):
            result = error_result(
                message,
                ResultStatus.ERROR,
                "AgentProtocolError",
                f"agent {agent_id} returned {type(result).__name__} from invoke(), not ReachResult",
                fault=Fault.AGENT,
                agent_id=agent_id,
                delivered=True,
            )
        elif result.status is not ResultStatus.OK or not result.delivered:
            # The agent's own word on fault and delivery stands (another router's, over MCP).
            said = result.__pydantic_fields_set__
            amend(
                result,
                {
                    "fault": fault_of_returned(result),
                    "delivered": result.delivered or "delivered" not in said,
                },
            )
    except TimeoutError:
        result = _timed_out(message, slot, budget)
    except asyncio.CancelledError:
        # The caller gave up: no outcome to count, but a half-open probe slot must not stay taken.
        runtime.breaker.probing = False
        raise
    except Exception as exc:  # noqa: BLE001 - any agent failure becomes a result
        result = _from_exception(message, agent_id, exc, transient)
    finally:
        elapsed_ms = (time.perf_counter() - start) * 1000.0
        leave_hop(token)
        if not hop.lingering:
            free_slot(slot)
        # Over: a linger() from here on has no slot to keep.
        hop.slot = None
    status = result.status
    output_validator = slot.output_validator
    if (
        status is ResultStatus.OK
        and output_validator is not None
        and not output_validator.is_valid(result.payload)
    ):
        problem = first_error(output_validator, result.payload)
        error = f"output of {cap.name!r} does not match its output schema: {problem}"
        # The agent's failure, and retryable: another replica may answer correctly.
        result = error_result(
            message,
            ResultStatus.ERROR,
            "OutputValidationError",
            error,
            fault=Fault.AGENT,
            agent_id=agent_id,
            retryable=True,
            delivered=True,
        )
        status = ResultStatus.ERROR
    answered = status in ANSWERED
    if answered or counts_against_agent(result):
        if runtime.record(answered, elapsed_ms):
            logger.warning(
                "agent %s quarantined after %s (%s failures in a row)",
                agent_id,
                result.error_type,
                runtime.breaker.consecutive,
            )
    else:
        # Not the agent's doing (see `faults`): its health is untouched, a probe slot freed.
        runtime.breaker.probing = False
    if not answered and logger.isEnabledFor(logging.DEBUG):
        logger.debug(
            "task %s: agent %s ended %s (%s fault): %s: %s",
            message.meta_info.task_id,
            agent_id,
            status,
            result.fault,
            result.error_type,
            result.error,
        )
    return result, elapsed_ms
