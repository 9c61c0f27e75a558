"""The async-task half of `Router`'s API: submit a task, follow it, wait for it, cancel it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Unpack

from reach_adapters.router.messages import build_message, require_name
from reach_adapters.router.options import CallOptions
from reach_adapters.router.portal import Portal
from reach_adapters.router.tasks.records import TaskRecord, TaskStatus
from reach_adapters.router.tasks.runner import AsyncTasks

__all__ = ["TaskCalls"]


class TaskCalls:
    """Mixed into `Router`, which holds what these methods use: its task runner, its portal for
    the sync twins, and its rules on who sees which tasks."""

    _tasks: AsyncTasks
    _portal: Portal
    _check_open: Callable[[], None]
    _owner: Callable[[str | None], str | None]

    @property
    def async_tasks(self) -> AsyncTasks:
        """The runner of submitted tasks: its ``store``, and the ``notifier`` sending callbacks."""
        return self._tasks

    async def submit(
        self,
        capability: str,
        payload: Any = None,
        *,
        callback_url: str | None = None,
        **options: Unpack[CallOptions],
    ) -> TaskRecord:
        """`route` in the background: the task is answered at once (status ``queued``); follow it
        with `task`, `wait`, `cancel` or a `callback_url`. Raises `TaskQueueFullError` when
        ``policy.task_queue_size`` tasks wait already."""
        self._check_open()
        require_name(capability, "capability")
        message = build_message(payload, options, capability=capability, mode="unicast")
        return await self._tasks.submit(message, message.meta_info.principal, callback_url)

    async def task(self, task_id: str, *, principal: str | None = None) -> TaskRecord:
        """A submitted task as it stands; for a `principal`, only its own (all for an admin)."""
        return await self._tasks.get(task_id, self._owner(principal))

    async def wait(
        self, task_id: str, *, timeout: float | None = None, principal: str | None = None
    ) -> TaskRecord:
        """A submitted task once finished, or as it stands after `timeout` seconds."""
        return await self._tasks.wait(task_id, self._owner(principal), timeout)

    async def cancel(self, task_id: str, *, principal: str | None = None) -> TaskRecord:
        """Cancel a queued or running task (status ``cancelled``); `TaskFinishedError` if it ended."""
        return await self._tasks.cancel(task_id, self._owner(principal))

    async def list_tasks(
        self, *, status: TaskStatus | None = None, limit: int = 100, principal: str | None = None
    ) -> list[TaskRecord]:
        """Submitted tasks kept, newest first; for a `principal`, only its own (all for an admin)."""
        return await self._tasks.list(self._owner(principal), status, limit)

    def submit_sync(
        self,
        capability: str,
        payload: Any = None,
        *,
        callback_url: str | None = None,
        **options: Unpack[CallOptions],
    ) -> TaskRecord:
        return self._portal.call(
            self.submit(capability, payload, callback_url=callback_url, **options), method="submit_sync"
        )

    def task_sync(self, task_id: str, *, principal: str | None = None) -> TaskRecord:
        return self._portal.call(self.task(task_id, principal=principal), method="task_sync")

    def wait_sync(
        self, task_id: str, *, timeout: float | None = None, principal: str | None = None
    ) -> TaskRecord:
        return self._portal.call(self.wait(task_id, timeout=timeout, principal=principal), method="wait_sync")

    def cancel_sync(self, task_id: str, *, principal: str | None = None) -> TaskRecord:
        return self._portal.call(self.cancel(task_id, principal=principal), method="cancel_sync")
