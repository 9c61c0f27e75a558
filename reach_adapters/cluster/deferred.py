"""`ParkedRuns`: the tasks a node runs that wait deferred for a capable agent (``defer=True``).

Such a task stays the node's, as any task it runs: its queue entry pending for this node and
refreshed, so should the node stop, another takes it over after the visibility timeout and defers
it again there (a deferred task never reached an agent, so it is run again whatever its
capability). Its record says ``deferred`` in Redis meanwhile, and it holds no worker: the node
takes other tasks. Every node lists every node's agents, so the node holding it hears of a capable
agent joining anywhere, and delivers it there (see docs/cluster.md).
"""

from __future__ import annotations

import asyncio
import logging
from functools import partial

from redis.exceptions import RedisError

from reach_adapters.cluster.taskstore import RedisTaskStore
from reach_adapters.router.deferral import Parking
from reach_adapters.router.tasks import TaskRecord, TaskStatus

__all__ = ["ParkedRuns"]

logger = logging.getLogger(__name__)


class ParkedRuns:
    """The ids of this node's runs waiting deferred, and the `Parking` each run's dispatch uses."""

    def __init__(self, store: RedisTaskStore, slot: asyncio.Event) -> None:
        self.ids: set[str] = set()
        self._store = store
        # Set when a worker frees up: the node's task reader takes another task.
        self._slot = slot

    def __len__(self) -> int:
        return len(self.ids)

    def parking(self, record: TaskRecord) -> Parking:
        """How the run of `record` (the worker's own copy) is told it waits and goes on."""
        return Parking(
            record.task_id,
            partial(self._mark, record, TaskStatus.DEFERRED),
            partial(self._mark, record, TaskStatus.RUNNING),
        )

    def discard(self, task_id: str) -> None:
        self.ids.discard(task_id)

    async def _mark(self, record: TaskRecord, status: TaskStatus) -> None:
        record.status = status
        if status is TaskStatus.DEFERRED:
            self.ids.add(record.task_id)
            self._slot.set()
        else:
            self.ids.discard(record.task_id)
        try:
            await self._store.update(record)
        except (RedisError, OSError) as exc:
            # Only what the record shows is behind: the task waits, or goes on, here all the same.
            logger.warning("task %s: could not save its status %s in Redis: %s", record.task_id, status, exc)
