"""One delivery of a message to one agent: admission, the agent's call in flight, its outcome."""

from __future__ import annotations

import asyncio
import time

from middleware import Fault, ReachMessage, ReachResult, ResultStatus
from middleware.fast import amended
from reach_adapters.router.compensation import compensate_later
from reach_adapters.router.inflight import InFlight
from reach_adapters.router.outcomes import (
    ErrorKind,
    account,
    checked_output,
    error_result,
    from_exception,
    returned,
    timed_out,
)
from reach_adapters.router.policy import AGENT_ERRORS, AgentErrors
from reach_adapters.router.state import Slot

__all__ = ["admit", "admit_safely", "deliver", "resumes"]


def _adapted(slot: Slot, message: ReachMessage) -> ReachMessage:
    """`message` as the slot's agent reads it, a copy when that changes it (the next candidate
    may read it otherwise): its payload through `Agent.adapt_payload` (a plain text for a chat
    agent), its capability under the agent's own name when the router renamed it."""
    own = slot.own_name
    if own is not None:
        meta = message.meta_info.model_copy(update={"capability": own})
        message = message.model_copy(update={"meta_info": meta})
    payload = slot.adapted(message.raw_payload)
    if payload is message.raw_payload:
        return message
    return message.model_copy(update={"raw_payload": payload})


def resumes(message: ReachMessage) -> bool:
    """Whether the message answers an agent that asked for input (``resume=``): its payload is
    not the task's input then, and is not checked against the input schema."""
    return "resume" in message.meta_info.__pydantic_fields_set__


def admit(
    slot: Slot, message: ReachMessage, budget_s: float, recheck: bool = False
) -> ReachMessage | ReachResult:
    """The message as the slot's agent gets it, or why it may not have it: no time left, a payload
    that breaks the input schema, or (``recheck``) no room or an open breaker by now."""
    runtime = slot.runtime
    if recheck:
        busy = runtime.breaker.blocks(time.monotonic()) or slot.saturation()
        if busy is not None:
            return error_result(
                message,
                ResultStatus.REJECTED,
                ErrorKind.AGENT_BUSY,
                busy,
                fault=Fault.ROUTER,
                agent_id=runtime.agent_id,
            )
    if budget_s <= 0:
        return error_result(
            message,
            ResultStatus.TIMEOUT,
            ErrorKind.TIMEOUT,
            "the deadline passed before delivery; the task was never delivered",
            fault=Fault.ROUTER,
            agent_id=runtime.agent_id,
        )
    if slot.adapt is not None or slot.own_name is not None:
        message = _adapted(slot, message)
    # Most capabilities take any payload and most calls carry one: skip the check call then.
    if (slot.checks_input or (message.raw_payload is None and slot.object_input)) and not resumes(message):
        if message.raw_payload is None and slot.object_input:
            # No payload means no arguments, for this delivery: a fallback may take none.
            message = amended(message, {"raw_payload": {}})
        if not slot.fits(message.raw_payload):
            text = slot.text_read(message.raw_payload)
            if text is None:
                return error_result(
                    message,
                    ResultStatus.INVALID,
                    ErrorKind.PAYLOAD_VALIDATION,
                    slot.input_problem(message.raw_payload) or "",
                    fault=Fault.CALLER,
                    agent_id=runtime.agent_id,
                )
            message = message.model_copy(update={"raw_payload": text})
    return message


def admit_safely(
    slot: Slot, message: ReachMessage, budget_s: float, errors: AgentErrors, recheck: bool = False
) -> ReachMessage | ReachResult:
    """`admit`, where an `adapt_payload` that raises is its agent's failure, told and counted as
    if `invoke` had raised it, the agent never having had the task."""
    try:
        return admit(slot, message, budget_s, recheck)
    except Exception as exc:  # noqa: BLE001 - any agent failure becomes a result
        failed = amended(from_exception(message, slot.runtime.agent_id, exc, errors), {"delivered": False})
        account(message, slot, failed, 0.0)
        return failed


async def deliver(
    slot: Slot,
    message: ReachMessage,
    deadline: float,
    errors: AgentErrors = AGENT_ERRORS,
    recheck: bool = False,
) -> tuple[ReachResult, float]:
    """Invoke the slot's agent once; return its result and the time it took, in milliseconds.

    Never raises except on cancellation of the caller: an agent that raises, hangs past the
    deadline or returns garbage yields an error result, so one bad agent cannot break routing.
    Every result says whose `Fault` a failure is, and whether the agent received the task;
    only the agent's own failures count against its health. `errors` names more exception types
    worth retrying elsewhere, and says whether callers read an exception's text. ``recheck`` is
    for deliveries started later than their selection (broadcast tasks): capacity and the
    breaker are checked again, in the same step that takes the slot.
    """
    budget = min(slot.capability.timeout_ms / 1000.0, deadline - time.time())
    admitted = admit_safely(slot, message, budget, errors, recheck)
    if isinstance(admitted, ReachResult):
        return admitted, 0.0
    message = admitted
    agent_id = slot.runtime.agent_id
    flight = InFlight(slot, message.meta_info)
    try:
        flight.enter(budget)
        try:
            result = returned(message, agent_id, await slot.runtime.agent.invoke(message))
        except asyncio.CancelledError:
            flight.cancelled()
            raise
        finally:
            flight.exit()
    except TimeoutError:
        result = timed_out(message, slot, budget, flight.on_caller())
    except asyncio.CancelledError as cancelled:
        flight.abandon()
        compensate_later(slot, message, cancelled)
        raise
    except Exception as exc:  # noqa: BLE001 - any agent failure becomes a result
        result = from_exception(message, agent_id, exc, errors)
    finally:
        elapsed_ms = flight.close()
    if slot.output_validator is not None:
        result = checked_output(message, slot, result)
    account(message, slot, result, flight.agent_ms(elapsed_ms))
    return result, elapsed_ms
