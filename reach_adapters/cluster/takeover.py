"""`TakeOver`: the entries of the task queue whose node went silent, taken over by this node.

Every node XAUTOCLAIMs the entries idle past the visibility timeout (a live node refreshes its own
every third of it, `TaskWorkers`) and decides each one: acked if its task finished, run again if it
never started or is safe to repeat, finished as outcome-unknown when it was running and is not
(never run twice), and dead-lettered past `max_deliveries`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, Protocol

import redis.asyncio as redis

from reach_adapters.cluster.stats import NodeStats
from reach_adapters.cluster.taskstore import RedisTaskStore
from reach_adapters.router import Fault, ReachResult, ResultStatus, Router, error_result
from reach_adapters.router.outcomes import UNKNOWN_OUTCOME
from reach_adapters.router.policy import RoutingPolicy
from reach_adapters.router.tasks import TaskRecord, TaskStatus

__all__ = ["DEAD_LETTER", "OUTCOME_UNKNOWN", "TakeOver", "drop_foreign", "text"]

logger = logging.getLogger(__name__)

# The error_type of tasks the queue ended itself.
OUTCOME_UNKNOWN = "OutcomeUnknown"
DEAD_LETTER = "DeadLetter"


class _Workers(Protocol):
    """What a take-over needs of the node's `TaskWorkers`."""

    @property
    def policy(self) -> RoutingPolicy: ...

    @property
    def running(self) -> Mapping[str, object]: ...

    def take(self, entry_id: str, task_id: str) -> None: ...

    async def ack(self, entry_id: str) -> None: ...

    async def finish(
        self,
        record: TaskRecord,
        result: ReachResult,
        entry_id: str | None,
        *,
        dead_letter: dict[str, Any] | None = None,
    ) -> bool: ...


class TakeOver:
    """The take-over half of a node's `TaskWorkers`: reclaims, re-runs, ends or dead-letters."""

    def __init__(
        self,
        workers: _Workers,
        client: redis.Redis,
        store: RedisTaskStore,
        *,
        router: Router,
        node_id: str,
        stats: NodeStats,
        visibility_timeout_s: float,
        max_deliveries: int,
    ) -> None:
        self._workers = workers
        self._client = client
        self._store = store
        self._keys = store.keys
        self._router = router
        self._node_id = node_id
        self._stats = stats
        self._visibility_s = visibility_timeout_s
        self._max_deliveries = max_deliveries
        self._reclaim_from = "0-0"

    async def reclaim(self) -> None:
        """Take over (at most as many as this node has free slots) entries idle past the
        visibility timeout: their nodes stopped refreshing them."""
        keys = self._keys
        free = max(self._workers.policy.task_workers - len(self._workers.running), 1)
        reply = await self._client.xautoclaim(
            keys.task_queue,
            keys.task_group,
            self._node_id,
            min_idle_time=int(self._visibility_s * 1000),
            start_id=self._reclaim_from,
            count=free,
        )
        self._reclaim_from = text(reply[0])
        for entry_id, fields in reply[1]:
            task_id = fields.get(b"t") if fields else None
            if task_id is not None:
                self._stats.tasks_reclaimed += 1
                await self._taken_over(text(entry_id), text(task_id))
            elif fields:
                # Not a node's entry (no task id): it would be claimed again every round.
                await drop_foreign(self._workers.ack, keys.task_queue, text(entry_id))

    async def _taken_over(self, entry_id: str, task_id: str) -> None:
        keys = self._keys
        pending = await self._client.xpending_range(keys.task_queue, keys.task_group, entry_id, entry_id, 1)
        deliveries = int(pending[0]["times_delivered"]) if pending else 1
        record = await self._store.get(task_id)
        if record is None or record.finished:
            await self._workers.ack(entry_id)
        elif deliveries > self._max_deliveries:
            await self._dead_letter(record, entry_id, deliveries)
        elif record.status is TaskStatus.RUNNING and not self._safe_to_repeat(record):
            capability = record.message.meta_info.capability
            error = (
                f"the node running it stopped (silent past the {self._visibility_s:g} s visibility "
                f"timeout), and capability {capability!r} is not safe to repeat (neither idempotent nor "
                f"read-only), so it was not run again; {UNKNOWN_OUTCOME}"
            )
            result = error_result(
                record.message, ResultStatus.ERROR, OUTCOME_UNKNOWN, error, fault=Fault.ROUTER, delivered=True
            )
            if await self._workers.finish(record, result, entry_id):
                self._stats.tasks_outcome_unknown += 1
        elif task_id not in self._workers.running:
            self._stats.tasks_redelivered += 1
            self._workers.take(entry_id, task_id)

    async def _dead_letter(self, record: TaskRecord, entry_id: str, deliveries: int) -> None:
        letter = {
            "task_id": record.task_id,
            "capability": record.message.meta_info.capability,
            "deliveries": deliveries,
            "status": record.status.value,
            "node": self._node_id,
            "dead_at": time.time(),
            "principal": record.principal,
        }
        error = (
            f"given up after {deliveries} deliveries (max_deliveries {self._max_deliveries}): each node "
            "that took it stopped before finishing it; it is kept among the dead letters "
            "(GET /api/tasks?status=dead_letter)"
        )
        ran = record.status is TaskStatus.RUNNING
        result = error_result(
            record.message, ResultStatus.ERROR, DEAD_LETTER, error, fault=Fault.ROUTER, delivered=ran
        )
        if await self._workers.finish(record, result, entry_id, dead_letter=letter):
            self._stats.tasks_dead_lettered += 1

    def _safe_to_repeat(self, record: TaskRecord) -> bool:
        """Whether the capability, as this node knows it, may run twice; unknown: not."""
        name = record.message.meta_info.capability
        declared = self._router.declarations().get(name) if name else None
        return declared is not None and declared.safe_to_repeat


def text(value: bytes | str) -> str:
    """A reply's id or field as text (the client returns bytes)."""
    return value.decode() if isinstance(value, bytes) else value


async def drop_foreign(ack: Callable[[str], Awaitable[None]], stream: str, entry_id: str) -> None:
    """Drop entry `entry_id` of task queue `stream`, which something other than a node wrote (it
    carries no task id), with `ack` (`TaskWorkers.ack`), and say so: left pending, it would come
    back at every take-over."""
    logger.warning("task queue %s: entry %s carries no task id; dropped", stream, entry_id)
    await ack(entry_id)
