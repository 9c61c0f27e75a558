"""A2A tasks and push configs in the cluster's Redis, so any node answers ``GetTask``.

The SDK keeps tasks in process memory (or SQL, polled); a cluster of ``reach serve`` nodes behind
one address must answer a task's poll on whichever node the poll lands. Each task is one hash
(``{prefix}a2a:task:{id}``: its owner, state and the `Task` as protobuf bytes) living
``ttl_s`` after its last change, and one entry of an index by time for ``ListTasks``. A task's
first end state wins, decided in Redis: a cancel recorded by another node is not overwritten by
the late answer of the node that ran it.

Owners: a task belongs to the principal that created it; `Owners.scope` says whose tasks a caller
sees (None: every task, for an admin or a server without security).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import orjson
from a2a.server.context import ServerCallContext
from a2a.server.tasks import PushNotificationConfigStore, TaskStore
from a2a.server.tasks.push_notification_config_store import normalize_push_notification_config
from a2a.types.a2a_pb2 import ListTasksRequest, ListTasksResponse, Task, TaskPushNotificationConfig, TaskState
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InvalidParamsError
from google.protobuf import json_format

if TYPE_CHECKING:
    # Only the client's type: the store is handed a cluster node's client, never opens one.
    import redis.asyncio as redis

__all__ = ["Owners", "RedisA2ATaskStore", "RedisPushConfigStore"]

_TERMINAL = (
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_REJECTED,
)
# Index entries read per ListTasks: the newest; older tasks are listed by GetTask only.
_MAX_LISTED = 10_000

# KEYS: task hash, index. ARGV: owner, task bytes, state, terminal states (comma-separated), keep
# ms, task id, score. The first end state stays (0); else the task is written (1). The owner is
# the first writer's: a cancel by an admin does not take the task over.
_SAVE = """
local held = redis.call('HGET', KEYS[1], 'state')
if held and held ~= ARGV[3] and string.find(',' .. ARGV[4] .. ',', ',' .. held .. ',', 1, true) then
  return 0
end
redis.call('HSETNX', KEYS[1], 'owner', ARGV[1])
redis.call('HSET', KEYS[1], 'task', ARGV[2], 'state', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
redis.call('ZADD', KEYS[2], ARGV[7], ARGV[6])
return 1
"""


@dataclass(frozen=True, slots=True)
class Owners:
    """Who owns what a call writes (`owner`), and whose tasks it may read (`scope`, None: all)."""

    owner: Callable[[ServerCallContext], str]
    scope: Callable[[ServerCallContext], str | None]


class RedisA2ATaskStore(TaskStore):
    """The SDK's `TaskStore` on Redis, under the cluster's key `prefix`."""

    def __init__(self, client: redis.Redis, prefix: str, owners: Owners, *, ttl_s: float) -> None:
        self._client = client
        self._prefix = f"{prefix}a2a:"
        self._owners = owners
        self._keep_ms = max(int(ttl_s * 1000), 1)
        self._save = client.register_script(_SAVE)
        self._terminal = ",".join(str(int(state)) for state in _TERMINAL)

    def _key(self, task_id: str) -> str:
        return f"{self._prefix}task:{task_id}"

    @property
    def _index(self) -> str:
        return f"{self._prefix}tasks"

    async def save(self, task: Task, context: ServerCallContext) -> None:
        await self._save(
            keys=[self._key(task.id), self._index],
            args=[
                self._owners.owner(context),
                task.SerializeToString(),
                int(task.status.state),
                self._terminal,
                self._keep_ms,
                task.id,
                _score(task),
            ],
        )

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        owner, raw = cast(
            "list[bytes | None]", await self._client.hmget(self._key(task_id), ["owner", "task"])
        )
        return self._visible(owner, raw, self._owners.scope(context))

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        scope = self._owners.scope(context)
        ids = cast("list[bytes]", await self._client.zrevrange(self._index, 0, _MAX_LISTED - 1))
        async with self._client.pipeline(transaction=False) as pipe:
            for task_id in ids:
                pipe.hmget(self._prefix + "task:" + task_id.decode(), ["owner", "task"])
            rows = cast("list[list[bytes | None]]", await pipe.execute())
        gone = [task_id for task_id, (_, raw) in zip(ids, rows, strict=True) if raw is None]
        if gone:
            # Expired tasks leave their index entries behind; the listing sweeps them.
            await self._client.zrem(self._index, *gone)
        tasks = [task for owner, raw in rows if (task := self._visible(owner, raw, scope)) is not None]
        tasks = [task for task in tasks if _matches(task, params)]
        start = _offset(params.page_token)
        size = params.page_size or DEFAULT_LIST_TASKS_PAGE_SIZE
        page = tasks[start : start + size]
        more = start + size < len(tasks)
        return ListTasksResponse(
            tasks=page,
            next_page_token=str(start + size) if more else "",
            page_size=size,
            total_size=len(tasks),
        )

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        if await self.get(task_id, context) is None:
            return
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.delete(self._key(task_id))
            pipe.zrem(self._index, task_id)
            await pipe.execute()

    @staticmethod
    def _visible(owner: bytes | None, raw: bytes | None, scope: str | None) -> Task | None:
        if raw is None or (scope is not None and (owner or b"").decode() != scope):
            return None
        task = Task()
        task.ParseFromString(raw)
        return task


class RedisPushConfigStore(PushNotificationConfigStore):
    """Push configs per task in one hash (config id -> owner and config), kept as long as tasks,
    so the node running a task sends to a receiver registered on any node."""

    def __init__(self, client: redis.Redis, prefix: str, owners: Owners, *, ttl_s: float) -> None:
        self._client = client
        self._prefix = f"{prefix}a2a:push:"
        self._owners = owners
        self._keep_ms = max(int(ttl_s * 1000), 1)

    async def set_info(
        self, task_id: str, notification_config: TaskPushNotificationConfig, context: ServerCallContext
    ) -> TaskPushNotificationConfig:
        config = normalize_push_notification_config(task_id, notification_config)
        entry = {"owner": self._owners.owner(context), "config": json_format.MessageToDict(config)}
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.hset(self._prefix + task_id, config.id, orjson.dumps(entry))
            pipe.pexpire(self._prefix + task_id, self._keep_ms)
            await pipe.execute()
        return config

    async def get_info(self, task_id: str, context: ServerCallContext) -> list[TaskPushNotificationConfig]:
        scope = self._owners.scope(context)
        return [config for owner, config in await self._entries(task_id) if scope is None or owner == scope]

    async def get_info_for_dispatch(self, task_id: str) -> list[TaskPushNotificationConfig]:
        return [config for _, config in await self._entries(task_id)]

    async def delete_info(
        self, task_id: str, context: ServerCallContext, config_id: str | None = None
    ) -> None:
        mine = await self.get_info(task_id, context)
        ids = [config.id for config in mine if config_id is None or config.id == config_id]
        if ids:
            await self._client.hdel(self._prefix + task_id, *ids)

    async def _entries(self, task_id: str) -> list[tuple[str, TaskPushNotificationConfig]]:
        raw = cast("dict[bytes, bytes]", await self._client.hgetall(self._prefix + task_id))
        entries = []
        for value in raw.values():
            entry: dict[str, Any] = orjson.loads(value)
            config = json_format.ParseDict(entry["config"], TaskPushNotificationConfig())
            entries.append((str(entry["owner"]), config))
        return entries


def _score(task: Task) -> float:
    if task.status.HasField("timestamp"):
        return task.status.timestamp.ToNanoseconds() / 1e9
    return time.time()


def _matches(task: Task, params: ListTasksRequest) -> bool:
    if params.context_id and task.context_id != params.context_id:
        return False
    if params.status and task.status.state != params.status:
        return False
    if params.HasField("status_timestamp_after"):
        after = params.status_timestamp_after.ToNanoseconds()
        return task.status.HasField("timestamp") and task.status.timestamp.ToNanoseconds() >= after
    return True


def _offset(token: str) -> int:
    if not token:
        return 0
    if not token.isascii() or not token.isdigit():
        msg = f"invalid page token {token!r}: pass the next_page_token of the previous page"
        raise InvalidParamsError(message=msg)
    return int(token)
