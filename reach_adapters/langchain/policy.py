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
("order not found") when nothing turns it into a message for the model (`reported_by_tool`,
raised as the router's `TaskError`, whose text the router masks as any agent's error); but not
one a reach tool raises for a call it made through the router, which is judged as that call
(`failed_call`), or for a call it could not make.

The rules' exceptions are known by class name and module: ``langchain`` (which defines the middleware)
is not a dependency, and older ``langchain-core`` lacks the model errors.
"""

from __future__ import annotations

from langchain_core.tools import ToolException

from middleware import Fault, ReachMessage, ReachResult, ResultStatus
from reach_adapters.errors import ReachError
from reach_adapters.langchain.tools import ReachToolError
from reach_adapters.router import TaskError, error_result

__all__ = ["failed_call", "judged", "reported_by_tool", "stopped_by_rule"]

# How LangChain refuses a single-input `Tool` more than one argument (`Tool._to_args_and_kwargs`).
_SINGLE_INPUT = "Too many arguments to single-input tool"

# LangGraph's error for a tool call whose arguments the tool refuses: the model's mistake.
_MODEL_CALLED_WRONGLY = frozenset({"ToolInvocationError"})

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


def judged(exc: Exception, message: ReachMessage, agent_id: str) -> ReachResult | None:
    """What a run's failure `exc` means when LangChain says so. Raises the failed call a reach
    tool raised (`failed_call`), for the router to judge as a call the agent made, and a tool's
    report of its task's error (`reported_by_tool`) as a `TaskError`; returns the result a run
    stopped by one of LangChain's rules stands for (`stopped_by_rule`); None when the failure is
    the agent's."""
    called = failed_call(exc)
    if called is not None:
        raise called from exc
    if reported_by_tool(exc):
        raise TaskError from exc
    return stopped_by_rule(exc, message, agent_id)


def stopped_by_rule(exc: Exception, message: ReachMessage, agent_id: str) -> ReachResult | None:
    """The result a run stopped by one of LangChain's rules stands for, None for any other
    failure."""
    if not _raised_as(exc, _RULES, "langchain"):
        return None
    error = f"agent {agent_id}'s run was stopped by a rule of its own ({type(exc).__name__}): {exc}"
    return error_result(
        message, ResultStatus.ERROR, type(exc).__name__, error, fault=Fault.TASK, agent_id=agent_id
    )


def reported_by_tool(exc: Exception) -> bool:
    """Whether `exc` is a tool reporting an error of its task: a `ToolException`, but not a
    reach tool's (`failed_call`, or the agent's own mistake as a caller), not LangGraph's
    `ToolInvocationError` (the model called a tool with arguments it refuses: the agent's
    failure), and not LangChain refusing a single-input tool more than one argument (a tool
    configured wrongly)."""
    if not isinstance(exc, ToolException) or isinstance(exc, ReachToolError):
        return False
    if _raised_as(exc, _MODEL_CALLED_WRONGLY, "langgraph"):
        return False
    return not str(exc).startswith(_SINGLE_INPUT)


def _raised_as(exc: Exception, names: frozenset[str], package: str) -> bool:
    """Whether `exc` is of a class of `package` named among `names`, or of a subclass of one:
    known by name, since `package` need not be installed."""
    return any(cls.__name__ in names and cls.__module__.startswith(package) for cls in type(exc).__mro__)


def failed_call(exc: Exception) -> ReachError | None:
    """The failed call a reach tool raised (``handle_tool_error=False``) as `exc`, whose result
    the router judges as any call the agent made: the called agent's failure is not its own."""
    cause = exc.__cause__
    if isinstance(exc, ReachToolError) and isinstance(cause, ReachError) and cause.result is not None:
        return cause
    return None
