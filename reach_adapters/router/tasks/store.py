"""Where async tasks are kept: the `TaskStore` protocol, and the in-memory store of one process.

A store only keeps records; running them is the `AsyncTasks` runner's work. A store shared by
several routers (Redis) implements the same protocol.
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable
from typing import Protocol

from reach_adapters.router.tasks.records import TaskRecord, TaskStatus

__all__ = ["MemoryTaskStore", "TaskStore"]


class TaskStore(Protocol):
    async def create(self, record: TaskRecord) -> TaskRecord | None:
        """Keep a new task; when its id is taken, keep nothing and return the task holding it."""
        ...

    async def get(self, task_id: str) -> TaskRecord | None:
        """The task, or None when it is unknown or was forgotten."""
        ...

    async def save(self, record: TaskRecord, *, keep_s: float | None = None) -> None:
        """Store the task's new status and result; a finished one is forgotten `keep_s` later."""
        ...

    async def list(self, *, principal: str | None, status: TaskStatus | None, limit: int) -> list[TaskRecord]:
        """The newest tasks first, at most `limit`: those of `principal` (None: everyone's), with
        `status` if given."""
        ...

    async def expire(self, max_finished: int) -> int:
        """Forget finished tasks past their time, and the oldest beyond `max_finished`; how many."""
        ...


class MemoryTaskStore:
    """Tasks in this process's memory: lost when it stops.

    Records are handed out as copies, so a caller holding one cannot change what is kept.
    """

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._tasks: dict[str, TaskRecord] = {}
        # Finished tasks in the order they finished, with the time each is forgotten.
        self._forget: OrderedDict[str, float] = OrderedDict()

    async def create(self, record: TaskRecord) -> TaskRecord | None:
        held = self._tasks.get(record.task_id)
        if held is not None:
            return held.model_copy()
        self._tasks[record.task_id] = record.model_copy()
        return None

    async def get(self, task_id: str) -> TaskRecord | None:
        self._sweep()
        record = self._tasks.get(task_id)
        return None if record is None else record.model_copy()

    async def save(self, record: TaskRecord, *, keep_s: float | None = None) -> None:
        self._tasks[record.task_id] = record.model_copy()
        if record.finished:
            self._forget.pop(record.task_id, None)
            self._forget[record.task_id] = self._clock() + (keep_s if keep_s is not None else 0.0)

    async def list(self, *, principal: str | None, status: TaskStatus | None, limit: int) -> list[TaskRecord]:
        self._sweep()
        found: list[TaskRecord] = []
        for record in reversed(self._tasks.values()):
            if len(found) >= limit:
                break
            if (principal is None or record.principal == principal) and status in (None, record.status):
                found.append(record.model_copy())
        return found

    async def expire(self, max_finished: int) -> int:
        dropped = self._sweep()
        forget = self._forget
        while len(forget) > max_finished:
            task_id = next(iter(forget))
            del forget[task_id]
            self._tasks.pop(task_id, None)
            dropped += 1
        return dropped

    def _sweep(self) -> int:
        """Forget the finished tasks whose time is up, so none is read past it; how many."""
        now = self._clock()
        forget = self._forget
        dropped = 0
        while forget:
            task_id, at = next(iter(forget.items()))
            if at > now:
                break
            del forget[task_id]
            self._tasks.pop(task_id, None)
            dropped += 1
        return dropped
