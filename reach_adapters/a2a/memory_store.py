"""A2A tasks in this process's memory, for a server without the cluster's Redis.

The SDK's `InMemoryTaskStore` keeps every task for ever and shows each owner only its own, so a
long-running ``reach serve`` grew without end and an admin saw nobody else's tasks. This one keeps
a task ``ttl_s`` after its last change and `MAX_TASKS` at most (the oldest go first), and reads
through `Owners.scope` like the Redis store. It also holds the `Claims` of answers to
input-required tasks (one process: a set is enough).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from dataclasses import dataclass

from a2a.server.context import ServerCallContext
from a2a.server.tasks import TaskStore
from a2a.types.a2a_pb2 import ListTasksRequest, ListTasksResponse, Task

from reach_adapters.a2a.taskstore import MAX_TASKS, Owners, list_page, matches

__all__ = ["MemoryA2ATaskStore"]


@dataclass(slots=True)
class _Kept:
    owner: str
    task: Task
    until: float


class MemoryA2ATaskStore(TaskStore):
    """The SDK's `TaskStore` in memory, bounded in time and size (see the module).

    Everything runs on the event loop without awaiting in between, so no lock is needed.
    """

    def __init__(self, owners: Owners, *, ttl_s: float, max_tasks: int = MAX_TASKS) -> None:
        self._owners = owners
        self._ttl_s = ttl_s
        self._max_tasks = max_tasks
        # Oldest change first: expiry and eviction both take from the front.
        self._tasks: OrderedDict[str, _Kept] = OrderedDict()
        self._answering: set[str] = set()

    async def save(self, task: Task, context: ServerCallContext) -> None:
        now = time.monotonic()
        kept = self._tasks.pop(task.id, None)
        owner = self._owners.owner(context) if kept is None else kept.owner
        self._tasks[task.id] = _Kept(owner, _copy(task), now + self._ttl_s)
        self._expire(now)
        while len(self._tasks) > self._max_tasks:
            self._tasks.popitem(last=False)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        kept = self._live(task_id)
        if kept is None or not self._sees(kept, self._owners.scope(context)):
            return None
        return _copy(kept.task)

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        self._expire(time.monotonic())
        scope = self._owners.scope(context)
        tasks = [
            _copy(kept.task)
            for kept in reversed(self._tasks.values())
            if self._sees(kept, scope) and matches(kept.task, params)
        ]
        return list_page(tasks, params)

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        kept = self._live(task_id)
        if kept is not None and self._sees(kept, self._owners.scope(context)):
            del self._tasks[task_id]

    async def claim(self, task_id: str) -> bool:
        if task_id in self._answering:
            return False
        self._answering.add(task_id)
        return True

    async def release(self, task_id: str) -> None:
        self._answering.discard(task_id)

    def _live(self, task_id: str) -> _Kept | None:
        kept = self._tasks.get(task_id)
        if kept is not None and kept.until <= time.monotonic():
            del self._tasks[task_id]
            return None
        return kept

    @staticmethod
    def _sees(kept: _Kept, scope: str | None) -> bool:
        return scope is None or kept.owner == scope

    def _expire(self, now: float) -> None:
        while self._tasks:
            oldest = next(iter(self._tasks.values()))
            if oldest.until > now:
                return
            self._tasks.popitem(last=False)


def _copy(task: Task) -> Task:
    out = Task()
    out.CopyFrom(task)
    return out
