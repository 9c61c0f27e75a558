"""The record every reach leaves, unary or streamed: its decision record, the result's timings
and path, the decision log line and the observers."""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from middleware import ReachMessage, ReachResult, Timings
from middleware.fast import amend, build_trusted
from reach_adapters.router.decisions import DecisionLog, DecisionRecord
from reach_adapters.router.faults import ANSWERED
from reach_adapters.router.observe import DECISION_LOGGER, ReachObserver, log_decision
from reach_adapters.router.strategies import Strategy

__all__ = ["new_record", "record_outcome", "settle"]

logger = logging.getLogger(__name__)


def new_record(message: ReachMessage, strategy: Strategy | None) -> DecisionRecord:
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
    if meta.principal is not None:
        record.principal = meta.principal
    return record


def settle(
    message: ReachMessage,
    record: DecisionRecord,
    result: ReachResult,
    start: float,
    path: str,
    queued_ms: float,
    routed: float | None,
) -> None:
    """Fill in the result's ids, attempts, path and timings, and the record's outcome."""
    meta = message.meta_info
    end = time.perf_counter()
    attempts = record.attempts
    # Several agents served at once: no one attempt's agent or time stands for the task's.
    broadcast = message.routing_hint.mode in ("broadcast", "consensus")
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
    if result.status in ANSWERED and message.routing_hint.mode != "broadcast":
        # A consensus names the first voter of the decided answer.
        record.chosen = result.agent_id


def record_outcome(
    decisions: DecisionLog,
    observers: Sequence[ReachObserver],
    record: DecisionRecord,
    result: ReachResult,
    keep: bool,
) -> None:
    """Keep the record for `explain`, write the decision log line, tell the observers."""
    if keep:
        decisions.add(record)
    if DECISION_LOGGER.isEnabledFor(logging.INFO):
        log_decision(record, result)
    for observer in observers:
        try:
            observer.on_reach(record, result)
        except Exception:
            logger.exception("observer %r failed", observer)
