"""What a delivery came to: failed results the router builds, and the classification of what an
agent did (raised, hung, returned) into a result that says whose `Fault` a failure is."""

from __future__ import annotations

import logging
import secrets
from enum import StrEnum
from typing import TYPE_CHECKING

from middleware import Fault, NotJsonSafeError, ReachMessage, ReachResult, ResultStatus
from middleware.fast import ZERO_TIMINGS, amend, build_trusted
from reach_adapters.errors import InvalidMessageError, ReachError
from reach_adapters.router.faults import (
    ANSWERED,
    counts_against_agent,
    fault_of_returned,
    is_transient,
    never_started,
)
from reach_adapters.router.policy import AgentErrors
from reach_adapters.router.schemas import first_error
from reach_adapters.security import redact_text

if TYPE_CHECKING:
    from reach_adapters.router.state import Slot

__all__ = [
    "FIX_OPTIONS",
    "UNKNOWN_OUTCOME",
    "AgentBusyError",
    "ErrorKind",
    "StreamEnded",
    "TaskError",
    "account",
    "checked_output",
    "cut_short",
    "error_result",
    "from_exception",
    "returned",
    "timed_out",
]

logger = logging.getLogger(__name__)

# Said of every failure after delivery whose effect the router cannot know.
UNKNOWN_OUTCOME = "the outcome is unknown: the agent may have done the work"
# The `extra` key of an invalid result whose caller left out or misgave call options: those that
# make the call valid, with placeholder values (`InvalidMessageError.fix_options`).
FIX_OPTIONS = "fix_options"


def cut_short(who: str, agent_id: str | None) -> str:
    """Why a task stopped as an agent ran it: `who` stopped it, and which agent may have done
    the work (said only when known)."""
    running = "it" if agent_id is None else f"agent {agent_id} ran it"
    return f"{who} while {running}; {UNKNOWN_OUTCOME}"


class ErrorKind(StrEnum):
    """The ``error_type`` of failures the router itself names; an agent's exception keeps its
    class name. Where a `ReachError` subclass stands for the failure, the value is its name, so
    `raise_for_status` raises that class; for the others it raises the class of the status."""

    AGENT_CALL = "AgentCallError"
    AGENT_BUSY = "AgentBusyError"
    AGENT_PROTOCOL = "AgentProtocolError"
    CANCELLED = "Cancelled"
    DEFER_QUEUE_FULL = "DeferQueueFullError"
    IDEMPOTENCY_CONFLICT = "IdempotencyConflictError"
    INPUT_REQUIRED = "InputRequired"
    INVALID_MESSAGE = "InvalidMessageError"
    LOOP_DETECTED = "LoopDetectedError"
    NO_CANDIDATE = "NoCandidateError"
    OUTPUT_VALIDATION = "OutputValidationError"
    PAYLOAD_VALIDATION = "PayloadValidationError"
    PERMISSION_DENIED = "PermissionDeniedError"
    QUOTA_EXCEEDED = "QuotaExceededError"
    TIMEOUT = "ReachTimeoutError"
    UNKNOWN_AGENT = "UnknownAgentError"


class AgentBusyError(Exception):
    """Raise from an agent to say "not now": the router tries another candidate."""


class TaskError(Exception):
    """Raise from an agent, ``from`` the error it met, for a failure of the task rather than of
    the agent (a tool saying "order 7 not found", as an MCP ``isError`` does): the result is
    `error`, fault `task`, not retried, the breaker untouched. Its error type and text are the
    cause's, masked (or hidden) as any agent's error is."""


class StreamEnded(Exception):  # noqa: N818 - an ending said by the agent, not an error of it
    """Raise from an agent's ``astream`` to end the stream with `result`, one that is not ok (the
    task failed or was rejected, or waits for input): the router records that result's status
    and fault as the agent says them, as for `invoke`, instead of counting an exception raised
    mid-stream as the agent's own failure. The caller's stream then raises ``error_for(result)``,
    whose ``.result`` is that result (an ``input_required`` one says what to ``resume=``)."""

    def __init__(self, result: ReachResult) -> None:
        super().__init__(f"the stream ended {result.status}: {result.error_type}: {result.error}")
        self.result = result


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

    It carries the message's trace id and capability, and says no agent served it: not every
    failure passes through the dispatcher's finishing step (an async task cancelled or failed in
    the router, a cluster node's refusal), and the caller needs them to find the task's trace.
    The finishing step puts the path the task took in their place.
    """
    meta = message.meta_info
    values = {
        "status": status,
        "task_id": meta.task_id,
        "trace_id": meta.trace_id,
        "capability": meta.capability,
        "agent_id": agent_id,
        "error_type": error_type,
        "error": error,
        "fault": fault,
        "retryable": retryable,
        "served_by": "none",
        "timings": ZERO_TIMINGS,
    }
    if delivered is not None:
        values["delivered"] = delivered
    return build_trusted(ReachResult, values)


def from_exception(message: ReachMessage, agent_id: str, exc: Exception, errors: AgentErrors) -> ReachResult:
    """What an exception the agent raised means: the caller's request (`InvalidMessageError`),
    "not now" (`AgentBusyError`), the failed result of a call it made (`ReachError.result`), the
    task's failure (`TaskError`), or the agent's own failure, worth retrying when transient.

    Its text reaches the caller with secrets masked, or, unless ``errors.expose``, only as a
    reference to the log line that has it.
    """
    task_error = isinstance(exc, TaskError)
    if task_error and isinstance(exc.__cause__, Exception):
        exc = exc.__cause__
    reference = None if errors.expose else secrets.token_hex(6)
    if reference is None:
        error = redact_text(str(exc) or repr(exc))
    else:
        error = f"agent error (reference {reference})"
    kind = type(exc).__name__
    nested = exc.result if isinstance(exc, ReachError) else None
    if (isinstance(exc, InvalidMessageError) and exc.call_arguments) or (
        nested is not None and nested.task_id != message.meta_info.task_id
    ):
        # A call the agent made through the router was refused for its arguments, or failed and
        # the agent raised its result: a mistake of the agent's as that call's caller is its
        # own; the failure of what it called is not its health's, and a replica of it would
        # call the same. Nor is a quota the call ran into: "not now", not a fault of the agent.
        fault = Fault.AGENT
        if nested is not None and (
            nested.fault is not Fault.CALLER or nested.error_type == ErrorKind.QUOTA_EXCEEDED
        ):
            fault = Fault.TASK
        result = error_result(
            message, ResultStatus.ERROR, kind, error, fault=fault, agent_id=agent_id, delivered=True
        )
    elif task_error:
        # The agent says the task failed, not itself: any replica would fail it alike.
        result = error_result(
            message, ResultStatus.ERROR, kind, error, fault=Fault.TASK, agent_id=agent_id, delivered=True
        )
    elif isinstance(exc, InvalidMessageError):
        # The agent found the request malformed (a payload it cannot bind, a bad message).
        result = error_result(
            message, ResultStatus.INVALID, kind, error, fault=Fault.CALLER, agent_id=agent_id
        )
        if exc.fix_options is not None:
            # Each surface says how its callers give them; the text says it in Python.
            amend(result, {"extra": {FIX_OPTIONS: exc.fix_options}})
    elif isinstance(exc, AgentBusyError):
        # "Not now": nothing was started, and another agent may have room.
        result = error_result(
            message, ResultStatus.ERROR, kind, error, fault=Fault.ROUTER, agent_id=agent_id, retryable=True
        )
    else:
        retryable = not isinstance(exc, NotJsonSafeError) and is_transient(exc, errors.transient)
        delivered = not never_started(exc)
        if retryable and delivered:
            error = f"{error}; {UNKNOWN_OUTCOME}"
        result = error_result(
            message,
            ResultStatus.ERROR,
            kind,
            error,
            fault=Fault.AGENT,
            agent_id=agent_id,
            retryable=retryable,
            delivered=delivered,
        )
    _log_exception(message, agent_id, exc, result.fault, reference)
    return result


def _log_exception(
    message: ReachMessage, agent_id: str, exc: Exception, fault: Fault | None, reference: str | None
) -> None:
    """One line for the operator (WARNING when the agent is to blame, or when the caller was
    given only a `reference` to it), the traceback at DEBUG."""
    level = logging.WARNING if fault is Fault.AGENT or reference is not None else logging.DEBUG
    if logger.isEnabledFor(level):
        task_id = message.meta_info.task_id
        ref = f" (reference {reference})" if reference is not None else ""
        logger.log(
            level, "agent %s raised on task %s%s: %s: %s", agent_id, task_id, ref, type(exc).__name__, exc
        )
    if logger.isEnabledFor(logging.DEBUG):
        logger.debug("traceback of agent %s on task %s", agent_id, message.meta_info.task_id, exc_info=exc)


def timed_out(message: ReachMessage, slot: Slot, budget_s: float, on_caller: bool) -> ReachResult:
    """A delivery that ran out of time: the agent's failure only if it had the time it usually
    needs for the capability (twice its average latency, `Slot.usual_ms`); less time (left
    after queueing, a per-attempt share, a tight caller deadline) is not held against it, nor
    time it was waiting, `on_caller`, for its caller's answer to a question it asked (DESIGN §6:
    a caller that does not answer, or left, must not quarantine a healthy agent)."""
    runtime = slot.runtime
    usual = slot.usual_ms
    budget_ms = budget_s * 1000.0
    if on_caller:
        error = (
            f"agent {runtime.agent_id} asked its caller for input and had no answer within "
            f"{budget_ms:.0f} ms; answer its questions within the call's time (not held against "
            f"the agent); {UNKNOWN_OUTCOME}"
        )
        fault = Fault.CALLER
    else:
        error = f"agent {runtime.agent_id} did not answer within {budget_ms:.0f} ms; {UNKNOWN_OUTCOME}"
        fault = Fault.AGENT
        if usual is not None and budget_ms < 2 * usual:
            fault = Fault.ROUTER
            error += f" (it usually answers in {usual:.0f} ms: too little time was left, not held against it)"
    return error_result(
        message,
        ResultStatus.TIMEOUT,
        ErrorKind.TIMEOUT,
        error,
        fault=fault,
        agent_id=runtime.agent_id,
        # The caller's silence would be the same elsewhere; another replica may answer in time.
        retryable=not on_caller,
        delivered=True,
    )


def returned(message: ReachMessage, agent_id: str, result: object) -> ReachResult:
    """What `invoke` returned, as a result that says whose fault a failure is and whether the
    agent had the task; the agent's own word on both stands (another router's, over MCP)."""
    if not isinstance(result, ReachResult):
        return error_result(
            message,
            ResultStatus.ERROR,
            ErrorKind.AGENT_PROTOCOL,
            f"agent {agent_id} returned {type(result).__name__} from invoke(), not ReachResult",
            fault=Fault.AGENT,
            agent_id=agent_id,
            delivered=True,
        )
    if result.status is not ResultStatus.OK or not result.delivered:
        said = result.__pydantic_fields_set__
        amend(
            result,
            {"fault": fault_of_returned(result), "delivered": result.delivered or "delivered" not in said},
        )
    return result


def checked_output(message: ReachMessage, slot: Slot, result: ReachResult) -> ReachResult:
    """`result`, or an error when its payload breaks the capability's output schema."""
    validator = slot.output_validator
    if result.status is not ResultStatus.OK or validator is None or validator.is_valid(result.payload):
        return result
    problem = first_error(validator, result.payload)
    error = f"output of {slot.capability.name!r} does not match its output schema: {problem}"
    # The agent's failure, and retryable: another replica may answer correctly.
    return error_result(
        message,
        ResultStatus.ERROR,
        ErrorKind.OUTPUT_VALIDATION,
        error,
        fault=Fault.AGENT,
        agent_id=slot.runtime.agent_id,
        retryable=True,
        delivered=True,
    )


def account(message: ReachMessage, slot: Slot, result: ReachResult, elapsed_ms: float) -> None:
    """Count the outcome in the agent's health and breaker, and in the capability's usual
    latency, when it is the agent's own doing."""
    runtime = slot.runtime
    answered = result.status in ANSWERED
    if answered or counts_against_agent(result):
        if slot.record(answered, elapsed_ms):
            logger.warning(
                "agent %s quarantined after %s (%s failures in a row)",
                runtime.agent_id,
                result.error_type,
                runtime.breaker.consecutive,
            )
    else:
        # Not the agent's doing (see `faults`): its health is untouched, a probe slot freed.
        runtime.breaker.release_probe()
    if not answered and logger.isEnabledFor(logging.DEBUG):
        logger.debug(
            "task %s: agent %s ended %s (%s fault): %s: %s",
            message.meta_info.task_id,
            runtime.agent_id,
            result.status,
            result.fault,
            result.error_type,
            result.error,
        )
