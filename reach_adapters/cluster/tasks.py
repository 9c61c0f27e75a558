"""`ClusterTasks`: durable async tasks on the cluster's Redis, the task runner of a node.

A submit writes the record and its queue entry in one step before it answers (`RedisTaskStore`),
so an accepted task survives any node; `SET NX` on the task id makes the same id submitted on two
nodes one task. Any node's workers take it (`TaskWorkers`); any node reads it, waits for it (woken
by ``{"op": "done"}`` on the events channel, which carries the finished record, with polling since
pub/sub messages can be lost) or cancels it (a queued one at once; a running one by
``{"op": "cancel"}`` to the node running it).
The node that finishes a task sends its callback. See docs/tasks.md, "Durable tasks in a cluster".
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable
from typing import TypeVar

import orjson
import redis.asyncio as redis
from pydantic import JsonValue, ValidationError
from redis.exceptions import RedisError

from middleware import ReachMessage
from reach_adapters.cluster.direct import direct_connection, exchange, reply_timeout_s
from reach_adapters.cluster.errors import ClusterError, TasksUnavailableError
from reach_adapters.cluster.outage import Outage
from reach_adapters.cluster.queue import CALLER, TaskWorkers
from reach_adapters.cluster.queue_reader import block_seconds
from reach_adapters.cluster.records import Keys
from reach_adapters.cluster.stats import NodeStats
from reach_adapters.cluster.taskstore import QUEUE_FULL, RedisTaskStore, done_event
from reach_adapters.errors import TaskQueueFullError
from reach_adapters.router import Router
from reach_adapters.router.policy import RoutingPolicy
from reach_adapters.router.tasks import Notifier, TaskRecord, TaskStatus
from reach_adapters.router.tasks.runner import (
    cancelled_result,
    check_callback_url,
    check_cancellable,
    notify,
    owned,
    repeated_task,
)

__all__ = ["DEFAULT_MAX_DELIVERIES", "DEFAULT_VISIBILITY_TIMEOUT_S", "ClusterTasks"]

logger = logging.getLogger(__name__)

DEFAULT_VISIBILITY_TIMEOUT_S = 30.0
DEFAULT_MAX_DELIVERIES = 5
# Below this, a busy event loop could miss its own refresh and have its tasks taken over.
MIN_VISIBILITY_TIMEOUT_S = 0.3
# The longest a `wait` trusts pub/sub alone before reading the record again.
_POLL_S = 1.0
# How long a cancel waits for the node running the task to stop it, before ending it itself.
_CANCEL_WAIT_S = 5.0
# The events listener's name in the outage.
_EVENTS = "events"

T = TypeVar("T")


class ClusterTasks:
    """The `TaskRunner` of a node: tasks kept in Redis, run by whichever node takes them.

    Start it with `ClusterTasks.start`, which installs it as the router's runner.
    """

    def __init__(
        self,
        router: Router,
        client: redis.Redis,
        *,
        node_id: str,
        keys: Keys,
        stats: NodeStats | None = None,
        visibility_timeout_s: float = DEFAULT_VISIBILITY_TIMEOUT_S,
        max_deliveries: int = DEFAULT_MAX_DELIVERIES,
    ) -> None:
        if not visibility_timeout_s >= MIN_VISIBILITY_TIMEOUT_S:
            least = MIN_VISIBILITY_TIMEOUT_S
            msg = f"visibility_timeout_s must be at least {least} s, got {visibility_timeout_s}"
            raise ClusterError(msg)
        if max_deliveries < 1:
            msg = f"max_deliveries must be at least 1, got {max_deliveries}"
            raise ClusterError(msg)
        self.store = RedisTaskStore(client, keys)
        self.notifier: Notifier | None = None
        self.node_id = node_id
        self.stats = stats if stats is not None else NodeStats()
        self.visibility_timeout_s = visibility_timeout_s
        self._client = client
        self._keys = keys
        self._policy = router.policy
        self._outage = Outage(f"async tasks of node {node_id}")
        self._workers = TaskWorkers(
            router,
            client,
            self.store,
            node_id=node_id,
            stats=self.stats,
            outage=self._outage,
            visibility_timeout_s=visibility_timeout_s,
            max_deliveries=max_deliveries,
            finished=self._finished,
        )
        self._waiters: dict[str, set[_Waiter]] = {}
        # Tasks submitted here and not heard finished since, with their principal: a wait for one
        # need not read it first, as its done event is still to come (cleared whenever events may
        # have been missed; a wait polls Redis anyway, so a stale entry only delays an answer).
        self._accepted: dict[str, str | None] = {}
        self._hearing = False  # subscribed to the events channel
        self._notifying: set[asyncio.Task[None]] = set()
        self._listener: asyncio.Task[None] | None = None
        self._closed = False

    @classmethod
    async def start(
        cls,
        router: Router,
        client: redis.Redis,
        *,
        node_id: str,
        keys: Keys,
        stats: NodeStats | None = None,
        visibility_timeout_s: float = DEFAULT_VISIBILITY_TIMEOUT_S,
        max_deliveries: int = DEFAULT_MAX_DELIVERIES,
    ) -> ClusterTasks:
        """Create the queue's consumer group if needed, install the runner on `router` (see
        `Router.use_task_runner`) and start its workers. `ClusterError` when Redis does not answer."""
        runner = cls(
            router,
            client,
            node_id=node_id,
            keys=keys,
            stats=stats,
            visibility_timeout_s=visibility_timeout_s,
            max_deliveries=max_deliveries,
        )
        try:
            await runner._workers.ensure_group()
        except (RedisError, OSError) as exc:
            msg = f"cannot set up the cluster's task queue in Redis: {exc}; start Redis or fix its URL"
            raise ClusterError(msg) from exc
        await router.use_task_runner(runner)
        runner._workers.start()
        runner._listener = asyncio.get_running_loop().create_task(
            runner._listening(), name="reach cluster task events"
        )
        return runner

    @property
    def queued(self) -> int:
        """Entries in the cluster's queue (waiting or running), as last counted."""
        return self.stats.queue_depth

    @property
    def running(self) -> int:
        return len(self._workers.running)

    def reconfigure(self, policy: RoutingPolicy) -> None:
        self._policy = policy
        self._workers.policy = policy

    async def submit(
        self, message: ReachMessage, principal: str | None, callback_url: str | None
    ) -> TaskRecord:
        """Keep and queue the task in Redis before answering; a repeat of a kept one returns it."""
        check_callback_url(callback_url, self.notifier)
        record = TaskRecord(
            task_id=message.meta_info.task_id, message=message, principal=principal, callback_url=callback_url
        )
        # Noted before it is queued: its done event may come before the answer does.
        if self._hearing and len(self._accepted) < self._policy.task_queue_size:
            self._accepted[record.task_id] = principal
        try:
            held = await self._redis(
                self.store.enqueue(record, queue_bound=self._policy.task_queue_size),
                f"submit task {record.task_id!r} (it may have been kept: submit it again with the "
                "same task id)",
            )
        except BaseException:
            self._accepted.pop(record.task_id, None)
            raise
        if held is not None:  # another's task, or not queued
            self._accepted.pop(record.task_id, None)
        if held == QUEUE_FULL:
            msg = (
                f"the cluster's queue of async tasks is full ({self._policy.task_queue_size} entries); "
                "submit again later, or raise task_queue_size"
            )
            raise TaskQueueFullError(msg)
        if isinstance(held, TaskRecord):
            return repeated_task(held, message, principal)
        return record.model_copy()

    async def get(self, task_id: str, owner: str | None) -> TaskRecord:
        return owned(await self._redis(self.store.get(task_id), f"read task {task_id!r}"), task_id, owner)

    async def wait(self, task_id: str, owner: str | None, timeout: float | None) -> TaskRecord:
        """The task once finished (on any node), or as it stands after `timeout` seconds."""
        loop = asyncio.get_running_loop()
        end = None if timeout is None else loop.time() + timeout
        # Listening before the first read: a task finishing between the two is heard, not left
        # to the next poll.
        waiter = _Waiter()
        waiters = self._waiters.setdefault(task_id, set())
        waiters.add(waiter)
        try:
            # None: not finished, as this node heard (submitted here) or read; its event will tell.
            record = None if self._unheard(task_id, owner) else await self._if_finished(task_id, owner)
            while record is None or not record.finished:
                left = _POLL_S if end is None else min(_POLL_S, end - loop.time())
                if left <= 0:
                    if record is None:
                        record = await self.get(task_id, owner)
                    break
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(left):
                        await waiter.done.wait()
                waiter.done.clear()
                heard, waiter.record = waiter.record, None
                # The finished record came with the wake-up; else (a poll, an event without it) read it.
                record = owned(heard, task_id, owner) if heard is not None else await self.get(task_id, owner)
        finally:
            waiters.discard(waiter)
            if not waiters:
                self._waiters.pop(task_id, None)
        return record

    async def _if_finished(self, task_id: str, owner: str | None) -> TaskRecord | None:
        """The task's record if it has finished, else None; `UnknownTaskError` as `get` raises it.
        An unfinished record (the common case when a wait begins) is only glanced at, not decoded
        into a `TaskRecord`: what a wait returns comes with its done event."""
        raw = await self._redis(self.store.get_raw(task_id), f"read task {task_id!r}")
        if raw is None:
            return owned(None, task_id, owner)
        glance = orjson.loads(raw)
        if owner is not None and glance.get("principal") != owner:
            return owned(None, task_id, owner)
        if TaskStatus(glance["status"]).finished:
            return TaskRecord.model_validate_json(raw)
        return None

    def _unheard(self, task_id: str, owner: str | None) -> bool:
        """Whether `task_id` was submitted here (by `owner`, if given) and its done event is yet to come."""
        if task_id not in self._accepted:
            return False
        return owner is None or self._accepted[task_id] == owner

    async def dead_letters(self, owner: str | None, limit: int) -> list[dict[str, JsonValue]]:
        return await self._redis(self.store.dead_letters(owner, limit), "read the dead letters")

    async def list(self, owner: str | None, status: TaskStatus | None, limit: int) -> list[TaskRecord]:
        return await self._redis(self.store.list(principal=owner, status=status, limit=limit), "list tasks")

    async def cancel(self, task_id: str, owner: str | None) -> TaskRecord:
        """Cancel a queued task (it never runs) or a running one, on whichever node runs it."""
        record = await self.get(task_id, owner)
        check_cancellable(record)
        if record.status is TaskStatus.QUEUED:
            result = cancelled_result(record.message, running=False)
            finishing = self._workers.finish(record, result, None, only_from=TaskStatus.QUEUED, patient=False)
            if await self._redis(finishing, f"cancel task {task_id!r}"):
                return await self.get(task_id, owner)
            record = await self.get(task_id, owner)
            check_cancellable(record)
        local = self._workers.stop(task_id, CALLER)
        if local is not None:
            await asyncio.wait([local])
            return await self.get(task_id, owner)
        event = orjson.dumps({"op": "cancel", "task_id": task_id})
        await self._redis(self._client.publish(self._keys.task_events, event), f"cancel task {task_id!r}")
        # A live node answers within milliseconds; one that does not is gone or lost the message.
        record = await self.wait(task_id, owner, min(self.visibility_timeout_s, _CANCEL_WAIT_S))
        if not record.finished:
            # Its node did not answer (gone, or the message lost): end it here. Should that node
            # still run it, it drops the run when it sees the task finished.
            result = cancelled_result(record.message, running=record.status is not TaskStatus.DEFERRED)
            await self._redis(
                self._workers.finish(record, result, None, patient=False), f"cancel task {task_id!r}"
            )
        return await self.get(task_id, owner)

    async def aclose(self) -> None:
        """Stop this node's workers. Tasks running here are cut without a word to Redis: another
        node takes them over after the visibility timeout (again if safe to repeat, else as
        outcome unknown). Queued tasks stay queued for the other nodes; pending callbacks drop."""
        self._closed = True
        if self._listener is not None:
            self._listener.cancel()
            await asyncio.gather(self._listener, return_exceptions=True)
        await self._workers.aclose()
        for notifying in list(self._notifying):
            notifying.cancel()
        if self._notifying:
            await asyncio.wait(self._notifying)
        await self.store.aclose()

    # -- inside --------------------------------------------------------------------------------

    def _finished(self, record: TaskRecord) -> None:
        """This node finished `record`: wake its waiters here, send its callback."""
        self._accepted.pop(record.task_id, None)
        self._wake(record.task_id, record)
        if record.callback_url is not None and self.notifier is not None:
            notifying = asyncio.get_running_loop().create_task(notify(self.notifier, record))
            self._notifying.add(notifying)
            notifying.add_done_callback(self._notifying.discard)

    def _wake(self, task_id: str, record: TaskRecord | None) -> None:
        """Wake the waits for `task_id`, handing each its finished `record` when known."""
        for waiter in self._waiters.get(task_id, ()):
            waiter.record = None if record is None else record.model_copy()
            waiter.done.set()

    async def _listening(self) -> None:
        block = block_seconds(self._client)
        while not self._closed:
            # Subscribed on a RESP2 connection of its own: every node hears every task's event, and
            # each is one raw array read here, without the client's pub/sub round (whose RESP3 push
            # handler formats each message for a debug log).
            conn = direct_connection(self._client, protocol=2)
            try:
                await exchange(conn, reply_timeout_s(self._client), "SUBSCRIBE", self._keys.task_events)
                # Events may have been missed before: the tasks accepted here are read again.
                self._accepted.clear()
                self._hearing = True
                self._outage.ok(_EVENTS)
                while not self._closed:
                    # None when nothing came within `block` (the connection stays subscribed).
                    message = await conn.read_response(timeout=block, disconnect_on_error=False)
                    if message is not None and message[0] == b"message":
                        self._event(message[2])
            except (RedisError, OSError) as exc:
                self._hearing = False
                if self._closed:
                    return
                await asyncio.sleep(self._outage.failed(_EVENTS, exc))
            finally:
                await conn.disconnect()

    def _event(self, data: bytes) -> None:
        done = done_event(data)
        if done is not None:
            task_id, raw = done
            self._accepted.pop(task_id, None)
            if task_id in self._waiters:
                self._wake(task_id, _record(raw))
            return
        try:
            event = orjson.loads(data)
            op, task_id = event["op"], str(event["task_id"])
        except (ValueError, KeyError, TypeError):
            logger.warning("ignoring a malformed message on the task events channel: %.200r", data)
            return
        if op == "done":
            self._accepted.pop(task_id, None)
            if task_id in self._waiters:
                raw = event.get("record")
                self._wake(task_id, None if raw is None else _record(orjson.dumps(raw)))
        elif op == "cancel":
            self._workers.stop(task_id, CALLER)

    async def _redis(self, work: Awaitable[T], doing: str) -> T:
        """`work` for a caller, who gets `TasksUnavailableError` at once when Redis is out of reach."""
        try:
            return await work
        except (RedisError, OSError) as exc:
            msg = f"cannot {doing}: the cluster's Redis is out of reach ({exc}); try again later"
            raise TasksUnavailableError(msg) from exc


class _Waiter:
    """One `wait` for a task: woken by `done`, with the finished `record` when the wake-up brought it."""

    __slots__ = ("done", "record")

    def __init__(self) -> None:
        self.done = asyncio.Event()
        self.record: TaskRecord | None = None


def _record(raw: bytes) -> TaskRecord | None:
    """The finished record a done event carries, or None (not finished or unreadable: the waiter
    reads the record from Redis instead)."""
    try:
        record = TaskRecord.model_validate_json(raw)
    except ValidationError:
        logger.warning("ignoring the record of a done event on the task events channel: %.200r", raw)
        return None
    return record if record.finished else None
