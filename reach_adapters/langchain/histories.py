"""Chat histories belong to their principal, as threads do.

A `RunnableWithMessageHistory` keeps one history per the ids of its ``history_factory_config``
(``session_id``, or ``user_id`` and ``conversation_id``, say), which each call gives in its
``configurable``: the caller's choice, as a thread id is. Left as named, a principal giving
another's ``session_id`` would read that history and add its turns to it. So the ids a call made
for a principal gives are made its own, ``<principal>/<id>``, as the router makes thread ids
(`reach_adapters.router.scoped_id`), before the run: the history factory never sees another
principal's id. Only the adapter knows which ids a runnable keys its histories on, so it is done
here, in the run's config (`run_config`), once per call; the call's message keeps the ids as the
caller named them, so whatever is shown to the caller names them so.

Which ids those are is read once, at registration (`history_ids`): an agent without such a history
pays nothing per call.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from langchain_core.runnables import Runnable

from reach_adapters.errors import InvalidMessageError
from reach_adapters.langchain.held import every_runnable
from reach_adapters.router import id_text, scoped_id

__all__ = ["history_ids", "scope_histories"]


def history_ids(runnable: Runnable[Any, Any]) -> frozenset[str]:
    """The ids of every `RunnableWithMessageHistory` in `runnable` (its ``history_factory_config``):
    itself or any runnable it holds (bindings, chain steps, fallbacks, parallel and branch steps,
    a graph's nodes). A history that a function calls itself is not seen."""
    ids: set[str] = set()
    for layer in every_runnable(runnable):
        specs = getattr(layer, "history_factory_config", None)
        if isinstance(specs, list | tuple):
            ids |= {spec.id for spec in specs if isinstance(getattr(spec, "id", None), str)}
    return frozenset(ids)


def scope_histories(configurable: Mapping[str, Any], ids: frozenset[str], principal: str) -> dict[str, Any]:
    """`configurable` with each of the history ids `ids` that it gives made `principal`'s own.

    An id already in the principal's form stays as it is (a ``thread_id`` the router scoped, a
    history id the principal named so): only the principal's own calls can name it so. An id
    that is no string or integer is refused as the caller's mistake: it cannot be made the
    principal's, and handed on as it is, it could name another principal's history.
    """
    scoped = dict(configurable)
    for key in ids & configurable.keys():
        value = configurable[key]
        text = id_text(value)
        if text is None:
            msg = (
                f"configurable[{key!r}] must be a string or an integer, the id of a chat history, "
                f"got {type(value).__name__}"
            )
            raise InvalidMessageError(msg, fix_options={"configurable": {key: f"<{key}>"}})
        if "\\" in text or not _PATH_STEPS.isdisjoint(text.split("/")):
            # A history kept in a file per id (LangChain's FileChatMessageHistory pattern) would
            # take ``<principal>/../<other>/<id>`` for another principal's file.
            msg = (
                f"configurable[{key!r}] must not hold '.' or '..' steps or backslashes: a chat "
                "history kept in files would read them as a path to another caller's history"
            )
            raise InvalidMessageError(msg, fix_options={"configurable": {key: f"<{key}>"}})
        scoped[key] = scoped_id(text, principal)
    return scoped


_PATH_STEPS = frozenset({".", ".."})
