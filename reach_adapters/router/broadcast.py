"""Broadcast: deliver to every eligible candidate at once, then merge."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from middleware import Fault, MergePolicy, ReachMessage, ReachResult, ResultStatus
from middleware.fast import build_trusted
from reach_adapters.router.decisions import DecisionRecord
from reach_adapters.router.delivery import deliver
from reach_adapters.router.faults import ANSWERED
from reach_adapters.router.outcomes import ErrorKind, cut_short, error_result
from reach_adapters.router.policy import AGENT_ERRORS, AgentErrors
from reach_adapters.router.state import Slot

__all__ = ["fan_out"]


async def fan_out(
    slots: list[Slot],
    message: ReachMessage,
    deadline: float,
    merge: MergePolicy,
    record: DecisionRecord,
    errors: AgentErrors = AGENT_ERRORS,
) -> ReachResult:
    """Deliver to all `slots` concurrently; every target gets exactly one result in `results`.

    ``all`` waits for every target; ``first`` takes the first answer of any kind; ``first_success``
    the first ok answer. Targets still running when the merge is decided are cancelled and reported
    as cancelled, never dropped.
    """
    start = time.perf_counter()
    started: set[str] = set()

    async def attempt(slot: Slot) -> tuple[ReachResult, float]:
        started.add(slot.runtime.agent_id)
        return await deliver(slot, message, deadline, errors, recheck=True)

    tasks = {asyncio.create_task(attempt(slot)): slot for slot in slots}
    results: dict[str, ReachResult] = {}
    winner: ReachResult | None = None
    pending = set(tasks)
    try:
        while pending:
            done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
            for task in done:
                slot = tasks[task]
                result, elapsed_ms = task.result()
                result.agent_id = slot.runtime.agent_id
                results[slot.runtime.agent_id] = result
                record.add_attempt(slot.runtime.agent_id, result, elapsed_ms)
                if winner is None and (
                    merge == "first" or (merge == "first_success" and result.status in ANSWERED)
                ):
                    winner = result
            if winner is not None:
                break
    finally:
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
            # Decided, or its caller gave up: the targets stopped still had the task, and may have
            # done the work (a repeat of the task id must know).
            decided = winner is not None
            who = f"merge {merge!r} was decided first" if decided else "the caller cancelled it"
            elapsed_ms = (time.perf_counter() - start) * 1000.0
            for task in pending:
                agent_id = tasks[task].runtime.agent_id
                had = agent_id in started
                stopped = error_result(
                    message,
                    ResultStatus.CANCELLED,
                    ErrorKind.CANCELLED,
                    cut_short(who, agent_id) if had else f"{who} before agent {agent_id} had it",
                    fault=Fault.ROUTER if decided else Fault.CALLER,
                    agent_id=agent_id,
                    delivered=had,
                )
                results[agent_id] = stopped
                record.add_attempt(agent_id, stopped, elapsed_ms)
    ordered = [results[slot.runtime.agent_id] for slot in slots]
    return _merge(message, merge, ordered, winner)


def _merge(
    message: ReachMessage, merge: MergePolicy, results: list[ReachResult], winner: ReachResult | None
) -> ReachResult:
    task_id = message.meta_info.task_id
    if winner is not None:
        values: dict[str, Any] = {
            "status": winner.status,
            "payload": winner.payload,
            "agent_id": winner.agent_id,
            "error_type": winner.error_type,
            "error": winner.error,
            "fault": winner.fault,
        }
    elif merge == "all" and (ok := [r for r in results if r.status in ANSWERED]):
        # A target that asked for input answered too: its question is its payload.
        values = {
            "status": ResultStatus.OK if len(ok) == len(results) else ResultStatus.PARTIAL,
            "payload": {r.agent_id or "": r.payload for r in ok},
        }
    else:
        failures = "; ".join(f"{r.agent_id}: {r.status} {r.error_type}: {r.error}" for r in results)
        faults = [r.fault for r in results if r.fault is not None]
        status, kind = _alike(results)
        values = {
            "status": status,
            "error_type": kind,
            "error": f"no target of the broadcast succeeded ({failures})",
            # The agents' own failures first: they are what an operator has to look at.
            "fault": Fault.AGENT if Fault.AGENT in faults else (faults[0] if faults else None),
        }
    return build_trusted(ReachResult, {**values, "task_id": task_id, "results": results})


# Failures every target may share and the broadcast then says as one target would, with the
# error type told when the targets' differ. Others (a quota's, a vote's) promise details in
# `extra` that only each target's own result has.
_SHARED = {ResultStatus.TIMEOUT: ErrorKind.TIMEOUT, ResultStatus.INVALID: ErrorKind.INVALID_MESSAGE}


def _alike(results: list[ReachResult]) -> tuple[ResultStatus, str]:
    """The status and error type of a broadcast no target answered: those all targets failed
    with (all refused the payload, all timed out), else an error of the broadcast's own."""
    statuses = {r.status for r in results}
    status = statuses.pop() if len(statuses) == 1 else ResultStatus.ERROR
    fallback = _SHARED.get(status)
    if fallback is None:
        return ResultStatus.ERROR, ErrorKind.AGENT_CALL
    kinds = {r.error_type for r in results}
    kind = kinds.pop() if len(kinds) == 1 else None
    return status, kind or fallback
