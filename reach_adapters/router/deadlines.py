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
    capability's timeout does not, since a fallback agent has a timeout of its own. A call made
    inside another keeps the sooner of its own timeout and the deadline it inherited.
    """
    timeout_ms = meta.timeout_ms
    if timeout_ms is not None:
        own = meta.created_at + timeout_ms / 1000.0
        if meta.deadline is None or own < meta.deadline:
            amend(meta, {"deadline": own})
    return meta.deadline is not None


# How long an enclosing delivery due with a nested one waits for the nested agent's timeout to
# reach its agent's code, which may still answer with it: the nested results' bookkeeping and the
# agent's own code run meanwhile, which took over 1 ms on a cold or loaded machine.
_AFTER_INNER_S = 0.02
# A nested delivery due this close to its enclosing one's deadline shares it (a nested call
# carries its caller's deadline; the clock reads of the two land a little apart).
_SHARED_DEADLINE_S = 0.05


class Expiry:
    """The deadline of one delivery: cancels its task if it is still active when it fires.

    `outer` is the delivery this one is nested in (its agent awaits this routed call, in its own
    task or another), `inners` those nested in it while they run; `cut_inner` the last of them
    (or of theirs) cut; `held`: it was held back once for them; `asking`: questions of the agent
    waiting on its caller's answer (`hops.CallerWait`), which make a timeout the caller's;
    `waited`: the seconds they took, which are not the agent's latency.
    """

    __slots__ = (
        "active",
        "asked_at",
        "asking",
        "cut_inner",
        "fired",
        "held",
        "inners",
        "outer",
        "task",
        "waited",
        "when",
    )

    def __init__(self, task: asyncio.Task[object], when: float, outer: Expiry | None) -> None:
        self.task = task
        self.when = when
        self.active = True
        self.fired = False
        self.held = False
        self.asking = 0
        # Seconds spent waiting on the caller, and since when the current wait (`asking` > 0).
        self.waited = 0.0
        self.asked_at = 0.0
        self.cut_inner: Expiry | None = None
        self.inners: list[Expiry] | None = None
        self.outer = outer
        if outer is not None:
            if outer.inners is None:
                outer.inners = [self]
            else:
                outer.inners.append(self)

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

    def watch(self, task: asyncio.Task[object], budget_s: float, outer: Expiry | None = None) -> Expiry:
        """Cancel `task` after `budget_s`; `outer`: the running delivery this one is nested in."""
        when = self._loop.time() + budget_s
        expiry = Expiry(task, when, outer if outer is not None and outer.active else None)
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
            outer = expiry.outer
            if outer is not None and outer.inners is not None:
                outer.inners.remove(expiry)
                expiry.outer = None

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
            if not expiry.held and (self._cut_inners(expiry, now) or _cut_pending(expiry)):
                # A nested delivery sharing this deadline is cut first, so the timeout is the
                # nested agent's (one cut per task at a time: a second cancellation would read
                # as its caller's). This one follows shortly, if its agent still runs by then.
                expiry.held = True
                held.append((seq, expiry))
                continue
            self._cut(expiry)
        for seq, expiry in held:
            heapq.heappush(heap, (now + _AFTER_INNER_S, seq, expiry))
        if heap:
            self._arm(heap[0][0])

    def _cut_inners(self, expiry: Expiry, now: float) -> bool:
        """Cut the innermost deliveries nested in `expiry` that share its deadline; whether any."""
        cut = False
        for inner in list(expiry.inners or ()):
            if inner.active and not self._cut_inners(inner, now) and inner.when <= now + _SHARED_DEADLINE_S:
                self._cut(inner)
            cut = cut or not inner.active or _cut_pending(inner)
        return cut

    def _cut(self, expiry: Expiry) -> None:
        outer = expiry.outer
        self.release(expiry)
        expiry.fired = True
        expiry.task.cancel()
        while outer is not None:
            outer.cut_inner = expiry
            outer = outer.outer


def _cut_pending(expiry: Expiry) -> bool:
    """Whether a delivery nested in `expiry` was cut and its agent has not seen it yet."""
    return expiry.cut_inner is not None and expiry.cut_inner.fired


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
