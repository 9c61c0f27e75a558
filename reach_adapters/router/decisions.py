"""Decision records: why a task went where it went, kept for `Router.explain`."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from middleware import Fault, ReachResult, ResultStatus
from reach_adapters.errors import UnknownTaskError
from reach_adapters.security import redact_text

__all__ = ["Attempt", "DecisionLog", "DecisionRecord", "Exclusion", "ExclusionKind", "Scored"]


@dataclass(slots=True)
class Scored:
    """A candidate with its score and the parts the score is made of."""

    agent_id: str
    score: float
    breakdown: dict[str, float]


class ExclusionKind(StrEnum):
    """Why an agent did not take a task, as selection and fallback tell the cases apart; the
    `Exclusion.reason` beside it says the same in words, with the figures."""

    STATE = "state"
    # BUSY, and the task's priority is below `policy.high_priority`.
    PRIORITY = "priority"
    LOOP = "loop"
    TRIGGERS = "triggers"
    CIRCUIT = "circuit"
    SATURATED = "saturated"
    # Not an exclusion: quarantined agents serving anyway, being the last candidates.
    LAST_CANDIDATE = "last_candidate"
    UNREGISTERED = "unregistered"
    UNDECLARED = "undeclared"
    DEADLINE = "deadline"
    # The caller's principal may not reach this agent (security.yaml).
    FORBIDDEN = "forbidden"
    # The call asks for chunks in a `stream_mode` (or `subgraphs`), and the agent does not stream.
    UNSTREAMED = "unstreamed"


@dataclass(slots=True)
class Exclusion:
    agent_id: str
    reason: str
    kind: ExclusionKind


@dataclass(slots=True)
class Attempt:
    """One delivery to one agent."""

    agent_id: str
    status: ResultStatus
    elapsed_ms: float
    path: str = "candidate"
    error_type: str | None = None
    error: str | None = None
    fault: Fault | None = None
    delivered: bool = False


@dataclass(slots=True)
class DecisionRecord:
    task_id: str
    trace_id: str
    capability: str | None
    mode: str
    strategy: str
    created_at: float
    candidates: list[Scored] = field(default_factory=list)
    exclusions: list[Exclusion] = field(default_factory=list)
    attempts: list[Attempt] = field(default_factory=list)
    # Fields most calls leave empty start as the one empty tuple and are replaced when filled: the
    # log keeps 10,000 records, and every container in them is one more object each of Python's
    # full garbage collections scans (in a busy router, every second or two).
    matches: Sequence[tuple[str, float]] = ()
    best_matches: Sequence[tuple[str, float]] = ()
    target: str | None = None
    chosen: str | None = None
    path: str = "none"
    status: str = "pending"
    note: str | None = None
    principal: str | None = None
    # Set when the candidates were too many to screen them all (`RoutingPolicy.sample_above`):
    # how many there were; `candidates` and `exclusions` then hold only those drawn at random.
    sampled_from: int | None = None
    # Kept only with `RoutingPolicy.record_payloads`: records are read by more people than results.
    payload: Any = None
    result_payload: Any = None
    # A chain's: the task ids of its steps' reaches, and what was undone (or could not be) for
    # this task, by the chain's failure or `Router.compensate`. Shown only when not empty.
    steps: Sequence[str] = ()
    compensations: Sequence[dict[str, Any]] = ()
    # Consensus: each voter's vote (agent_id, status, agreed, error; payload with record_payloads).
    votes: Sequence[dict[str, Any]] = ()
    # Set when the call waited in the deferred queue (``defer=True``): for how long, in all.
    deferred_ms: float | None = None

    def add_attempt(
        self, agent_id: str, result: ReachResult, elapsed_ms: float, path: str = "candidate"
    ) -> None:
        self.attempts.append(
            Attempt(
                agent_id,
                result.status,
                elapsed_ms,
                path,
                result.error_type,
                result.error,
                result.fault,
                result.delivered,
            )
        )

    @property
    def delivered(self) -> bool:
        """Whether any attempt reached an agent (a failed task may then have done its work)."""
        return any(attempt.delivered for attempt in self.attempts)

    def to_dict(self) -> dict[str, Any]:
        """The record for people and callers, its free text (errors, reasons, note) with secrets
        masked: masking at record time would cost every failed call, read or not."""
        out = asdict(self)
        for attempt in out["attempts"]:
            if attempt["error"] is not None:
                attempt["error"] = redact_text(attempt["error"])
        for exclusion in out["exclusions"]:
            exclusion["reason"] = redact_text(exclusion["reason"])
        if out["note"] is not None:
            out["note"] = redact_text(out["note"])
        # Fields of one mode only (chains, consensus): shown when the mode filled them.
        for name in ("steps", "compensations", "votes"):
            if not out[name]:
                del out[name]
        for vote in out.get("votes", ()):
            if vote.get("error") is not None:
                vote["error"] = redact_text(vote["error"])
        if out["deferred_ms"] is None:
            del out["deferred_ms"]
        return out

    def why_not(self, agent_id: str) -> str:
        """Answer "why did this task not go to agent X?" in one sentence, secrets masked."""
        return redact_text(self._why_not(agent_id))

    def _why_not(self, agent_id: str) -> str:
        if agent_id == self.chosen:
            return f"{agent_id} was chosen"
        if self.mode == "directed" and agent_id != self.target:
            return f"{agent_id} was not considered: the call was directed to {self.target}"
        for exclusion in self.exclusions:
            if exclusion.agent_id == agent_id:
                return f"{agent_id} was excluded: {exclusion.reason}"
        for vote in self.votes:
            if vote["agent_id"] == agent_id and vote["status"] == ResultStatus.OK:
                side = "agreed with the decision" if vote["agreed"] else "dissented, or nothing was decided"
                return f"{agent_id} was asked for its vote and answered; it {side}"
        for attempt in self.attempts:
            if attempt.agent_id == agent_id:
                return _attempted(attempt, self.mode)
        for rank, scored in enumerate(self.candidates):
            if scored.agent_id == agent_id:
                return self._ranked(rank, scored)
        if self.sampled_from is not None:
            return (
                f"{agent_id} was not drawn: the task had {self.sampled_from} candidates, too many to "
                f"screen them all (RoutingPolicy.sample_above), and the router scored the "
                f"{len(self.candidates)} usable ones it drew at random; an agent not declaring "
                f"{self.capability!r} in scope is never drawn"
            )
        if self.capability is None:
            best = ", ".join(f"{name} {score:.2f}" for name, score in self.best_matches)
            return (
                f"{agent_id} was not a candidate: the task named no capability and its text matched "
                f"none well enough (best: {best or 'none'})"
            )
        return f"{agent_id} was not a candidate: it does not declare {self.capability!r} in scope"

    def _ranked(self, rank: int, scored: Scored) -> str:
        first = self.candidates[0]
        served = next((a.agent_id for a in self.attempts if a.status is ResultStatus.OK), None)
        who = f", and {served} served it" if served else ""
        if self.strategy == "rating":
            # Smooth weighted round robin: turns, not a contest of scores.
            return (
                f"{scored.agent_id} was ranked {rank + 1}: the rating strategy gives agents turns in "
                f"proportion to their recent success rate times their rating from feedback, and this "
                f"one was {first.agent_id}'s{who}"
            )
        if scored.score == first.score:
            return (
                f"{scored.agent_id} tied with {first.agent_id} at {scored.score:.3f}; ties are broken "
                f"at random and it was ranked {rank + 1}{who}"
            )
        if self.strategy == "least_wait":
            return (
                f"{scored.agent_id} had a longer expected wait ({-scored.score:.1f} ms) than "
                f"{first.agent_id} ({-first.score:.1f} ms){who}"
            )
        return (
            f"{scored.agent_id} scored {scored.score:.3f} {scored.breakdown}, below {first.agent_id} "
            f"at {first.score:.3f} {first.breakdown}{who}"
        )


def _attempted(attempt: Attempt, mode: str) -> str:
    tried = {"broadcast": "received the broadcast", "consensus": "was asked for its vote"}.get(
        mode, "was tried"
    )
    if attempt.status is ResultStatus.OK:
        return f"{attempt.agent_id} {tried} and answered ok"
    fault = f" ({attempt.fault} fault)" if attempt.fault else ""
    return (
        f"{attempt.agent_id} {tried} and ended {attempt.status}{fault}: {attempt.error_type}: {attempt.error}"
    )


class DecisionLog:
    """The most recent decision records; the oldest are dropped past `size`."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._records: OrderedDict[str, DecisionRecord] = OrderedDict()

    def __len__(self) -> int:
        return len(self._records)

    def resize(self, size: int) -> None:
        self._size = size
        while len(self._records) > size:
            self._records.popitem(last=False)

    def add(self, record: DecisionRecord) -> None:
        records = self._records
        records[record.task_id] = record
        if len(records) > self._size:
            records.popitem(last=False)

    def recent(
        self, limit: int, capability: str | None = None, principal: str | None = None
    ) -> list[DecisionRecord]:
        """The latest records, newest first, optionally for one capability or one principal's."""
        out: list[DecisionRecord] = []
        for record in reversed(self._records.values()):
            if (capability is None or record.capability == capability) and (
                principal is None or record.principal == principal
            ):
                out.append(record)
                if len(out) >= limit:
                    break
        return out

    def find(self, task_id: str) -> DecisionRecord | None:
        return self._records.get(task_id)

    def get(self, task_id: str) -> DecisionRecord:
        record = self._records.get(task_id)
        if record is None:
            msg = (
                f"no decision record for task {task_id!r}: the task is unknown, still streaming (a "
                f"stream's record is kept when it ends), or older than the last {self._size} kept "
                "(RoutingPolicy.decision_log_size)"
            )
            raise UnknownTaskError(msg)
        return record
