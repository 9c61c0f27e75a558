"""The async-task half of `Router`'s API: submit a task, follow it, wait for it, cancel it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Unpack

from pydantic import JsonValue

from reach_adapters.errors import InvalidDeclarationError
from reach_adapters.router.messages import build_message, require_name
from reach_adapters.router.options import CallOptions
from reach_adapters.router.policy import RoutingPolicy
from reach_adapters.router.portal import Portal
from reach_adapters.router.tasks.protocol import TaskRunner
from reach_adapters.router.tasks.records import TaskRecord, TaskStatus

__all__ = ["TaskCalls"]


class TaskCalls:
    """Mixed into `Router`, which holds what these methods use: its task runner, its portal for
    the sync twins, and its rules on who sees which tasks."""

    _tasks: TaskRunner
    _portal: Portal
    _check_open: Callable[[], None]
    owner_scope: Callable[[str | None], str | None]
    policy: RoutingPolicy

    @property
    def async_tasks(self) -> TaskRunner:
        """The runner of submitted tasks: its ``store``, and the ``notifier`` sending callbacks."""
        return self._tasks

    async def use_task_runner(self, runner: TaskRunner) -> None:
        """Run submitted tasks with `runner` from now on (a cluster's, keeping them in Redis).

        Refused with `InvalidDeclarationError` while the current runner has queued or running
        tasks: their work would be lost. Otherwise the current runner is closed; the finished
        tasks it kept are forgotten (the in-memory runner keeps them in this process only). The
        callback sender of the current runner goes on to `runner` unless it has its own.
        """
        self._check_open()
        current = self._tasks
        if current.queued or current.running:
            msg = (
                f"cannot change the task runner: {current.queued} task(s) queued and {current.running} "
                "running in the current one; install the new runner before submitting tasks"
            )
            raise InvalidDeclarationError(msg)
        runner.reconfigure(self.policy)
        if runner.notifier is None:
            runner.notifier = current.notifier
        self._tasks = runner
        await current.aclose()

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
        return await self._tasks.get(task_id, self.owner_scope(principal))

    async def wait(
        self, task_id: str, *, timeout: float | None = None, principal: str | None = None
    ) -> TaskRecord:
        """A submitted task once finished, or as it stands after `timeout` seconds."""
        return await self._tasks.wait(task_id, self.owner_scope(principal), timeout)

    async def cancel(self, task_id: str, *, principal: str | None = None) -> TaskRecord:
        """Cancel a queued or running task (status ``cancelled``); `TaskFinishedError` if it ended."""
        return await self._tasks.cancel(task_id, self.owner_scope(principal))

    async def list_tasks(
        self, *, status: TaskStatus | None = None, limit: int = 100, principal: str | None = None
    ) -> list[TaskRecord]:
        """Submitted tasks kept, newest first; for a `principal`, only its own (all for an admin)."""
        return await self._tasks.list(self.owner_scope(principal), status, limit)

    async def dead_letters(
        self, *, limit: int = 100, principal: str | None = None
    ) -> list[dict[str, JsonValue]]:
        """Tasks given up after too many deliveries (a cluster's queue), newest first; for a
        `principal`, only its own. The in-memory runner never gives a task up: always empty."""
        return await self._tasks.dead_letters(self.owner_scope(principal), limit)

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
