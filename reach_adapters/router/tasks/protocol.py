"""`TaskRunner`: what the router and the gateway need of whatever runs submitted tasks.

The router's own runner (`AsyncTasks`) keeps them in this process; a cluster installs one that
keeps them in Redis (``reach_adapters.cluster.tasks``) with `Router.use_task_runner`. The core
never imports such a runner: it only knows this protocol.
"""

from __future__ import annotations

from typing import Protocol

from pydantic import JsonValue

from middleware import ReachMessage
from reach_adapters.router.policy import RoutingPolicy
from reach_adapters.router.tasks.records import TaskRecord, TaskStatus
from reach_adapters.router.tasks.runner import Notifier
from reach_adapters.router.tasks.store import TaskStore

__all__ = ["TaskRunner"]


class TaskRunner(Protocol):
    """Runs submitted tasks and keeps their records; `owner` None means every principal's."""

    notifier: Notifier | None
    """Sends a finished task to its ``callback_url``; the gateway sets it (signed, retried)."""

    @property
    def store(self) -> TaskStore:
        """Where the tasks are kept."""
        ...

    @property
    def queued(self) -> int:
        """Tasks waiting for a worker, as this runner last saw them."""
        ...

    @property
    def running(self) -> int:
        """Tasks this process runs now."""
        ...

    def reconfigure(self, policy: RoutingPolicy) -> None: ...

    async def submit(
        self, message: ReachMessage, principal: str | None, callback_url: str | None
    ) -> TaskRecord:
        """Keep the task (queued) and return at once; a repeat of a kept one returns it."""
        ...

    async def get(self, task_id: str, owner: str | None) -> TaskRecord: ...

    async def wait(self, task_id: str, owner: str | None, timeout: float | None) -> TaskRecord: ...

    async def dead_letters(self, owner: str | None, limit: int) -> list[dict[str, JsonValue]]:
        """Tasks given up after too many deliveries, newest first (a runner that never gives a
        task up has none)."""
        ...

    async def list(self, owner: str | None, status: TaskStatus | None, limit: int) -> list[TaskRecord]: ...

    async def cancel(self, task_id: str, owner: str | None) -> TaskRecord: ...

    async def aclose(self) -> None: ...
