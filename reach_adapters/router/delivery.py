"""One delivery of a message to one agent: deadline, in-flight accounting, errors as results."""

from __future__ import annotations

import asyncio
import logging
import time
from contextvars import ContextVar, Token
from dataclasses import dataclass

from middleware import MetaInfo, NotJsonSafeError, ReachMessage, ReachResult, ResultStatus
from middleware.fast import ZERO_TIMINGS, amend, build_trusted
from reach_adapters.errors import InvalidMessageError
from reach_adapters.router.deadlines import watchdog
from reach_adapters.router.schemas import first_error
from reach_adapters.router.state import Slot

__all__ = [
    "AgentBusyError",
    "Hop",
    "current_hop",
    "current_reach",
    "deliver",
    "enter_hop",
    "error_result",
    "input_problem",
    "leave_hop",
    "reset_current_reach",
    "set_current_reach",
]

logger = logging.getLogger(__name__)


class AgentBusyError(Exception):
    """Raise from an agent to say "not now": the router tries another candidate."""


# Failures where another agent (or a later try) may well succeed.
_TRANSIENT = (TimeoutError, ConnectionError, AgentBusyError)


@dataclass(slots=True)
class Hop:
    """The routed call the current code runs inside, for nested calls to inherit from."""

    meta: MetaInfo
    agent_id: str


_current: ContextVar[Hop | None] = ContextVar("agent_reach_hop", default=None)


def current_hop() -> Hop | None:
    """The routed call the running code is inside (set while an agent is invoked)."""
    return _current.get()


def enter_hop(hop: Hop) -> Token[Hop | None]:
    """Mark the running code as inside `hop`; undo with `leave_hop` in the same context."""
    return _current.set(hop)


def leave_hop(token: Token[Hop | None]) -> None:
    _current.reset(token)


_reach: ContextVar[MetaInfo | None] = ContextVar("agent_reach_task", default=None)


def current_reach() -> MetaInfo | None:
    """The task being dispatched or served right now, for log records and hops."""
    hop = _current.get()
    return hop.meta if hop is not None else _reach.get()


def set_current_reach(meta: MetaInfo) -> Token[MetaInfo | None]:
    return _reach.set(meta)


def reset_current_reach(token: Token[MetaInfo | None]) -> None:
    _reach.reset(token)


def error_result(
    message: ReachMessage,
    status: ResultStatus,
    error_type: str,
    error: str,
    *,
    agent_id: str | None = None,
    retryable: bool = False,
) -> ReachResult:
    return build_trusted(
        ReachResult,
        {
            "status": status,
            "task_id": message.meta_info.task_id,
            "agent_id": agent_id,
            "error_type": error_type,
            "error": error,
            "retryable": retryable,
            "timings": ZERO_TIMINGS,
        },
    )


def _from_exception(message: ReachMessage, agent_id: str, exc: Exception) -> ReachResult:
    if isinstance(exc, InvalidMessageError):
        return error_result(message, ResultStatus.INVALID, type(exc).__name__, str(exc), agent_id=agent_id)
    retryable = isinstance(exc, _TRANSIENT) or bool(getattr(exc, "retryable", False))
    if isinstance(exc, NotJsonSafeError):
        retryable = False
    return error_result(
        message,
        ResultStatus.ERROR,
        type(exc).__name__,
        str(exc) or repr(exc),
        agent_id=agent_id,
        retryable=retryable,
    )


def input_problem(slot: Slot, message: ReachMessage) -> str | None:
    """What is wrong with the payload for this slot's input schema, or None.

    No payload means no arguments for a capability that takes an object, so it becomes ``{}``.
    """
    if message.raw_payload is None and slot.object_input:
        amend(message, {"raw_payload": {}})
    validator = slot.input_validator
    if validator is None or validator.is_valid(message.raw_payload):
        return None
    problem = first_error(validator, message.raw_payload)
    return (
        f"payload does not match the input schema of {slot.capability.name!r} at {slot.agent_id}: {problem}"
    )


async def deliver(
    slot: Slot, message: ReachMessage, deadline: float, *, recheck: bool = False
) -> tuple[ReachResult, float]:
    """Invoke the slot's agent once; return its result and the time it took, in milliseconds.

    Never raises except on cancellation of the caller: an agent that raises, hangs past the
    deadline or returns garbage yields an error result, so one bad agent cannot break routing.
    ``recheck`` is for deliveries started later than their selection (broadcast tasks): capacity
    and the breaker are checked again, in the same step that takes the slot.
    """
    runtime = slot.runtime
    agent_id = runtime.agent_id
    if recheck:
        busy = runtime.breaker.blocks(time.monotonic()) or slot.saturation()
        if busy is not None:
            return error_result(
                message, ResultStatus.REJECTED, "AgentBusyError", busy, agent_id=agent_id
            ), 0.0
    budget = min(slot.capability.timeout_ms / 1000.0, deadline - time.time())
    if budget <= 0:
        return error_result(
            message,
            ResultStatus.TIMEOUT,
            "ReachTimeoutError",
            "deadline passed before delivery",
            agent_id=agent_id,
        ), 0.0
    cap = slot.capability
    # Most capabilities take any object and most calls carry one: skip the check call then.
    problem = (
        input_problem(slot, message)
        if slot.input_validator is not None or (message.raw_payload is None and slot.object_input)
        else None
    )
    if problem is not None:
        return error_result(
            message, ResultStatus.INVALID, "PayloadValidationError", problem, agent_id=agent_id
        ), 0.0
    task = asyncio.current_task()
    assert task is not None
    watch = watchdog(task.get_loop())
    cancelling = task.cancelling()
    slot.in_flight += 1
    runtime.in_flight += 1
    runtime.breaker.on_start()
    token = _current.set(Hop(message.meta_info, agent_id))
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
                agent_id=agent_id,
            )
    except TimeoutError:
        result = error_result(
            message,
            ResultStatus.TIMEOUT,
            "ReachTimeoutError",
            f"agent {agent_id} did not answer within {budget * 1000:.0f} ms",
            agent_id=agent_id,
            retryable=True,
        )
    except asyncio.CancelledError:
        # The caller gave up: no outcome to count, but a half-open probe slot must not stay taken.
        runtime.breaker.probing = False
        raise
    except Exception as exc:  # noqa: BLE001 - any agent failure becomes a result
        result = _from_exception(message, agent_id, exc)
    finally:
        elapsed_ms = (time.perf_counter() - start) * 1000.0
        slot.in_flight -= 1
        runtime.in_flight -= 1
        _current.reset(token)
        if slot.waitlist:
            slot.waitlist.wake_one()
    status = result.status
    output_validator = slot.output_validator
    if (
        status is ResultStatus.OK
        and output_validator is not None
        and not output_validator.is_valid(result.payload)
    ):
        problem = first_error(output_validator, result.payload)
        error = f"output of {cap.name!r} does not match its output schema: {problem}"
        # Counted as the agent's failure and retryable: another replica may answer correctly.
        result = error_result(
            message, ResultStatus.ERROR, "OutputValidationError", error, agent_id=agent_id, retryable=True
        )
        status = ResultStatus.ERROR
    if (
        status is ResultStatus.OK
        or status is ResultStatus.TIMEOUT
        or (status is ResultStatus.ERROR and result.error_type != "AgentBusyError")
    ):
        # Invalid input and rejections are the caller's doing, and a busy agent is protecting
        # itself: none of them count against health.
        if runtime.record(status is ResultStatus.OK, elapsed_ms):
            logger.warning(
                "agent %s quarantined after %s (%s failures in a row)",
                agent_id,
                result.error_type,
                runtime.breaker.consecutive,
            )
    else:
        runtime.breaker.probing = False
    if status is not ResultStatus.OK and logger.isEnabledFor(logging.DEBUG):
        logger.debug(
            "task %s: agent %s ended %s: %s: %s",
            message.meta_info.task_id,
            agent_id,
            status,
            result.error_type,
            result.error,
        )
    return result, elapsed_ms
