"""Feedback on a finished task: a score for the agents that served it, which moves their rating."""

from __future__ import annotations

import logging
import math
from collections.abc import Callable

from pydantic import BaseModel, ConfigDict

from middleware import ResultStatus
from reach_adapters.errors import InvalidFeedbackError, TaskAlreadyRatedError, UnknownAgentError
from reach_adapters.router.decisions import DecisionRecord
from reach_adapters.router.ratings import Ratings
from reach_adapters.security import redact_text

__all__ = ["MAX_REASON", "Feedback", "RatingChange", "check_score", "give_feedback"]

logger = logging.getLogger(__name__)

MAX_REASON = 1000


class RatingChange(BaseModel):
    """How one agent's rating for the task's capability moved."""

    model_config = ConfigDict(frozen=True)

    agent_id: str
    before: float
    after: float


class Feedback(BaseModel):
    """What `Router.feedback` did: the task's capability, the score, each rated agent's rating."""

    model_config = ConfigDict(frozen=True)

    task_id: str
    capability: str
    score: float
    reason: str | None
    rated: list[RatingChange]


def check_score(score: object, reason: object) -> tuple[float, str | None]:
    """The score as a float in [0, 1] and the reason, or `InvalidFeedbackError` saying what to send."""
    if isinstance(score, bool) or not isinstance(score, int | float) or not math.isfinite(score):
        msg = f"feedback score must be a number from 0 (bad) to 1 (good), got {score!r}"
        raise InvalidFeedbackError(msg)
    if not 0.0 <= score <= 1.0:
        msg = f"feedback score {score!r} is outside 0..1: send a number from 0 (bad) to 1 (good)"
        raise InvalidFeedbackError(msg)
    if reason is not None and (not isinstance(reason, str) or len(reason) > MAX_REASON):
        msg = f"feedback reason must be a text of at most {MAX_REASON} characters"
        raise InvalidFeedbackError(msg)
    return float(score), reason


def give_feedback(
    record: DecisionRecord,
    score: float,
    reason: str | None,
    ratings: Ratings,
    registered: Callable[[str], bool],
) -> Feedback:
    """Rate the agents that served `record`'s task: the one that answered, or every voter that
    agreed with a consensus decision; those no longer `registered` are passed over."""
    task_id = record.task_id
    if record.steps:
        # The chain agent only passed its steps' answers on: rating it would change no routing.
        msg = (
            f"task {task_id!r} is a chain's: its steps' agents did the work, so rate the steps' tasks "
            f"instead: {record.steps}"
        )
        raise InvalidFeedbackError(msg)
    if record.status != ResultStatus.OK:
        msg = (
            f"task {task_id!r} ended {record.status}, so no agent's answer was taken and there is no "
            "agent to rate; rate tasks that ended ok"
        )
        raise InvalidFeedbackError(msg)
    if record.votes:
        served = [vote["agent_id"] for vote in record.votes if vote["agreed"]]
    else:
        served = [record.chosen] if record.chosen is not None else []
    if not served or record.capability is None:
        why = (
            "a broadcast's answer is every target's, no one agent's"
            if record.mode == "broadcast"
            else "no one agent's answer was taken"
        )
        msg = f"task {task_id!r} ended ok, but {why}, so there is no agent to rate; rate a routed task"
        raise InvalidFeedbackError(msg)
    gone = [agent_id for agent_id in served if not registered(agent_id)]
    if gone and len(gone) == len(served):
        msg = f"agent {gone[0]} that served task {task_id!r} is no longer registered; there is no one to rate"
        raise UnknownAgentError(msg)
    if not ratings.first_feedback(task_id):
        msg = f"task {task_id!r} was given feedback already; each task takes one"
        raise TaskAlreadyRatedError(msg)
    capability = record.capability
    changes = []
    for agent_id in served:
        if agent_id in gone:
            continue
        before, after = ratings.rate(agent_id, capability, score)
        changes.append(RatingChange(agent_id=agent_id, before=round(before, 4), after=round(after, 4)))
    if logger.isEnabledFor(logging.INFO):
        why = "" if reason is None else f": {redact_text(reason)}"
        logger.info("feedback %.2f on task %s (%s) for %s%s", score, task_id, capability, served, why)
    return Feedback(task_id=task_id, capability=capability, score=score, reason=reason, rated=changes)
