"""Whether a failed run did no work, so another replica may take it (`never_started`).

What a chain or a graph raises says nothing of the steps that ran before it: a rate limit from
its model may come after a node charged a card. A runnable that is one request (a model call, a
client of a remote graph) is different: the other side refusing that request (a refused
connection, a rate limit, an overload) means nothing ran.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseLanguageModel
from langchain_core.runnables import Runnable, RunnableWithFallbacks
from langchain_core.runnables.base import RunnableBindingBase

from reach_adapters.router import refused

__all__ = ["mark_refused", "one_request"]

# Clients whose run is one HTTP request to a deployment that runs it (LangGraph's `RemoteGraph`,
# langserve's `RemoteRunnable`), by class name: neither package is a dependency.
_REMOTE = frozenset({"RemoteGraph", "RemoteRunnable"})


def one_request(runnable: Runnable[Any, Any]) -> bool:
    """Whether `runnable` is one request: a chat model or LLM, or a client of a remote graph or
    runnable; bound (``bind_tools``, ``with_config``, ``with_retry``) or not, and with fallbacks
    that are each one request too (the first refused, the next asked)."""
    while isinstance(runnable, RunnableBindingBase):
        runnable = runnable.bound
    if isinstance(runnable, RunnableWithFallbacks):
        return all(one_request(each) for each in (runnable.runnable, *runnable.fallbacks))
    return isinstance(runnable, BaseLanguageModel) or type(runnable).__name__ in _REMOTE


def mark_refused(exc: BaseException) -> None:
    """Mark `exc` never delivered when it says the one request was refused, unless it says itself
    whether it was."""
    if getattr(exc, "delivered", None) is None and refused(exc):
        exc.delivered = False  # type: ignore[attr-defined]
