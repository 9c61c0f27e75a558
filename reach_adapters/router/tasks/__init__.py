"""Async tasks: submit, get a task id at once, poll, wait, cancel, or be called back."""

from reach_adapters.router.tasks.protocol import TaskRunner
from reach_adapters.router.tasks.records import TaskRecord, TaskStatus
from reach_adapters.router.tasks.runner import AsyncTasks, Notifier
from reach_adapters.router.tasks.signing import SIGNATURE_HEADER, sign_callback, verify_callback
from reach_adapters.router.tasks.store import MemoryTaskStore, TaskStore

__all__ = [
    "SIGNATURE_HEADER",
    "AsyncTasks",
    "MemoryTaskStore",
    "Notifier",
    "TaskRecord",
    "TaskRunner",
    "TaskStatus",
    "TaskStore",
    "sign_callback",
    "verify_callback",
]
