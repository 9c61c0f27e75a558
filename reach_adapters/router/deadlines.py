"""Deadlines for in-flight deliveries: one timer per event loop instead of one per call.

A timer per call (what `asyncio.timeout` schedules) leaves a cancelled handle in the loop's heap
for every call that finishes early, and that heap is ordered by Python-level comparisons; under
load this costs more than routing itself. Here every delivery goes into one heap of plain tuples
and a single loop timer is kept armed for the earliest deadline.

Nothing here keeps a loop alive: a watchdog is reachable only from its loop (the armed timer) and
from deliveries in progress on it, so it goes with its loop, and the next loop gets its own.
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import math
import weakref

from middleware import MetaInfo
from middleware.fast import amend

__all__ = ["Expiry", "apply_caller_timeout", "watchdog"]


def apply_caller_timeout(meta: MetaInfo) -> bool:
    """Turn the caller's ``timeout_ms`` into a deadline; True when the caller bounds the task.

    A deadline the caller set (or inherited) bounds fallbacks too; one derived later from a
    capability's timeout does not, since a fallback agent has a timeout of its own.
    """
    if meta.deadline is None and meta.timeout_ms is not None:
        amend(meta, {"deadline": meta.created_at + meta.timeout_ms / 1000.0})
    return meta.deadline is not None


# How long an enclosing delivery due with a nested one waits for the nested agent's timeout to
# reach its agent's code, which may still answer with it.
_AFTER_INNER_S = 0.001


class Expiry:
    """The deadline of one delivery: cancels its task if it is still active when it fires.

    `inner`: the delivery nested in this one on the same task (an agent awaiting a routed call),
    while it runs; `held`: this one was held back once for it.
    """

    __slots__ = ("active", "fired", "held", "inner", "task")

    def __init__(self, task: asyncio.Task[object]) -> None:
        self.task = task
        self.active = True
        self.fired = False
        self.held = False
        self.inner: Expiry | None = None

    def consume(self) -> bool:
        """Whether it fired (once): the caller then owes the task an ``uncancel()``."""
        fired, self.fired = self.fired, False
        return fired


class Watchdog:
    __slots__ = ("__weakref__", "_heap", "_live", "_loop", "_seq", "_timer", "_timer_at")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._heap: list[tuple[float, int, Expiry]] = []
        self._seq = itertools.count()
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = math.inf
        self._live = 0

    def watch(self, task: asyncio.Task[object], budget_s: float) -> Expiry:
        expiry = Expiry(task)
        when = self._loop.time() + budget_s
        heap = self._heap
        heapq.heappush(heap, (when, next(self._seq), expiry))
        self._live += 1
        if when < self._timer_at:
            self._arm(when)
        elif len(heap) > 64 and len(heap) > 4 * self._live:
            # Finished deliveries are dropped lazily; compact when they dominate.
            self._heap = [entry for entry in heap if entry[2].active]
            heapq.heapify(self._heap)
        return expiry

    def release(self, expiry: Expiry) -> None:
        if expiry.active:
            expiry.active = False
            self._live -= 1

    def _arm(self, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._timer = self._loop.call_at(when, self._fire)
        self._timer_at = when

    def _fire(self) -> None:
        self._timer = None
        self._timer_at = math.inf
        now = self._loop.time()
        heap = self._heap
        held = []
        while heap and (heap[0][0] <= now or not heap[0][2].active):
            _, seq, expiry = heapq.heappop(heap)
            if not expiry.active:
                continue
            inner = expiry.inner
            if inner is not None and (inner.active or inner.fired) and not expiry.held:
                # A nested call carries its caller's deadline, so its delivery is due too, give or
                # take the clock reads: it is cut first (once per task: a second cancellation
                # would read as its caller's), and the timeout is the nested agent's. This one
                # follows shortly, if its agent still runs by then.
                expiry.held = True
                held.append((seq, expiry))
                if not inner.active:
                    continue
                while inner.inner is not None and inner.inner.active:
                    inner = inner.inner
                expiry = inner
            self.release(expiry)
            expiry.fired = True
            expiry.task.cancel()
        for seq, expiry in held:
            heapq.heappush(heap, (now + _AFTER_INNER_S, seq, expiry))
        if heap:
            self._arm(heap[0][0])


# By the loop's id, held weakly: an entry lives as long as its watchdog, which holds its loop, so
# the id cannot be reused while the entry stands.
_watchdogs: weakref.WeakValueDictionary[int, Watchdog] = weakref.WeakValueDictionary()
_last: weakref.ref[Watchdog] | None = None


def watchdog(loop: asyncio.AbstractEventLoop) -> Watchdog:
    """The loop's watchdog; the last one used is kept at hand (weakly) since one loop is the
    usual case. An idle watchdog (nothing watched, no timer armed) may be dropped and made again."""
    global _last
    last = _last() if _last is not None else None
    if last is not None and last._loop is loop:
        return last
    found = _watchdogs.get(id(loop))
    if found is None:
        found = _watchdogs[id(loop)] = Watchdog(loop)
    _last = weakref.ref(found)
    return found
