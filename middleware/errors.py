"""The errors a failed `ReachResult` stands for, which `ReachResult.raise_for_status` raises.

They live beside the format, not in `reach_adapters.errors`, because the result model raises them
and the format imports nothing of the library; `reach_adapters.errors` re-exports them with the
library's other errors, which is where callers import them from.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pydantic import JsonValue

    from middleware.models import ReachResult

__all__ = [
    "AgentCallError",
    "IdempotencyConflictError",
    "InputRequiredError",
    "InvalidMessageError",
    "LoopDetectedError",
    "NoCandidateError",
    "NoConsensusError",
    "PayloadValidationError",
    "PermissionDeniedError",
    "QuotaExceededError",
    "ReachError",
    "ReachTimeoutError",
    "UnknownAgentError",
    "error_for",
]


class ReachError(Exception):
    """Base class of every error raised by Agent Reach."""

    # The failed result the error was raised for (`error_for`), so whoever catches it keeps the
    # status and fault the router decided instead of guessing them again from the type.
    result: ReachResult | None = None


class UnknownAgentError(ReachError):
    """No agent is registered under that id."""


class NoCandidateError(ReachError):
    """No registered agent can serve the request."""


class InvalidMessageError(ReachError):
    """A message or its payload is malformed.

    ``fix_options``: the call options that make the call valid, with placeholder values, when the
    mistake is one left out or given wrong (``{"configurable": {"thread_id": "<thread id>"}}``).
    The text says it as a Python caller writes it; the failed result keeps them in
    ``extra["fix_options"]``, for each surface to say how its own callers give them (an MCP
    request's ``_meta``).
    """

    fix_options: dict[str, JsonValue] | None = None
    # Whether the router refused the arguments of a call made to it (`router.route(...)`): raised
    # inside an agent serving a task, the mistake is that agent's, not the task's caller's.
    call_arguments: bool = False

    def __init__(self, *args: object, fix_options: dict[str, JsonValue] | None = None) -> None:
        super().__init__(*args)
        if fix_options is not None:
            self.fix_options = fix_options


class PayloadValidationError(InvalidMessageError):
    """A payload does not match the capability's input schema."""


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


class PermissionDeniedError(ReachError):
    """The caller may not reach that capability or agent (security.yaml), or is not known there."""


class QuotaExceededError(ReachError):
    """The caller used up its quota; ``result.extra["retry_after_s"]`` says when to try again."""


class NoConsensusError(ReachError):
    """A consensus reach ended without enough agreeing answers; ``result.extra["votes"]`` has
    the answers that came."""


_BY_STATUS: dict[str, type[ReachError]] = {
    "timeout": ReachTimeoutError,
    "no_candidate": NoCandidateError,
    "invalid": InvalidMessageError,
    "input_required": InputRequiredError,
    "no_consensus": NoConsensusError,
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
        PermissionDeniedError,
        QuotaExceededError,
    )
}


def error_for(result: ReachResult) -> ReachError:
    """The `ReachError` subclass a failed `result` stands for, saying what happened: its error type
    when the router named one of these errors, else its status (`AgentCallError` for an error)."""
    cls = _BY_NAME.get(result.error_type or "") or _BY_STATUS.get(result.status, AgentCallError)
    who = f" from agent {result.agent_id}" if result.agent_id else ""
    error = cls(f"task {result.task_id} ended {result.status}{who}: {result.error_type}: {result.error}")
    error.result = result
    return error
