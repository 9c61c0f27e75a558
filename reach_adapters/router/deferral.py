"""The deferred queue: a call with ``defer=True`` that nothing can serve now waits here for a
capable agent, within its deadline, instead of ending ``no_candidate``.

Only what a new agent could fix waits: no agent declares the capability, or none of those that do
is usable (offline, draining, reconnecting, busy for its priority), and the fallback and default
agents found nothing either. A caller's mistake never waits (the dispatcher answers it first), nor
a call whose capability was matched from its text (there is no name to wait for, and the words may
be the problem), nor directed and broadcast calls, nor a call some agent already had: its work
may have started. Saturation is another wait, for capacity (`Waitlist` per slot, planning).

Calls wait per capability in arrival order and are all woken on every catalog change (an agent
registered, came back, changed its capabilities); each then routes again, oldest first, and one
that still finds nothing waits again, in its place of arrival (a `_Line`), not behind the calls
that came after it. Every ``policy.defer_look_again_s`` seconds they look again on their own, for
what changes without a catalog event (a BUSY agent back to ONLINE): the first call whose time has
come wakes its whole line, so that this too serves the oldest first. Past its deadline a call ends
``timeout``; with ``policy.defer_max_waiting`` calls waiting, one more is refused at once.
"""

from __future__ import annotations

import asyncio
import bisect
import itertools
import logging
import time
from collections.abc import Awaitable, Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

from middleware import Fault, ReachMessage, ReachResult, ResultStatus
from middleware.fast import amend
from reach_adapters.router.decisions import DecisionRecord
from reach_adapters.router.outcomes import ErrorKind, error_result
from reach_adapters.router.policy import AgentErrors, RoutingPolicy
from reach_adapters.router.selection import Problem
from reach_adapters.router.state import Slot, wake

if TYPE_CHECKING:
    from reach_adapters.router.attempts import Deliver, Run

__all__ = ["PARKING", "Deferral", "DeferredQueue", "Parking", "RouteAgain", "not_deferred"]

logger = logging.getLogger(__name__)


@dataclass(slots=True, frozen=True)
class Parking:
    """How the runner of an async task hears that its task waits deferred (`park`) and that it
    goes on to an agent (`resume`): it shows the task ``deferred`` meanwhile, and gives the
    worker the task held to another task."""

    task_id: str
    park: Callable[[], Awaitable[None]]
    resume: Callable[[], Awaitable[None]]


PARKING: ContextVar[Parking | None] = ContextVar("reach_parking", default=None)
"""Set by a task runner around the dispatch of one task; calls nested in it (with task ids of
their own) do not use it."""


class RouteAgain(Exception):  # noqa: N818 -- a signal, not an error
    """Raised by `DeferredQueue.hold` for a call to route again now: it was just parked, or woken
    in the queue. Only the dispatcher's loop of passes, which no call without ``defer`` goes
    through, catches it: that keeps the loop off the path of every other call."""


class Deferral:
    """One call's stay in the deferred queue, over the passes its dispatch makes."""

    __slots__ = ("arrival", "deadline", "task", "waited_ms")

    def __init__(self, deadline: float, arrival: int, *, task: bool) -> None:
        self.deadline = deadline  # Unix time
        # Its place in its capability's line, kept over all its passes: first come, first served.
        self.arrival = arrival
        self.waited_ms = 0.0
        # An async task's run, which its runner cuts when the router closes (a cluster's keeps it).
        self.task = task


class DeferredQueue:
    """The calls of one router waiting for a capable agent, FIFO per capability."""

    def __init__(self) -> None:
        self._waitlists: dict[str, _Line] = {}
        self._arrivals = itertools.count()
        self.waiting = 0
        self.closed = False

    def __len__(self) -> int:
        return self.waiting

    def look_again(self) -> None:
        """Wake every deferred call to route again: the catalog changed (a catalog listener)."""
        for waitlist in list(self._waitlists.values()):
            waitlist.wake_all()

    async def close(self) -> None:
        """The router closes: the calls waiting end now (async tasks are left to their runner)."""
        self.closed = True
        self.look_again()

    async def hold(
        self,
        message: ReachMessage,
        record: DecisionRecord,
        problem: Problem,
        result: ReachResult,
        caller_deadline: bool,
        run: Run,
        policy: RoutingPolicy,
    ) -> ReachResult:
        """Wait for a capable agent: `RouteAgain` when the call should route again now; else the
        result to end it with (`result` itself when it may not wait, a refusal or an expiry)."""
        meta = message.meta_info
        capability = meta.capability
        if not _deferrable(message, record, problem, result) or capability is None:
            return result
        deferral = run.deferral
        if deferral is None:
            refused = await self._park(message, record, result, caller_deadline, run, policy)
            if refused is not None:
                return refused
            deferral = run.deferral
            assert deferral is not None, "a parked call has its deferral"
            if deferral.task:
                # Routed again at once before it waits: an agent may have come while its state
                # was saved (a cluster's store is a round trip away).
                raise RouteAgain
        if self.closed and not deferral.task:
            error = "the router closed while the call waited deferred; it never reached an agent"
            kind = ErrorKind.CANCELLED
            return error_result(message, ResultStatus.CANCELLED, kind, error, fault=Fault.ROUTER)
        remaining = deferral.deadline - time.time()
        if remaining <= 0:
            return _expired(message, problem, deferral)
        waitlist = self._waitlists.get(capability)
        if waitlist is None:
            waitlist = self._waitlists[capability] = _Line()
        look_again_s = policy.defer_look_again_s
        last = remaining <= look_again_s
        began = time.perf_counter()
        self.waiting += 1
        expired = False
        try:
            await waitlist.wait(deferral.arrival, min(remaining, look_again_s))
        except TimeoutError:
            expired = last
            if not last:
                # Its time to look again: the calls before it in line look again first.
                waitlist.wake_all()
        finally:
            self.waiting -= 1
            deferral.waited_ms += (time.perf_counter() - began) * 1000.0
            if not len(waitlist) and self._waitlists.get(capability) is waitlist:
                del self._waitlists[capability]
        if expired:
            return _expired(message, problem, deferral)
        if not caller_deadline:
            # The deadline of this pass came from an agent's timeout: the next pass sets its own.
            amend(meta, {"deadline": None})
        raise RouteAgain

    async def _park(
        self,
        message: ReachMessage,
        record: DecisionRecord,
        result: ReachResult,
        caller_deadline: bool,
        run: Run,
        policy: RoutingPolicy,
    ) -> ReachResult | None:
        """Enter the queue (None), or the result that refuses it: the queue is full, the router is
        closing, or the deadline has passed already."""
        meta = message.meta_info
        if self.closed:
            not_deferred(record, "the router is closing")
            return result
        if self.waiting >= policy.defer_max_waiting:
            error = (
                f"{result.error}; and the deferred queue is full ({self.waiting} calls wait, "
                f"policy.defer_max_waiting {policy.defer_max_waiting}): call again later, or raise "
                "defer_max_waiting"
            )
            not_deferred(record, "the deferred queue is full")
            kind = ErrorKind.DEFER_QUEUE_FULL
            return error_result(
                message, ResultStatus.NO_CANDIDATE, kind, error, fault=Fault.ROUTER, retryable=True
            )
        deadline = (meta.deadline or 0.0) if caller_deadline else meta.created_at + policy.defer_timeout_s
        if deadline <= time.time():
            not_deferred(record, "its deadline has passed")
            return result
        parking = PARKING.get()
        if parking is not None and parking.task_id != meta.task_id:
            parking = None
        run.deferral = Deferral(deadline, next(self._arrivals), task=parking is not None)
        if parking is not None:
            await parking.park()
            run.deliver = _resuming(run, parking)
        logger.info(
            "task %s deferred: no agent can serve %r now; it waits up to %.1f s",
            meta.task_id,
            meta.capability,
            deadline - time.time(),
        )
        if not caller_deadline:
            amend(meta, {"deadline": None})
        return None


def _deferrable(message: ReachMessage, record: DecisionRecord, problem: Problem, result: ReachResult) -> bool:
    hint = message.routing_hint
    if not hint.defer:
        return False
    if hint.mode != "unicast":
        not_deferred(record, f"a {hint.mode} call is answered at once")
        return False
    if record.matches or message.meta_info.capability is None:
        not_deferred(record, "the call named no capability (matched from its text); name one to defer")
        return False
    return (
        problem.status is ResultStatus.NO_CANDIDATE
        and problem.error_type == ErrorKind.NO_CANDIDATE
        and problem.fault is Fault.ROUTER
        # Waiting for capacity is the planner's; its queue being full is no reason to wait here.
        and problem.wait_for != "capacity"
        # A call some agent had may have done its work: waiting for another would do it twice.
        and not result.delivered
        and not record.delivered
    )


def not_deferred(record: DecisionRecord, why: str) -> None:
    """Note in `record` why a call with ``defer=True`` ended without waiting."""
    note = f"not deferred: {why}"
    record.note = note if record.note is None else f"{record.note}; {note}"


def _expired(message: ReachMessage, problem: Problem, deferral: Deferral) -> ReachResult:
    capability = message.meta_info.capability
    error = (
        f"{problem.error}; waited deferred {deferral.waited_ms / 1000.0:.1f} s and no agent able to "
        f"serve {capability!r} came before its deadline"
    )
    return error_result(message, ResultStatus.TIMEOUT, ErrorKind.TIMEOUT, error, fault=Fault.ROUTER)


class _Line:
    """The calls deferred for one capability, in order of arrival (`Deferral.arrival`).

    Unlike a `Waitlist`, a call that looks again and waits again takes back its place of arrival
    rather than the end of the line; and every wake is for all (a change may serve more than one).
    """

    __slots__ = ("_entries",)

    def __init__(self) -> None:
        # Sorted by arrival; a call has at most one entry, so arrivals never tie.
        self._entries: list[tuple[int, asyncio.Future[None]]] = []

    def __len__(self) -> int:
        return len(self._entries)

    async def wait(self, arrival: int, timeout: float) -> None:
        future: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        entry = (arrival, future)
        bisect.insort(self._entries, entry)
        try:
            async with asyncio.timeout(timeout):
                await future
        finally:
            if not future.done() or future.cancelled():
                # Not woken (a timeout or a cancel): it leaves, or comes back to its place later.
                future.cancel()
                at = bisect.bisect_left(self._entries, (arrival,))
                if at < len(self._entries) and self._entries[at][1] is future:
                    del self._entries[at]

    def wake_all(self) -> None:
        entries, self._entries = self._entries, []
        for _, future in entries:
            wake(future)


def _resuming(run: Run, parking: Parking) -> Deliver:
    """`run`'s way of delivering, telling the task's runner first that the task left the queue."""
    deliver = run.deliver

    async def resume(
        slot: Slot, message: ReachMessage, deadline: float, errors: AgentErrors
    ) -> tuple[ReachResult, float]:
        run.deliver = deliver
        await parking.resume()
        return await deliver(slot, message, deadline, errors)

    return resume
