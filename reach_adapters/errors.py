"""Every error Agent Reach raises is a `ReachError`; each subclass names one kind of mistake.

Those a failed result stands for are defined with the format (`middleware.errors`), since
`ReachResult.raise_for_status` raises them; this module is where all of them are imported from.
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from middleware import ReachResult
from middleware.errors import (
    AgentCallError,
    IdempotencyConflictError,
    InputRequiredError,
    InvalidMessageError,
    LoopDetectedError,
    NoCandidateError,
    NoConsensusError,
    PayloadValidationError,
    PermissionDeniedError,
    QuotaExceededError,
    ReachError,
    ReachTimeoutError,
    UnknownAgentError,
)

__all__ = [
    "AgentCallError",
    "DuplicateAgentError",
    "IdempotencyConflictError",
    "InputRequiredError",
    "InvalidDeclarationError",
    "InvalidFeedbackError",
    "InvalidMessageError",
    "InvalidPolicyError",
    "LoopDetectedError",
    "NoCandidateError",
    "NoConsensusError",
    "PayloadValidationError",
    "PermissionDeniedError",
    "QuotaExceededError",
    "ReachError",
    "ReachTimeoutError",
    "RouterClosedError",
    "SyncCallError",
    "TaskAlreadyRatedError",
    "TaskFinishedError",
    "TaskQueueFullError",
    "TaskStoreUnavailableError",
    "UnknownAgentError",
    "UnknownTaskError",
    "describe_errors",
    "describe_validation_error",
    "raise_for_status",
]


class InvalidDeclarationError(ReachError):
    """An agent or capability declaration is malformed."""


class DuplicateAgentError(ReachError):
    """An agent id is already registered."""


class UnknownTaskError(ReachError):
    """No decision record or async task is kept for that task id (or not for this principal)."""


class TaskQueueFullError(ReachError):
    """The router's queue of async tasks is full; submit again after `retry_after_s` seconds."""

    def __init__(self, message: str, retry_after_s: float = 1.0) -> None:
        super().__init__(message)
        self.retry_after_s = retry_after_s


class TaskStoreUnavailableError(ReachError):
    """The shared store of async tasks (a cluster's Redis) is out of reach; try again later.

    A submit refused with it was either not kept at all or kept whole: submitting again with the
    same task id is safe, and answers the task if it was kept."""

    retry_after_s = 1.0


class TaskFinishedError(ReachError):
    """The async task has already finished, so it can no longer be cancelled."""


class InvalidPolicyError(ReachError):
    """A routing policy value is out of range or of the wrong type."""


class RouterClosedError(ReachError):
    """The router was closed; it takes no more calls or registrations."""


class SyncCallError(ReachError):
    """A blocking call was made from the event loop that must serve it."""


class InvalidFeedbackError(ReachError):
    """Feedback that cannot be taken: a score that is not a number from 0 to 1, or a task no
    agent served."""


class TaskAlreadyRatedError(InvalidFeedbackError):
    """The task was rated already; each task takes one feedback."""


# The function form of `ReachResult.raise_for_status`, kept for code written before the method.
raise_for_status = ReachResult.raise_for_status


def describe_validation_error(exc: ValidationError, *, limit: int | None = None) -> str:
    """One line per problem, each naming the field, e.g. ``field 'timeout_ms': ...``; the first
    `limit` problems only, when given (a union's refusal lists one per member)."""
    return describe_errors(exc.errors(include_url=False)[:limit])


def describe_errors(errors: Sequence[ErrorDetails]) -> str:
    """`describe_validation_error` for the problems of one that a check counts (not all may)."""
    parts = []
    for err in errors:
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        parts.append(f"field '{loc}': {err['msg']}")
    return "; ".join(parts)
