"""Undoing what succeeded (a saga's compensation): each compensable reach is undone by a reach of
its capability's `compensate_with`, newest first.

The agent that did the work is asked first when it declares the compensating capability (it holds
the state to undo); otherwise, or when it cannot answer, the compensating capability is routed
like any call. What could not be undone is said, never hidden: the caller must know.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Any, Literal, Protocol, Unpack

from pydantic import JsonValue

from middleware import Fault, ReachResult, ResultStatus
from reach_adapters.router.chains.journal import Done
from reach_adapters.router.messages import derived_task_id
from reach_adapters.router.options import CallOptions
from reach_adapters.router.policy import RoutingPolicy
from reach_adapters.router.retry import backoff_s

__all__ = ["Outcome", "SagaHost", "compensate", "new_report", "undo_summary"]

logger = logging.getLogger(__name__)

Outcome = Literal["compensated", "incomplete", "already_compensated", "nothing_to_compensate", "undoing"]


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

    def _safe_to_repeat(self, agent_id: str | None, capability: str) -> bool: ...


def new_report() -> dict[str, JsonValue]:
    """A compensation report before anything is undone: `compensate` fills it in as it goes, so a
    caller that cannot wait for the end can say how far it got."""
    return {"status": "undoing", "undone": [], "not_undone": [], "already_undone": []}


def undo_summary(report: dict[str, JsonValue]) -> str:
    """A report in a sentence: what was undone, what could not be, what is still being undone."""

    def named(key: str) -> str:
        items = report.get(key)
        outcomes = items if isinstance(items, list) else []
        return ", ".join(str(item.get("capability")) for item in outcomes if isinstance(item, dict))

    status = report.get("status")
    if status == "nothing_to_compensate":
        return "nothing needed undoing"
    parts = [f"undone: {named('undone') or 'nothing'}"]
    if named("not_undone"):
        parts.append(f"NOT undone: {named('not_undone')} (see extra.compensation)")
    if status == "undoing":
        parts.append("the rest is still being undone (router.compensate(task_id) waits for it)")
    return "; ".join(parts)


async def compensate(
    host: SagaHost,
    done: Sequence[Done],
    principal: str | None,
    trace_id: str,
    report: dict[str, JsonValue] | None = None,
) -> dict[str, JsonValue]:
    """Undo `done` (in the order they finished) newest first; what was undone, what could not be,
    and what had been undone before (left alone: compensating twice does nothing).

    An entry another call is undoing right now is waited for, and its outcome reported as it
    ended: undone (``already_undone``) or not (``not_undone``), never guessed.
    """
    report = new_report() if report is None else report
    undone, failed, before = report["undone"], report["not_undone"], report["already_undone"]
    assert isinstance(undone, list), "a report from new_report()"
    assert isinstance(failed, list), "a report from new_report()"
    assert isinstance(before, list), "a report from new_report()"
    for entry in reversed(done):
        running = entry.undoing
        if running is not None and not running.done():
            outcome = await asyncio.shield(running)
            (before if outcome["status"] == "undone" else failed).append(outcome)
            continue
        if entry.undone is not None and entry.undone.get("status") == "undone":
            before.append(entry.undone)
            continue
        # A task of its own, so that a caller giving up leaves neither the undo half-made nor the
        # callers waiting for it without an answer.
        running = entry.undoing = asyncio.ensure_future(_undo(host, entry, principal, trace_id))
        outcome = await asyncio.shield(running)
        (undone if outcome["status"] == "undone" else failed).append(outcome)
    status: Outcome
    if failed:
        status = "incomplete"
    elif undone:
        status = "compensated"
    else:
        status = "already_compensated" if before else "nothing_to_compensate"
    report["status"] = status
    return report


def _again(host: SagaHost, entry: Done, result: ReachResult) -> bool:
    """Whether a failed undo is worth another reach of our own, over the router's own retries:
    when it never reached an agent (no agent had room), or when it failed in a way that passes
    and the compensating capability is safe to repeat. Never an answered no or a caller's mistake,
    and never an undo that may have been made already: refunding twice is worse than once."""
    if result.fault is Fault.ROUTER and not result.delivered:
        return True
    transient = result.fault is Fault.AGENT and result.retryable
    return transient and host._safe_to_repeat(result.agent_id, entry.compensate_with)


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
        task_id = derived_task_id(entry.task_id, "undo" if entry.tries == 1 else f"undo-{entry.tries}")
        tried.append(task_id)
        options: CallOptions = {"task_id": task_id, "trace_id": trace_id, "principal": principal}
        worker = entry.agent_id
        if attempt == 1 and host._serves(worker, entry.compensate_with):
            result = await host.send(worker, entry.payload(), capability=entry.compensate_with, **options)
        else:
            result = await host.route(entry.compensate_with, entry.payload(), **options)
        if result.status is ResultStatus.OK or not _again(host, entry, result):
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
    entry.undone = outcome
    return outcome
