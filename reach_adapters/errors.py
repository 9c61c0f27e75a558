"""Every error Agent Reach raises is a `ReachError`; each subclass names one kind of mistake."""

from __future__ import annotations

from pydantic import ValidationError

from middleware import ReachResult

__all__ = [
    "AgentCallError",
    "DuplicateAgentError",
    "IdempotencyConflictError",
    "InputRequiredError",
    "InvalidDeclarationError",
    "InvalidMessageError",
    "InvalidPolicyError",
    "LoopDetectedError",
    "NoCandidateError",
    "PayloadValidationError",
    "ReachError",
    "ReachTimeoutError",
    "RouterClosedError",
    "SyncCallError",
    "UnknownAgentError",
    "UnknownTaskError",
    "describe_validation_error",
    "raise_for_status",
]


class ReachError(Exception):
    """Base class of every error raised by Agent Reach."""


class InvalidDeclarationError(ReachError):
    """An agent or capability declaration is malformed."""


class DuplicateAgentError(ReachError):
    """An agent id is already registered."""


class UnknownAgentError(ReachError):
    """No agent is registered under that id."""


class UnknownTaskError(ReachError):
    """No decision record is kept for that task id."""


class NoCandidateError(ReachError):
    """No registered agent can serve the request."""


class InvalidMessageError(ReachError):
    """A message or its payload is malformed."""


class PayloadValidationError(InvalidMessageError):
    """A payload does not match the capability's input schema."""


class InvalidPolicyError(ReachError):
    """A routing policy value is out of range or of the wrong type."""


class AgentCallError(ReachError):
    """The agent was reached but failed."""


class ReachTimeoutError(ReachError):
    """The task ran past its deadline."""


class LoopDetectedError(ReachError):
    """A recursive reach went too deep or came back to an agent type already in its chain."""


class InputRequiredError(ReachError):
    """The agent stopped to ask for input; call it again on the same thread with ``resume=``."""


class IdempotencyConflictError(ReachError):
    """A task id was reused for a different request within the idempotency window."""


class RouterClosedError(ReachError):
    """The router was closed; it takes no more calls or registrations."""


class SyncCallError(ReachError):
    """A blocking call was made from the event loop that must serve it."""


_BY_STATUS: dict[str, type[ReachError]] = {
    "timeout": ReachTimeoutError,
    "no_candidate": NoCandidateError,
    "invalid": InvalidMessageError,
    "input_required": InputRequiredError,
}
_BY_NAME: dict[str, type[ReachError]] = {
    cls.__name__: cls
    for cls in (
        UnknownAgentError,
        NoCandidateError,
        InvalidMessageError,
        PayloadValidationError,
        ReachTimeoutError,
        LoopDetectedError,
        IdempotencyConflictError,
    )
}


def raise_for_status(result: ReachResult) -> ReachResult:
    """Return `result` if it is ok, else raise the `ReachError` subclass that matches it."""
    if result.ok:
        return result
    cls = _BY_NAME.get(result.error_type or "") or _BY_STATUS.get(result.status, AgentCallError)
    who = f" from agent {result.agent_id}" if result.agent_id else ""
    msg = f"task {result.task_id} ended {result.status}{who}: {result.error_type}: {result.error}"
    raise cls(msg)


def describe_validation_error(exc: ValidationError) -> str:
    """One line per problem, each naming the field, e.g. ``field 'timeout_ms': ...``."""
    parts = []
    for err in exc.errors(include_url=False):
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        parts.append(f"field '{loc}': {err['msg']}")
    return "; ".join(parts)
