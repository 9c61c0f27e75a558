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
    bounded however many tasks pass through.
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

    def claim(self, task_id: str) -> asyncio.Future[ReachResult] | None:
        """Return the earlier delivery's future when `task_id` was seen, else claim it and return None."""
        entries = self._entries
        now = time.monotonic()
        entry = entries.get(task_id)
        if entry is not None:
            if entry[0] > now:
                return entry[1]
            del entries[task_id]
        entries[task_id] = (now + self._window_s, asyncio.get_running_loop().create_future())
        self._evict(now)
        return None

    def settle(self, task_id: str, result: ReachResult) -> None:
        entry = self._entries.get(task_id)
        if entry is None:
            return
        future = entry[1]
        if result.status in _NOT_DELIVERED:
            del self._entries[task_id]
        if not future.done():
            future.set_result(result)

    def abandon(self, task_id: str) -> None:
        """The first caller was cancelled: forget the claim so a repeat delivers again."""
        entry = self._entries.pop(task_id, None)
        if entry is not None and not entry[1].done():
            entry[1].cancel()

    def _evict(self, now: float) -> None:
        entries = self._entries
        while entries:
            task_id, (expires, future) = next(iter(entries.items()))
            if expires > now and len(entries) <= self._max_entries:
                break
            if not future.done() and expires > now:
                # Over the size bound but still in flight: keep it, its waiters need it.
                entries.move_to_end(task_id)
                break
            del entries[task_id]
