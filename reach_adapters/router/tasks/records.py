"""What the router keeps of an async task: its request, where it stands, and its result."""

from __future__ import annotations

import time
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, JsonValue

from middleware import ReachMessage, ReachResult

__all__ = ["UNFINISHED", "TaskRecord", "TaskStatus"]


class TaskStatus(StrEnum):
    """``queued`` and ``running`` until the task ends (``deferred`` while it waits for a capable
    agent, with ``defer=True``); then the status of its `ReachResult`."""

    QUEUED = "queued"
    RUNNING = "running"
    DEFERRED = "deferred"
    OK = "ok"
    ERROR = "error"
    TIMEOUT = "timeout"
    REJECTED = "rejected"
    NO_CANDIDATE = "no_candidate"
    INVALID = "invalid"
    CANCELLED = "cancelled"
    PARTIAL = "partial"
    INPUT_REQUIRED = "input_required"
    NO_CONSENSUS = "no_consensus"

    @property
    def finished(self) -> bool:
        return self not in UNFINISHED


# The one list of where a task can stand before it ends: the Redis scripts and the CLI read it too.
UNFINISHED = frozenset({TaskStatus.QUEUED, TaskStatus.RUNNING, TaskStatus.DEFERRED})


class TaskRecord(BaseModel):
    """One submitted task. A pydantic model, so a shared store can keep it as JSON."""

    model_config = ConfigDict(extra="forbid")

    task_id: str
    message: ReachMessage = Field(description="The request, as it is dispatched.")
    status: TaskStatus = TaskStatus.QUEUED
    principal: str | None = Field(None, description="Who submitted it; only it (and admins) see it.")
    callback_url: str | None = Field(None, description="Where the finished task is POSTed, signed.")
    result: ReachResult | None = None
    created_at: float = Field(default_factory=time.time, description="Unix time, seconds.")
    started_at: float | None = None
    finished_at: float | None = None

    @property
    def finished(self) -> bool:
        return self.status.finished

    def to_dict(self) -> dict[str, JsonValue]:
        """What callers see (the API's body, a callback's): the request and its submitter stay inside."""
        return self.model_dump(mode="json", exclude={"message", "principal", "callback_url"}) | {
            "capability": self.message.meta_info.capability
        }
