"""What `Router` remembers of its reaches: decision records, for `explain`, and observers told of
each finished reach (and of each `Access` served beside routing)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from reach_adapters.errors import InvalidDeclarationError, UnknownTaskError
from reach_adapters.router.decisions import DecisionRecord
from reach_adapters.router.observe import Access, ReachObserver

if TYPE_CHECKING:
    from reach_adapters.router.dispatcher import Dispatcher

__all__ = ["DecisionCalls"]

logger = logging.getLogger(__name__)


class DecisionCalls:
    """Mixed into `Router`, which holds the dispatcher keeping the records."""

    _dispatcher: Dispatcher

    def add_observer(self, observer: ReachObserver) -> None:
        """Tell `observer` about every finished reach (``on_reach(record, result)``)."""
        if not callable(getattr(observer, "on_reach", None)):
            msg = f"{type(observer).__name__} is not a ReachObserver: it needs on_reach(record, result)"
            raise InvalidDeclarationError(msg)
        self._dispatcher.observers.append(observer)

    def note_access(self, access: Access) -> None:
        """Tell the observers that have ``on_access`` (the audit log) of a request an adapter
        served beside routing, such as a resource read through the router's MCP server."""
        for observer in self._dispatcher.observers:
            on_access = getattr(observer, "on_access", None)
            if on_access is not None:
                try:
                    on_access(access)
                except Exception:
                    logger.exception("observer %r failed", observer)

    def explain(self, task_id: str, *, principal: str | None = None) -> DecisionRecord:
        """The decision record of a recent task: candidates, scores, exclusions, attempts.

        ``router.explain(task_id).why_not(agent_id)`` answers "why not that agent?". For a
        `principal`, only its own tasks are found (all of them for an admin).
        """
        record = self._dispatcher.decisions.get(task_id)
        owner = self.owner_scope(principal)
        if owner is not None and record.principal != owner:
            msg = f"no decision record for task {task_id!r} of principal {principal!r}"
            raise UnknownTaskError(msg)
        return record

    def recent_decisions(
        self, limit: int = 20, capability: str | None = None, *, principal: str | None = None
    ) -> list[DecisionRecord]:
        """The latest decision records, newest first, optionally for one capability; the router
        keeps the last ``policy.decision_log_size``. For a `principal`, only its own (all for an
        admin)."""
        return self._dispatcher.decisions.recent(limit, capability, self.owner_scope(principal))

    def owner_scope(self, principal: str | None) -> str | None:
        """The principal whose tasks and records alone `principal` sees; None: it sees all (no
        security, or a principal allowed to). Every surface listing tasks keeps to it."""
        guard = self._dispatcher.guard
        owner_only = principal is not None and guard is not None and not guard.sees_all(principal)
        return principal if owner_only else None
