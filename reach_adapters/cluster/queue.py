"""`TaskWorkers`: a node's share of the cluster's task queue (a Redis stream, consumer group
``workers``, this node's id as consumer name).

Up to ``policy.task_workers`` tasks run here at once, taken with XREADGROUP and run through the
node's router. Every visibility_timeout/3 the node re-claims its running entries (XCLAIM JUSTID,
which resets their idle time), so only the entries of a node that stopped go idle; every node
then takes those over with XAUTOCLAIM. A task taken over is acked if it finished, run again if
it never started or is safe to repeat, finished as outcome-unknown when it was running and is not
(never run twice), and dead-lettered past `max_deliveries` (`TakeOver`).
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
import time
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from typing import Any, TypeVar

import orjson
import redis.asyncio as redis
from redis.exceptions import RedisError, ResponseError

from reach_adapters.cluster.deferred import ParkedRuns
from reach_adapters.cluster.outage import Outage
from reach_adapters.cluster.queue_reader import QueueReader
from reach_adapters.cluster.stats import NodeStats
from reach_adapters.cluster.takeover import TakeOver, text
from reach_adapters.cluster.taskstore import RedisTaskStore
from reach_adapters.errors import UnknownTaskError
from reach_adapters.router import ABANDONED, ReachResult, Router
from reach_adapters.router.deferral import PARKING
from reach_adapters.router.tasks import TaskRecord, TaskStatus
from reach_adapters.router.tasks.runner import cancelled_result, failed_in_router, run_decision

__all__ = ["CALLER", "TaskWorkers"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

CALLER = "caller"
CLOSING = "closing"
# Taken over by another node (this one was silent too long) or finished elsewhere: moot here.
LOST = "lost"
_EXPIRE_EVERY = 10
# The task reader's name in the outage (the others: ``keeper``, ``task ID`` per run).
_READER = "reader"

# KEYS: queue. ARGV: group, consumer, entry ids. Re-claims (resetting the idle time of) those
# entries still pending for this consumer, never one another node took over; returns them.
_REFRESH = """
local mine = {}
local claim = {'XCLAIM', KEYS[1], ARGV[1], ARGV[2], 0}
for i = 3, #ARGV do
  local pending = redis.call('XPENDING', KEYS[1], ARGV[1], ARGV[i], ARGV[i], 1, ARGV[2])
  if #pending > 0 then
    table.insert(mine, ARGV[i])
    table.insert(claim, ARGV[i])
  end
end
if #mine > 0 then
  table.insert(claim, 'JUSTID')
  redis.call(unpack(claim))
end
return mine
"""

# KEYS: queue. ARGV: group, consumer. Drops the consumer from the group (1) unless entries are
# still pending for it (0): those stay, for another node's XAUTOCLAIM.
_LEAVE = """
if #redis.call('XPENDING', KEYS[1], ARGV[1], '-', '+', 1, ARGV[2]) > 0 then return 0 end
redis.call('XGROUP', 'DELCONSUMER', KEYS[1], ARGV[1], ARGV[2])
return 1
"""


class _Run:
    """One task taken here. A stop before it delivers is a flag (a task cancelled before its
    first step would end without a word); while it delivers, its call is cancelled."""

    __slots__ = ("delivering", "entry_id", "queued", "started", "stopped", "task", "task_id")

    def __init__(self, entry_id: str, task_id: str, queued: bytes | None) -> None:
        self.entry_id = entry_id
        self.task_id = task_id
        # The record as its entry carries it (as queued), or None: read it from Redis.
        self.queued = queued
        self.task: asyncio.Task[None]
        self.started = False
        self.delivering = False
        self.stopped: str | None = None

    def stop(self, why: str) -> None:
        if self.stopped is not None:
            return
        self.stopped = why
        # Closing also cuts a run waiting on Redis; a lost or cancelled one only stops its call.
        # Only the caller's cancel undoes the work: a run lost to another node, or cut by a
        # closing node, is abandoned (its work stands, or is done again by the new owner).
        if (why == CLOSING and self.started) or self.delivering:
            self.task.cancel(None if why == CALLER else ABANDONED)


class TaskWorkers:
    """Takes, runs, keeps alive and takes over the entries of the task queue for one node."""

    def __init__(
        self,
        router: Router,
        client: redis.Redis,
        store: RedisTaskStore,
        *,
        node_id: str,
        stats: NodeStats,
        outage: Outage,
        visibility_timeout_s: float,
        max_deliveries: int,
        finished: Callable[[TaskRecord], None],
    ) -> None:
        self.policy = router.policy
        self.running: dict[str, _Run] = {}
        self._router = router
        self._client = client
        self._store = store
        self._keys = store.keys
        self._node_id = node_id
        self._stats = stats
        self._outage = outage
        self._visibility_s = visibility_timeout_s
        self._finished = finished
        self._reader = QueueReader(client, self._keys.task_queue, self._keys.task_group, node_id, self.ack)
        self._refresh = client.register_script(_REFRESH)
        self._leave = client.register_script(_LEAVE)
        self._takeover = TakeOver(
            self,
            client,
            store,
            router=router,
            node_id=node_id,
            stats=stats,
            visibility_timeout_s=visibility_timeout_s,
            max_deliveries=max_deliveries,
        )
        self._slot = asyncio.Event()
        self.parked = ParkedRuns(store, self._slot)
        self._loops: list[asyncio.Task[None]] = []
        self._closed = False

    async def ensure_group(self) -> None:
        """Create the consumer group (and the stream) unless it exists; from the stream's first
        entry, so tasks queued before any node read them are not skipped."""
        try:
            await self._client.xgroup_create(
                self._keys.task_queue, self._keys.task_group, id="0", mkstream=True
            )
        except ResponseError as exc:
            if "BUSYGROUP" not in str(exc):
                raise

    def start(self) -> None:
        self._spawn(self._reading(), "task reader")
        self._spawn(self._maintaining(), "task keeper")

    def _spawn(self, work: Coroutine[Any, Any, None], name: str) -> None:
        self._loops.append(asyncio.get_running_loop().create_task(work, name=f"reach cluster {name}"))

    def stop(self, task_id: str, why: str) -> asyncio.Task[None] | None:
        """Stop the run of `task_id` here, if this node runs it; its asyncio task to wait for."""
        run = self.running.get(task_id)
        if run is None:
            return None
        run.stop(why)
        return run.task

    async def aclose(self) -> None:
        """Stop taking tasks and cut the running ones without a word to Redis: their entries stay
        pending, and another node takes them over after the visibility timeout. Without such
        entries this node's consumer leaves the group (node ids change with each start by default:
        the group would gather one consumer per run)."""
        self._closed = True
        self._slot.set()
        for loop in self._loops:
            loop.cancel()
        await asyncio.gather(*self._loops, return_exceptions=True)
        await self._reader.aclose()
        runs = list(self.running.values())
        for run in runs:
            run.stop(CLOSING)
        if runs:
            await asyncio.wait([run.task for run in runs])
        try:
            await self._leave(keys=[self._keys.task_queue], args=[self._keys.task_group, self._node_id])
        except (RedisError, OSError) as exc:
            logger.warning(
                "node %s could not leave the task queue's consumer group (it stays listed): %s",
                self._node_id,
                exc,
            )

    # -- taking and running ----------------------------------------------------------------------

    async def _reading(self) -> None:
        while not self._closed:
            free = self.policy.task_workers - len(self.running) + len(self.parked)
            if free <= 0:
                self._slot.clear()
                await self._slot.wait()
                continue
            try:
                taken = await self._reader.read(free)
                self._outage.ok(_READER)
            except ResponseError as exc:
                # NOGROUP: Redis came back without the group (flushed, or no persistence).
                if "NOGROUP" in str(exc):
                    await self._guarded(_READER, self.ensure_group())
                    continue
                # Any other refusal (a failover's UNBLOCKED, READONLY on a replica) is an outage
                # too: the reader must outlive it, or the node stops taking tasks for good.
                if self._closed:
                    return
                await asyncio.sleep(self._outage.failed(_READER, exc))
                continue
            except (RedisError, OSError) as exc:
                if self._closed:
                    return
                await asyncio.sleep(self._outage.failed(_READER, exc))
                continue
            for entry_id, task_id, queued in taken:
                self.take(entry_id, task_id, queued)

    def take(self, entry_id: str, task_id: str, queued: bytes | None = None) -> None:
        """Run the task of entry `entry_id` here; `queued`: its record as the entry carries it
        (a fresh entry), else it is read from Redis (one taken over, whose record moved on)."""
        if task_id in self.running:
            logger.warning("task %s is queued twice; entry %s is left to be taken over", task_id, entry_id)
            return
        run = _Run(entry_id, task_id, queued)
        # A context of its own: nothing of the loop that read the entry belongs to the task.
        run.task = asyncio.get_running_loop().create_task(self._run(run), context=contextvars.Context())
        self.running[task_id] = run

    async def _run(self, run: _Run) -> None:
        run.started = True
        try:
            if run.stopped in (CLOSING, LOST):
                return
            retrying = partial(self._retrying, run.task_id)
            if run.queued is not None:
                # As queued: should it have been cancelled since, `start` finds it finished.
                record = TaskRecord.model_validate_json(run.queued)
            else:
                held = await retrying(partial(self._store.get, run.task_id))
                if held is None or held.finished:
                    await retrying(partial(self.ack, run.entry_id))
                    return
                record = held
            record.status = TaskStatus.RUNNING
            record.started_at = time.time()
            started = await retrying(partial(self._store.start, record, run.entry_id, self._node_id))
            if started == 0:
                await retrying(partial(self.ack, run.entry_id))
            if started != 1:
                return
            result = await self._deliver(run, record)
            if result is None:
                return
            self._stats.tasks_run += 1
            await self.finish(record, result, run.entry_id)
        finally:
            self.running.pop(run.task_id, None)
            self.parked.discard(run.task_id)
            self._slot.set()

    async def _deliver(self, run: _Run, record: TaskRecord) -> ReachResult | None:
        """The task's result, or None when this node let go of it (closing, or taken over)."""
        if run.stopped == CALLER:
            return cancelled_result(record.message, running=False)
        run.delivering = True
        if record.message.routing_hint.defer:
            PARKING.set(self.parked.parking(record))
        try:
            return await self._router.dispatch(record.message)
        except asyncio.CancelledError:
            if run.stopped == CALLER:
                # The record this run left names the agent that may have done the work.
                try:
                    decision = run_decision(self._router.explain(record.task_id), record)
                except UnknownTaskError:
                    decision = None
                running = record.status is not TaskStatus.DEFERRED
                return cancelled_result(record.message, running=running, decision=decision)
            if run.stopped is not None:
                return None
            raise
        except Exception as exc:  # noqa: BLE001 - logged there, with its traceback
            return failed_in_router(record, exc)
        finally:
            run.delivering = False

    async def finish(
        self,
        record: TaskRecord,
        result: ReachResult,
        entry_id: str | None,
        *,
        dead_letter: dict[str, Any] | None = None,
        only_from: TaskStatus | None = None,
        patient: bool = True,
    ) -> bool:
        """Finish the task with `result` in Redis; whether this node finished it (not another
        first). `patient`: wait out an outage (a worker's result is only here), else raise."""
        record.status = TaskStatus(result.status.value)
        record.result = result
        record.finished_at = time.time()
        finishing = partial(
            self._store.finish,
            record,
            keep_s=self.policy.task_result_ttl_s,
            entry_id=entry_id,
            dead_letter=dead_letter,
            dead_kept=self.policy.task_max_kept,
            only_from=only_from,
        )
        won = await (self._retrying(record.task_id, finishing) if patient else finishing())
        if won:
            self._finished(record)
        return won

    async def ack(self, entry_id: str) -> None:
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.xack(self._keys.task_queue, self._keys.task_group, entry_id)
            pipe.xdel(self._keys.task_queue, entry_id)
            await pipe.execute()

    # -- keeping entries alive, taking over others' ----------------------------------------------

    async def _maintaining(self) -> None:
        ticks = 0
        while not self._closed:
            await asyncio.sleep(self._visibility_s / 3)
            ticks += 1
            await self._guarded("keeper", self._maintain(expire=ticks % _EXPIRE_EVERY == 1))

    async def _maintain(self, *, expire: bool) -> None:
        await self._refresh_own()
        await self._takeover.reclaim()
        async with self._client.pipeline(transaction=False) as pipe:
            pipe.xlen(self._keys.task_queue)
            pipe.xlen(self._keys.dead_letters)
            self._stats.queue_depth, self._stats.dead_letters_kept = await pipe.execute()
        if expire:
            await self._store.expire(self.policy.task_max_kept)

    async def _refresh_own(self) -> None:
        runs = [run for run in self.running.values() if run.started]
        if not runs:
            return
        keys = self._keys
        mine = {
            text(entry_id)
            for entry_id in await self._refresh(
                keys=[keys.task_queue], args=[keys.task_group, self._node_id, *(run.entry_id for run in runs)]
            )
        }
        raws = await self._client.mget([keys.task(run.task_id) for run in runs])
        for run, raw in zip(runs, raws, strict=True):
            ended = raw is None or TaskStatus(orjson.loads(raw)["status"]).finished
            if run.delivering and (run.entry_id not in mine or ended):
                logger.warning(
                    "node %s: task %s was finished or taken over elsewhere (this node may have been "
                    "silent past the %.1f s visibility timeout); its run here is dropped",
                    self._node_id,
                    run.task_id,
                    self._visibility_s,
                )
                run.stop(LOST)

    # -- outages -----------------------------------------------------------------------------------

    async def _guarded(self, loop: str, work: Coroutine[Any, Any, None]) -> None:
        """One round of background work of `loop`; a Redis failure is noted and waited out."""
        if not await self._outage.guarded(loop, work) and not self._closed:
            await asyncio.sleep(self._outage.pause(loop) or 0.0)

    async def _retrying(self, task_id: str, work: Callable[[], Awaitable[T]]) -> T:
        """`work` for task `task_id`, tried until Redis answers: a run's steps wait out an outage
        (closing cuts them); each task is a loop of its own in the outage."""
        loop = f"task {task_id}"
        while True:
            try:
                done = await work()
            except (RedisError, OSError) as exc:
                await asyncio.sleep(self._outage.failed(loop, exc))
                continue
            self._outage.ok(loop)
            return done
