"""What happens after each reach: the structured decision log and registered observers."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Literal, Protocol, runtime_checkable

from middleware import Fault, ReachResult, ResultStatus
from reach_adapters.router.decisions import DecisionRecord

__all__ = ["DECISION_LOGGER", "Access", "ReachObserver", "decision_type", "log_decision"]

DECISION_LOGGER = logging.getLogger("reach_adapters.decisions")


@runtime_checkable
class ReachObserver(Protocol):
    """Told about every finished reach, on the router's loop; must not block or raise.

    Metrics exporters implement this (see `reach_adapters.observability`). One that also has
    ``on_access(access)`` is told of each `Access` (`Router.note_access`).
    """

    def on_reach(self, record: DecisionRecord, result: ReachResult) -> None: ...


@dataclass(frozen=True, slots=True)
class Access:
    """A request served beside routing for a caller: a client of the router's MCP server reading
    an upstream server's resource, getting a prompt or a completion. No decision record: it is
    not routed, but it reaches an agent, so the audit log and metrics hear of it."""

    request: str
    """The MCP method: ``resources/read``, ``prompts/get`` or ``completion/complete``."""
    target: str
    """The resource's URI, the prompt's name, or the prompt or template completed."""
    principal: str | None
    agent_id: str | None
    """The agent that answered; None when none did."""
    status: Literal["ok", "error", "rejected"]
    """``rejected``: the guard refused it (permission, quota); ``error``: no answer, or the
    server's own error."""
    fault: Fault | None
    """Whose doing a failure was (DESIGN §6): ``caller`` for a refusal, a request that was wrong
    (an unknown URI, bad arguments: invalid params, whoever said so) or withdrawn; ``agent`` for
    a server that could not be asked or answered with another error; ``router`` for a bug here."""
    created_at: float
    duration_ms: float


def decision_type(record: DecisionRecord) -> str:
    """``fell back``, ``filtered`` (nothing could serve), ``voted`` (a consensus), ``retried``,
    ``matched`` (the capability was found from the task text) or ``selected``."""
    if record.path in ("fallback", "default"):
        return "fell back"
    if not record.attempts:
        return "filtered"
    if record.mode == "consensus":
        return "voted"
    candidate_attempts = sum(1 for attempt in record.attempts if attempt.path == "candidate")
    if candidate_attempts > 1 and record.mode != "broadcast":
        return "retried"
    return "matched" if record.matches else "selected"


def log_decision(record: DecisionRecord, result: ReachResult) -> None:
    """One INFO record per reach on ``reach_adapters.decisions``, fields in ``extra``.

    A JSON formatter (the CLI's ``--log-json``) prints them as one object per line.
    """
    chosen = record.chosen
    score = next((c.score for c in record.candidates if c.agent_id == chosen), None)
    if result.status is ResultStatus.OK:
        reason = record.note or ("best score" if record.candidates else record.path)
    else:
        reason = f"{result.error_type}: {result.error}"
    kind = decision_type(record)
    DECISION_LOGGER.info(
        "task %s %s %s -> %s (%s)",
        record.task_id,
        kind,
        record.capability,
        result.agent_id,
        result.status,
        extra={
            "task_id": record.task_id,
            "trace_id": record.trace_id,
            "principal": record.principal,
            "agent_id": result.agent_id,
            "capability": record.capability,
            "decision_type": kind,
            "status": str(result.status),
            "score": score,
            "attempts": len(record.attempts),
            "path": record.path,
            "reason": reason,
        },
    )
