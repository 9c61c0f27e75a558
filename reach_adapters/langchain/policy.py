"""Runs that LangChain's own rules stopped, and whose doing that is (DESIGN §6).

A `create_agent` agent's middleware ends a run with an exception where it is told to: a call
limit spent (``exit_behavior="error"``), PII found with the ``block`` strategy; a model refuses
the request, or the input overflows its context. None of these is the agent failing: counted
against it, a caller sending an email address to an agent that blocks them, or spending its
conversation's call budget, would quarantine the agent for everyone. Nor can the adapter tell
the caller's part for sure: the exceptions do not say whether the PII came in the call or from
the model or a tool, nor whether a thread's limit was spent before the run or by it. So each is
the task's (``error``, fault ``task``): not counted, and not retried, since any replica would
stop it alike; its text says what the rule found.

So is a tool's `ToolException`, LangChain's way for a tool to report an error of the task's
("order not found") when nothing turns it into a message for the model; but not one a reach tool
raises for a call it made through the router, which is judged as that call (`failed_call`).

The rules' exceptions are known by class name and module: ``langchain`` (which defines the middleware)
is not a dependency, and older ``langchain-core`` lacks the model errors.
"""

from __future__ import annotations

from langchain_core.tools import ToolException

from middleware import Fault, ReachMessage, ReachResult, ResultStatus
from reach_adapters.errors import ReachError
from reach_adapters.router import error_result

__all__ = ["failed_call", "stopped_by_rule"]

# LangChain's rules: the middleware's (``langchain.agents``) and the model errors that say the
# same request fails anywhere (``langchain_core.exceptions``).
_RULES = frozenset(
    {
        "ModelCallLimitExceededError",
        "ToolCallLimitExceededError",
        "PIIDetectionError",
        "ModelRefusalError",
        "ContextOverflowError",
    }
)


def stopped_by_rule(exc: Exception, message: ReachMessage, agent_id: str) -> ReachResult | None:
    """The result a run stopped by one of LangChain's rules stands for, or by a tool reporting
    an error of the task's (a `ToolException`, LangChain's way for a tool to say "order not
    found"); None for any other failure (the agent's own)."""
    if isinstance(exc, ToolException):
        if isinstance(exc.__cause__, ReachError):
            # A reach tool that could not make its call: a mistake of the agent's as a caller.
            return None
        error = f"a tool of agent {agent_id} reported an error: {exc}"
    elif any(cls.__name__ in _RULES and cls.__module__.startswith("langchain") for cls in type(exc).__mro__):
        error = f"agent {agent_id}'s run was stopped by a rule of its own ({type(exc).__name__}): {exc}"
    else:
        return None
    return error_result(
        message, ResultStatus.ERROR, type(exc).__name__, error, fault=Fault.TASK, agent_id=agent_id
    )


def failed_call(exc: Exception) -> ReachError | None:
    """The failed call a reach tool raised (``handle_tool_error=False``) as `exc`, whose result
    the router judges as any call the agent made: the called agent's failure is not its own."""
    cause = exc.__cause__
    if isinstance(exc, ToolException) and isinstance(cause, ReachError) and cause.result is not None:
        return cause
    return None
