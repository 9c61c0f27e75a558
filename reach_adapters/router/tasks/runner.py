"""Async tasks: submitted, answered with a task id at once, run in the background.

A bounded number run at once (``policy.task_workers``); more wait in a bounded queue
(``policy.task_queue_size``), and a submit beyond it is refused, never queued without limit.
Finished tasks are kept ``policy.task_result_ttl_s`` seconds, at most ``policy.task_max_kept``.
Running tasks live in this process: a store shared with other routers keeps their records, but
the work of one that stops is lost with it (the Redis queue of the cluster reclaims it). A task
submitted with ``defer=True`` that waits for a capable agent is ``deferred`` meanwhile, and holds
no worker (see `deferral`).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections import deque
from collections.abc import Awaitable, Callable
from functools import partial
from urllib.parse import urlsplit

from pydantic import JsonValue

from middleware import Fault, ReachMessage, ReachResult, ResultStatus
from middleware.fast import amend
from reach_adapters.errors import (
    IdempotencyConflictError,
    TaskFinishedError,
    TaskQueueFullError,
    UnknownTaskError,
)
from reach_adapters.router.compensation import ABANDONED
from reach_adapters.router.decisions import DecisionLog, DecisionRecord
from reach_adapters.router.deferral import PARKING, Parking
from reach_adapters.router.messages import refused_call
from reach_adapters.router.outcomes import ErrorKind, cut_short, error_result
from reach_adapters.router.policy import RoutingPolicy
from reach_adapters.router.tasks.records import TaskRecord, TaskStatus
from reach_adapters.router.tasks.store import TaskStore

__all__ = [
    "AsyncTasks",
    "Notifier",
    "cancelled_result",
    "check_callback_url",
    "check_cancellable",
    "notify",
    "owned",
    "repeated_task",
]

logger = logging.getLogger(__name__)

Notifier = Callable[[TaskRecord], Awaitable[None]]
"""Tells a task's ``callback_url`` it finished; the gateway's signs and retries (see callbacks)."""


class AsyncTasks:
    """Runs submitted tasks through `dispatch` and keeps them in `store`; owned by the `Router`."""

    def __init__(
        self,
        dispatch: Callable[[ReachMessage], Awaitable[ReachResult]],
        policy: RoutingPolicy,
        store: TaskStore,
        decisions: DecisionLog | None = None,
    ) -> None:
        self.store = store
        # Where `dispatch` records its reaches: a task cancelled as it ran names its agent from there.
        self._decisions = decisions
        self.notifier: Notifier | None = None
        self._dispatch = dispatch
        self._policy = policy
        self._waiting: deque[TaskRecord] = deque()
        self._running: dict[str, _Run] = {}
        # Of those running, the ones waiting deferred for an agent: they hold no worker.
        self._parked = 0
        self._done: dict[str, asyncio.Event] = {}
        self._notifying: set[asyncio.Task[None]] = set()
        # The loop tasks run on, known from the first submit.
        self._loop: asyncio.AbstractEventLoop | None = None

    def reconfigure(self, policy: RoutingPolicy) -> None:
        self._policy = policy
        if self._waiting and self._loop is not None:
            # More workers may start queued tasks now, on the loop they were queued on: the policy
            # may change from any thread, or outside any loop.
            self._loop.call_soon_threadsafe(self._start_waiting)

    @property
    def queued(self) -> int:
        return len(self._waiting)

    @property
    def running(self) -> int:
        return len(self._running)

    async def submit(
        self, message: ReachMessage, principal: str | None, callback_url: str | None
    ) -> TaskRecord:
        """Keep the task and start it, or queue it; raise `TaskQueueFullError` when the queue is full."""
        self._loop = asyncio.get_running_loop()
        policy = self._policy
        check_callback_url(callback_url, self.notifier)
        await self.store.expire(policy.task_max_kept)
        # A repeat of a kept task is answered with it, even when the queue is full.
        held = await self.store.get(message.meta_info.task_id)
        if held is not None:
            return repeated_task(held, message, principal)
        busy = len(self._running) - self._parked
        if busy >= policy.task_workers and len(self._waiting) >= policy.task_queue_size:
            msg = (
                f"the router's queue of async tasks is full ({policy.task_queue_size} waiting, "
                f"{policy.task_workers} running); submit again later, or raise task_queue_size"
            )
            raise TaskQueueFullError(msg)
        record = TaskRecord(
            task_id=message.meta_info.task_id, message=message, principal=principal, callback_url=callback_url
        )
        held = await self.store.create(record)
        if held is not None:
            return repeated_task(held, message, principal)
        self._done[record.task_id] = asyncio.Event()
        self._waiting.append(record)
        self._start_waiting()
        return record.model_copy()

    async def get(self, task_id: str, owner: str | None) -> TaskRecord:
        """The task; `owner` given, only if it submitted it (`UnknownTaskError` otherwise)."""
        return owned(await self.store.get(task_id), task_id, owner)

    async def wait(self, task_id: str, owner: str | None, timeout: float | None) -> TaskRecord:
        """The task once it has finished, or as it stands after `timeout` seconds."""
        record = await self.get(task_id, owner)
        done = self._done.get(task_id)
        if record.finished or done is None:
            return record
        try:
            async with asyncio.timeout(timeout):
                await done.wait()
        except TimeoutError:
            pass
        return await self.get(task_id, owner)

    async def dead_letters(self, owner: str | None, limit: int) -> list[dict[str, JsonValue]]:
        """None here: a task of this process runs once, and is never given up for redelivery."""
        return []

    async def list(self, owner: str | None, status: TaskStatus | None, limit: int) -> list[TaskRecord]:
        return await self.store.list(principal=owner, status=status, limit=limit)

    async def cancel(self, task_id: str, owner: str | None) -> TaskRecord:
        """Cancel a queued or running task; `TaskFinishedError` when it has ended already."""
        record = await self.get(task_id, owner)
        check_cancellable(record)
        waiting = next((queued for queued in self._waiting if queued.task_id == task_id), None)
        if waiting is not None:
            self._waiting.remove(waiting)
            await self._finish(waiting, cancelled_result(waiting.message, running=False))
        else:
            run = self._running.get(task_id)
            if run is not None:
                run.stop(closing=False)
                await asyncio.wait([run.task])
        return await self.get(task_id, owner)

    async def aclose(self) -> None:
        """Cancel every queued and running task; pending callbacks are dropped."""
        waiting, self._waiting = list(self._waiting), deque()
        for record in waiting:
            await self._finish(record, cancelled_result(record.message, running=False, closing=True))
        running = list(self._running.values())
        for run in running:
            run.stop(closing=True)
        if running:
            await asyncio.wait([run.task for run in running])
        for notifying in list(self._notifying):
            notifying.cancel()
        if self._notifying:
            await asyncio.wait(self._notifying)

    def _start_waiting(self) -> None:
        loop = asyncio.get_running_loop()
        while self._waiting and len(self._running) - self._parked < self._policy.task_workers:
            record = self._waiting.popleft()
            run = _Run(record)
            # A context of its own: the submitter's (an enclosing routed call) is in the message.
            run.task = loop.create_task(self._run(run), context=contextvars.Context())
            self._running[record.task_id] = run

    async def _run(self, run: _Run) -> None:
        record = run.record
        run.started = True
        try:
            if run.stopped is not None:
                result = cancelled_result(record.message, running=False, closing=run.stopped == _CLOSING)
            else:
                result = await self._deliver(run)
            await self._finish(record, result)
        finally:
            self._running.pop(record.task_id, None)
            if run.parked:
                self._parked -= 1
            if run.stopped != _CLOSING:
                self._start_waiting()

    async def _deliver(self, run: _Run) -> ReachResult:
        record = run.record
        try:
            record.status = TaskStatus.RUNNING
            record.started_at = time.time()
            await self.store.save(record)
            if record.message.routing_hint.defer:
                # Only a deferred task may park: the others need no way back to the runner.
                PARKING.set(Parking(record.task_id, partial(self._park, run), partial(self._resume, run)))
            result = await self._dispatch(record.message)
        except asyncio.CancelledError:
            # Stopped by cancel() or aclose(); a cancellation from elsewhere is the router's too.
            ran = record.status is not TaskStatus.DEFERRED
            decision = self._decisions.find(record.task_id) if self._decisions is not None else None
            return cancelled_result(
                record.message,
                running=ran,
                closing=run.stopped != _CALLER,
                decision=run_decision(decision, record),
            )
        except Exception as exc:  # noqa: BLE001 - logged there, with its traceback
            return failed_in_router(record, exc)
        finally:
            run.delivering = False
        return result

    async def _park(self, run: _Run) -> None:
        """The task waits deferred for a capable agent: its worker goes to the next task."""
        run.parked = True
        self._parked += 1
        run.record.status = TaskStatus.DEFERRED
        await self.store.save(run.record)
        self._start_waiting()

    async def _resume(self, run: _Run) -> None:
        """The deferred task goes to an agent: running again (even past `task_workers` a moment)."""
        run.parked = False
        self._parked -= 1
        run.record.status = TaskStatus.RUNNING
        await self.store.save(run.record)

    async def _finish(self, record: TaskRecord, result: ReachResult) -> None:
        record.status = TaskStatus(result.status.value)
        record.result = result
        record.finished_at = time.time()
        await self.store.save(record, keep_s=self._policy.task_result_ttl_s)
        done = self._done.pop(record.task_id, None)
        if done is not None:
            done.set()
        if record.callback_url is not None and self.notifier is not None:
            notifying = asyncio.get_running_loop().create_task(notify(self.notifier, record))
            self._notifying.add(notifying)
            notifying.add_done_callback(self._notifying.discard)


def check_callback_url(callback_url: str | None, notifier: Notifier | None) -> None:
    """Refuse a `callback_url` that is not http(s), or that nothing would send to."""
    if callback_url is not None and urlsplit(callback_url).scheme not in ("http", "https"):
        msg = f"callback_url must be an http:// or https:// URL, got {callback_url!r}"
        raise refused_call(msg)
    if callback_url is not None and notifier is None:
        msg = "callback_url needs a callback sender (reach serve sets one); poll the task instead"
        raise refused_call(msg)


def owned(record: TaskRecord | None, task_id: str, owner: str | None) -> TaskRecord:
    """`record` if `owner` may see it; `UnknownTaskError` when it is missing or another's."""
    if record is None or (owner is not None and record.principal != owner):
        who = "" if owner is None else f" of principal {owner!r}"
        msg = f"no async task {task_id!r}{who}: unknown, or finished longer ago than task_result_ttl_s"
        raise UnknownTaskError(msg)
    return record


def check_cancellable(record: TaskRecord) -> None:
    """`TaskFinishedError` when `record` has ended: there is nothing to cancel."""
    if record.finished:
        msg = f"task {record.task_id!r} has finished already ({record.status}); there is nothing to cancel"
        raise TaskFinishedError(msg)


async def notify(notifier: Notifier, record: TaskRecord) -> None:
    """Send a finished task's callback; a failure is logged, never raised."""
    try:
        await notifier(record)
    except Exception:
        # A callback never fails the task: it finished, and is kept for polling.
        logger.exception("the callback of async task %s failed", record.task_id)


_CALLER = "caller"
_CLOSING = "closing"


class _Run:
    """A task given to a worker. Stopped before it starts, it never runs (a task cancelled
    before its first step would end without a word); once delivering, its call is cancelled;
    once finishing, it is left to finish."""

    __slots__ = ("delivering", "parked", "record", "started", "stopped", "task")

    def __init__(self, record: TaskRecord) -> None:
        self.record = record
        self.task: asyncio.Task[None]
        self.started = False
        self.delivering = True
        self.parked = False
        self.stopped: str | None = None

    def stop(self, *, closing: bool) -> None:
        if self.stopped is None:
            self.stopped = _CLOSING if closing else _CALLER
            if self.started and self.delivering:
                # Only the caller's cancel undoes the work; a closing router abandons it.
                self.task.cancel(ABANDONED if closing else None)


def run_decision(decision: DecisionRecord | None, record: TaskRecord) -> DecisionRecord | None:
    """`decision`, the record kept under the task's id, when the task's own run left it; None when
    an earlier reach that used the same id did."""
    if decision is not None and decision.created_at < (record.started_at or 0.0):
        return None
    return decision


def failed_in_router(record: TaskRecord, exc: Exception) -> ReachResult:
    """The result of a task whose dispatch raised: the router's fault (agents' errors are results)."""
    logger.exception("async task %s failed in the router", record.task_id)
    return error_result(record.message, ResultStatus.ERROR, type(exc).__name__, str(exc), fault=Fault.ROUTER)


def cancelled_result(
    message: ReachMessage, *, running: bool, closing: bool = False, decision: DecisionRecord | None = None
) -> ReachResult:
    """The result of an async task cancelled before it ran, or as it ran (`running`).

    `decision`, the record the task's dispatch left, names the agents it went to: the last one is
    the agent that may have done the work, which is what the caller of a cancel needs to know.
    """
    who, fault = ("the router closed", Fault.ROUTER) if closing else ("the caller cancelled it", Fault.CALLER)
    attempts = [] if decision is None else decision.attempts
    agent_id = attempts[-1].agent_id if attempts else None
    result = error_result(
        message,
        ResultStatus.CANCELLED,
        ErrorKind.CANCELLED,
        cut_short(who, agent_id) if running else f"{who} before it ran",
        fault=fault,
        agent_id=agent_id,
        delivered=running or (decision is not None and decision.delivered),
    )
    # The deliveries its dispatch made, as the dispatcher's finishing step would have counted them.
    amend(result, {"attempts": len(attempts)})
    return result


def repeated_task(held: TaskRecord, message: ReachMessage, principal: str | None) -> TaskRecord:
    """The kept task a submit repeats; `IdempotencyConflictError` when it is not the same request."""
    if held.principal != principal:
        msg = f"task id {held.task_id!r} cannot be used for this task; use a new task id"
        raise IdempotencyConflictError(msg)
    asked, kept = message.meta_info, held.message.meta_info
    if (asked.capability, message.raw_payload) != (kept.capability, held.message.raw_payload):
        msg = (
            f"task id {held.task_id!r} is your task for another request (capability or "
            "payload differ); use a new task id"
        )
        raise IdempotencyConflictError(msg)
    return held
