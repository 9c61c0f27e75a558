"""Undoing what succeeded (a saga's compensation): each compensable reach is undone by a reach of
its capability's `compensate_with`, newest first, retried on transient failures.

The agent that did the work is asked first when it declares the compensating capability (it holds
the state to undo); otherwise, or when it cannot answer, the compensating capability is routed
like any call. What could not be undone is said, never hidden: the caller must know.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import Sequence
from typing import Any, Literal, Protocol, Unpack

from pydantic import JsonValue

from middleware import Fault, ReachResult, ResultStatus
from reach_adapters.router.chains.journal import Done
from reach_adapters.router.options import CallOptions
from reach_adapters.router.policy import RoutingPolicy
from reach_adapters.router.retry import backoff_s

__all__ = ["Outcome", "SagaHost", "compensate", "derived_id"]

logger = logging.getLogger(__name__)

Outcome = Literal["compensated", "incomplete", "already_compensated", "nothing_to_compensate"]
_MAX_TASK_ID = 128


class SagaHost(Protocol):
    """What compensation needs of the router."""

    policy: RoutingPolicy

    async def route(
        self, capability: str | None, payload: Any = None, **options: Unpack[CallOptions]
    ) -> ReachResult: ...

    async def send(
        self,
        agent_id: str,
        payload: Any = None,
        *,
        capability: str | None = None,
        **options: Unpack[CallOptions],
    ) -> ReachResult: ...

    def _serves(self, agent_id: str, capability: str) -> bool: ...


def _transient(result: ReachResult) -> bool:
    """Whether a failed undo may succeed if tried again: no agent had room, or one failed in a
    way that passes (a timeout, a dropped connection); never an answered no or a caller's mistake."""
    return result.fault is Fault.ROUTER or (result.fault is Fault.AGENT and result.retryable)


def derived_id(base: str, suffix: str) -> str:
    """``base/suffix``, a task id of its own for work done for task `base`: a step, an undo. A
    base too long for that is shortened to a digest, keeping ids within the 128 characters allowed."""
    derived = f"{base}/{suffix}"
    if len(derived) <= _MAX_TASK_ID:
        return derived
    digest = hashlib.sha256(base.encode()).hexdigest()[: _MAX_TASK_ID - len(suffix) - 1]
    return f"{digest}/{suffix}"


async def compensate(
    host: SagaHost, done: Sequence[Done], principal: str | None, trace_id: str
) -> dict[str, JsonValue]:
    """Undo `done` (in the order they finished) newest first; what was undone, what could not be,
    and what had been undone before (left alone: compensating twice does nothing)."""
    undone: list[JsonValue] = []
    failed: list[JsonValue] = []
    before: list[JsonValue] = []
    for entry in reversed(done):
        if entry.undone is not None and entry.undone.get("status") in ("undone", "undoing"):
            before.append(entry.undone)
            continue
        entry.undone = {"status": "undoing"}
        outcome = await _undo(host, entry, principal, trace_id)
        entry.undone = outcome
        (undone if outcome["status"] == "undone" else failed).append(outcome)
    status: Outcome
    if failed:
        status = "incomplete"
    elif undone:
        status = "compensated"
    else:
        status = "already_compensated" if before else "nothing_to_compensate"
    return {"status": status, "undone": undone, "not_undone": failed, "already_undone": before}


async def _undo(host: SagaHost, entry: Done, principal: str | None, trace_id: str) -> dict[str, JsonValue]:
    policy = host.policy
    tries = policy.max_retries + 1
    tried: list[JsonValue] = []
    result: ReachResult | None = None
    for attempt in range(1, tries + 1):
        if attempt > 1:
            await asyncio.sleep(
                backoff_s(attempt - 1, policy.backoff_ms, policy.backoff_multiplier, policy.jitter_ms)
            )
        # A task id per try, over every round of `Router.compensate`: a repeated id would be
        # answered from the idempotency window with an earlier try's failure.
        entry.tries += 1
        task_id = derived_id(entry.task_id, "undo" if entry.tries == 1 else f"undo-{entry.tries}")
        tried.append(task_id)
        options: CallOptions = {"task_id": task_id, "trace_id": trace_id, "principal": principal}
        worker = entry.agent_id
        if attempt == 1 and host._serves(worker, entry.compensate_with):
            result = await host.send(worker, entry.payload(), capability=entry.compensate_with, **options)
        else:
            result = await host.route(entry.compensate_with, entry.payload(), **options)
        if result.status is ResultStatus.OK or not _transient(result):
            break
    assert result is not None, "at least one try is made"
    outcome: dict[str, JsonValue] = {
        "task_id": entry.task_id,
        "capability": entry.capability,
        "compensate_with": entry.compensate_with,
        "status": "undone" if result.status is ResultStatus.OK else "failed",
        "agent_id": result.agent_id,
        "attempts": tried,
    }
    if result.status is ResultStatus.OK:
        logger.info("task %s (%s) undone by %s", entry.task_id, entry.capability, result.agent_id)
    else:
        outcome.update(
            error_type=result.error_type,
            error=result.error,
            fault=None if result.fault is None else result.fault.value,
        )
        logger.warning(
            "task %s (%s) could not be undone with %s: %s: %s",
            entry.task_id,
            entry.capability,
            entry.compensate_with,
            result.error_type,
            result.error,
        )
    return outcome
