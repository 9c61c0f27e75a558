"""Runs that LangChain's own rules stopped, and whose doing that is (DESIGN §6).

A `create_agent` agent's middleware ends a run with an exception where it is told to: a call
limit spent (``exit_behavior="error"``), PII found with the ``block`` strategy; a model refuses
the request, or the input overflows its context. None of these is the agent failing: counted
against it, a caller sending an email address to an agent that blocks them, or spending its
conversation's call budget, would quarantine the agent for everyone. So each becomes the result
it stands for: the caller's mistake (``invalid``), a spent quota of the caller's thread
(``rejected``), or the task's (``error``, fault ``task``: not retried, since any replica would
stop it alike).

The exceptions are known by class name and module: ``langchain`` (which defines the middleware)
is not a dependency, and older ``langchain-core`` lacks the model errors.
"""

from __future__ import annotations

from typing import Any

import orjson

from middleware import Fault, ReachMessage, ReachResult, ResultStatus
from reach_adapters.errors import InvalidMessageError
from reach_adapters.langchain.config import thread_of
from reach_adapters.router import error_result

__all__ = ["stopped_by_rule"]

# The model declined, or the input does not fit it: the same request fails on any replica.
_TASK = frozenset({"ModelRefusalError", "ContextOverflowError"})
# Middleware's call limits, with whether a thread count at the limit has spent it (a model call
# limit is checked before the next call, a tool call limit counts the calls it blocks).
_LIMITS = {"ModelCallLimitExceededError": True, "ToolCallLimitExceededError": False}


def stopped_by_rule(exc: Exception, message: ReachMessage, agent_id: str, config: Any) -> ReachResult | None:
    """The result a run stopped by one of LangChain's rules stands for, None for any other
    failure (the agent's own). Raises `InvalidMessageError` when the rule refused the caller's
    input: PII the call itself carries."""
    names = {cls.__name__ for cls in type(exc).__mro__ if cls.__module__.startswith("langchain")}
    if names & _TASK:
        return _stopped(message, agent_id, exc, ResultStatus.ERROR, Fault.TASK)
    if type(exc).__name__ in _LIMITS and type(exc).__module__.startswith("langchain."):
        return _limited(exc, message, agent_id, config)
    if type(exc).__name__ == "PIIDetectionError" and type(exc).__module__.startswith("langchain."):
        return _blocked(exc, message, agent_id)
    return None


def _limited(exc: Exception, message: ReachMessage, agent_id: str, config: Any) -> ReachResult:
    """A spent thread limit is the caller's conversation's quota (``rejected``): every call on
    the thread meets it, one on a new thread does not. A spent run limit stops this task."""
    at_limit = _LIMITS[type(exc).__name__]
    limit = getattr(exc, "thread_limit", None)
    count = getattr(exc, "thread_count", 0)
    spent = isinstance(limit, int) and (count >= limit if at_limit else count > limit)
    if spent and thread_of(config) is not None:
        return _stopped(
            message,
            agent_id,
            exc,
            ResultStatus.REJECTED,
            Fault.CALLER,
            "; the conversation's thread has spent it: go on in a new thread",
        )
    return _stopped(message, agent_id, exc, ResultStatus.ERROR, Fault.TASK)


def _blocked(exc: Exception, message: ReachMessage, agent_id: str) -> ReachResult:
    """PII the call's own payload carries is the caller's to take out; PII from anywhere else
    (the model's answer, a tool's output, the thread's earlier turns) stops the task."""
    matches = getattr(exc, "matches", None) or []
    sent = orjson.dumps(message.raw_payload).decode()
    values = [match.get("value") for match in matches if isinstance(match, dict)]
    if values and all(isinstance(value, str) and value and value in sent for value in values):
        kind = getattr(exc, "pii_type", "PII")
        msg = (
            f"agent {agent_id} blocks {kind} in its input (LangChain's PIIMiddleware) and the call "
            f"carries {len(values)}: {exc}; take it out, or mask it, and call again"
        )
        raise InvalidMessageError(msg) from exc
    return _stopped(message, agent_id, exc, ResultStatus.ERROR, Fault.TASK)


def _stopped(
    message: ReachMessage, agent_id: str, exc: Exception, status: ResultStatus, fault: Fault, hint: str = ""
) -> ReachResult:
    error = f"agent {agent_id}'s run was stopped by a rule of its own ({type(exc).__name__}): {exc}{hint}"
    return error_result(message, status, type(exc).__name__, error, fault=fault, agent_id=agent_id)
