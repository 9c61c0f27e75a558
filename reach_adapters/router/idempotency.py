"""Deliver each task id at most once within a window; repeats get the first delivery's result."""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict

from middleware import ReachResult, ResultStatus

__all__ = ["IdempotencyStore"]

# Outcomes where nothing was delivered: a repeat may try again.
_NOT_DELIVERED = frozenset(
    {ResultStatus.NO_CANDIDATE, ResultStatus.INVALID, ResultStatus.REJECTED, ResultStatus.CANCELLED}
)


class IdempotencyStore:
    """Task id → the first delivery's result (or the future of one still in flight).

    Entries expire after `window_s` and the oldest are dropped past `max_entries`, so memory stays
    bounded however many tasks pass through; an entry still in flight is never dropped. `settle`
    and `abandon` take the future `claim` handed out, so a late first caller can never touch an
    entry that a later delivery owns.
    """

    def __init__(self, window_s: float, max_entries: int) -> None:
        self._window_s = window_s
        self._max_entries = max_entries
        self._entries: OrderedDict[str, tuple[float, asyncio.Future[ReachResult]]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def reconfigure(self, window_s: float, max_entries: int) -> None:
        """Applies to tasks claimed from now on; entries already held keep their expiry."""
        self._window_s = window_s
        self._max_entries = max_entries

    def claim(self, task_id: str) -> tuple[asyncio.Future[ReachResult], bool]:
        """The task's future, and True when the caller is the first and must deliver it."""
        entries = self._entries
        now = time.monotonic()
        entry = entries.get(task_id)
        if entry is not None:
            expires, future = entry
            if expires > now or not future.done():
                return future, False
            del entries[task_id]
        future = asyncio.get_running_loop().create_future()
        entries[task_id] = (now + self._window_s, future)
        self._evict(now)
        return future, True

    def settle(self, task_id: str, future: asyncio.Future[ReachResult], result: ReachResult) -> None:
        """Record the first delivery's result; outcomes where no agent was reached are forgotten."""
        entry = self._entries.get(task_id)
        if (
            entry is not None
            and entry[1] is future
            and (result.status in _NOT_DELIVERED or not result.attempts)
        ):
            del self._entries[task_id]
        if not future.done():
            future.set_result(result)

    def abandon(self, task_id: str, future: asyncio.Future[ReachResult]) -> None:
        """The first caller was cancelled: forget the claim; waiters then deliver it themselves."""
        entry = self._entries.get(task_id)
        if entry is not None and entry[1] is future:
            del self._entries[task_id]
        if not future.done():
            future.cancel()

    def _evict(self, now: float) -> None:
        entries = self._entries
        while entries:
            task_id, (expires, future) = next(iter(entries.items()))
            if expires > now and len(entries) <= self._max_entries:
                break
            if not future.done():
                # Over the bound but still in flight: keep it, its waiters need it.
                entries.move_to_end(task_id)
                break
            del entries[task_id]
