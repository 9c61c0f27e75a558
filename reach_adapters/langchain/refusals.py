"""Whether a failed run did no work, so another replica may take it (`never_started`).

What a chain or a graph raises says nothing of the steps that ran before it: a rate limit from
its model may come after a node charged a card. A runnable that is one model call is different:
the provider refusing that request (a refused connection, a rate limit, an overload) means
nothing ran.
"""

from __future__ import annotations

from typing import Any

from langchain_core.language_models import BaseLanguageModel
from langchain_core.runnables import Runnable, RunnableBinding

from reach_adapters.router import refused

__all__ = ["mark_refused", "one_request"]


def one_request(runnable: Runnable[Any, Any]) -> bool:
    """Whether `runnable` is one model call: a chat model or LLM, bound (``bind_tools``,
    ``with_config``, ``with_retry``) or not."""
    while isinstance(runnable, RunnableBinding):
        runnable = runnable.bound
    return isinstance(runnable, BaseLanguageModel)


def mark_refused(exc: BaseException) -> None:
    """Mark `exc` never delivered when it says the model's request was refused, unless it says
    itself whether it was."""
    if getattr(exc, "delivered", None) is None and refused(exc):
        exc.delivered = False  # type: ignore[attr-defined]
