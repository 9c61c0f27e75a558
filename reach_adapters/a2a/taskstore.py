"""A2A tasks and push configs in the cluster's Redis, so any node answers ``GetTask``.

The SDK keeps tasks in process memory (or SQL, polled); a cluster of ``reach serve`` nodes behind
one address must answer a task's poll on whichever node the poll lands. Each task is one hash
(``{prefix}a2a:task:{id}``: its owner, state and the `Task` as protobuf bytes) living
``ttl_s`` after its last change, and an entry in two indexes by last change for ``ListTasks``:
every task's (``{prefix}a2a:tasks``, what an admin lists) and its owner's
(``{prefix}a2a:tasks:{owner}``, what a principal lists, so it never reads the others'). Each save
trims both to the tasks changed within ``ttl_s`` and to the newest `MAX_TASKS`. A task's first end
state wins, decided in Redis: a cancel recorded by another node is not overwritten by the late
answer of the node that ran it, and a cancel arriving after another end is refused
(`ConcurrentTaskModificationError`, which the SDK answers as "not cancelable").

Owners: a task belongs to the principal that created it; `Owners.scope` says whose tasks a caller
sees (None: every task, for an admin or a server without security).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

import orjson
from a2a.server.cluster.task_store import ConcurrentTaskModificationError
from a2a.server.context import ServerCallContext
from a2a.server.tasks import PushNotificationConfigStore, TaskStore
from a2a.server.tasks.push_notification_config_store import normalize_push_notification_config
from a2a.types.a2a_pb2 import ListTasksRequest, ListTasksResponse, Task, TaskPushNotificationConfig
from a2a.utils.constants import DEFAULT_LIST_TASKS_PAGE_SIZE
from a2a.utils.errors import InvalidParamsError
from google.protobuf import json_format

from reach_adapters.a2a.states import TERMINAL

if TYPE_CHECKING:
    # Only the client's type: the store is handed a cluster node's client, never opens one.
    import redis.asyncio as redis

__all__ = [
    "MAX_TASKS",
    "Owners",
    "RedisA2ATaskStore",
    "RedisPushConfigStore",
    "list_page",
    "matches",
    "page_offset",
]

# Tasks an index (or a node's memory) keeps at most: the newest; older ones are dropped.
MAX_TASKS = 10_000
# How long an answer's claim outlives a node that died holding it.
_CLAIM_MS = 60_000

# KEYS: task hash, index of all tasks. ARGV: owner, task bytes, state, terminal states (comma-
# separated), keep ms, task id, owner index prefix, most entries per index. The first end state
# stays (0); else the task is written (1). The owner is the first writer's: a cancel by an admin
# does not take the task over, and the task stays in its owner's index. Indexes are scored by
# Redis's clock, so every node trims them alike.
_SAVE = """
local held = redis.call('HGET', KEYS[1], 'state')
if held and held ~= ARGV[3] and string.find(',' .. ARGV[4] .. ',', ',' .. held .. ',', 1, true) then
  return 0
end
redis.call('HSETNX', KEYS[1], 'owner', ARGV[1])
redis.call('HSET', KEYS[1], 'task', ARGV[2], 'state', ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[5])
local now = redis.call('TIME')
local score = tonumber(now[1]) * 1000 + math.floor(tonumber(now[2]) / 1000)
local stale = score - tonumber(ARGV[5])
local owner = redis.call('HGET', KEYS[1], 'owner')
for _, index in ipairs({KEYS[2], ARGV[7] .. owner}) do
  redis.call('ZADD', index, score, ARGV[6])
  redis.call('ZREMRANGEBYSCORE', index, '-inf', '(' .. stale)
  redis.call('ZREMRANGEBYRANK', index, 0, -tonumber(ARGV[8]) - 1)
  redis.call('PEXPIRE', index, ARGV[5])
end
return 1
"""


@dataclass(frozen=True, slots=True)
class Owners:
    """Who owns what a call writes (`owner`), and whose tasks it may read (`scope`, None: all)."""

    owner: Callable[[ServerCallContext], str]
    scope: Callable[[ServerCallContext], str | None]


class RedisA2ATaskStore(TaskStore):
    """The SDK's `TaskStore` on Redis, under the cluster's key `prefix`; also the `Claims` of
    answers to input-required tasks, so two nodes do not resume one task twice."""

    def __init__(
        self, client: redis.Redis, prefix: str, owners: Owners, *, ttl_s: float, max_tasks: int = MAX_TASKS
    ) -> None:
        self._client = client
        self._prefix = f"{prefix}a2a:"
        self._owners = owners
        self._keep_ms = max(int(ttl_s * 1000), 1)
        self._max_tasks = max_tasks
        self._save = client.register_script(_SAVE)
        self._terminal = ",".join(str(int(state)) for state in sorted(TERMINAL))

    def _key(self, task_id: str) -> str:
        return f"{self._prefix}task:{task_id}"

    def _index(self, owner: str | None) -> str:
        return f"{self._prefix}tasks" if owner is None else f"{self._prefix}tasks:{owner}"

    async def save(self, task: Task, context: ServerCallContext) -> None:
        written = await self._save(
            keys=[self._key(task.id), self._index(None)],
            args=[
                self._owners.owner(context),
                task.SerializeToString(),
                int(task.status.state),
                self._terminal,
                self._keep_ms,
                task.id,
                self._index(""),
                self._max_tasks,
            ],
        )
        if not written:
            # Another end was recorded first (a cancel on another node, or the reach's own end):
            # the SDK re-reads the task, and a cancel answers "not cancelable".
            raise ConcurrentTaskModificationError(task.id)

    async def get(self, task_id: str, context: ServerCallContext) -> Task | None:
        owner, raw = cast(
            "list[bytes | None]", await self._client.hmget(self._key(task_id), ["owner", "task"])
        )
        return self._visible(owner, raw, self._owners.scope(context))

    async def list(self, params: ListTasksRequest, context: ServerCallContext) -> ListTasksResponse:
        scope = self._owners.scope(context)
        index = self._index(scope)
        start = page_offset(params.page_token)
        size = params.page_size or DEFAULT_LIST_TASKS_PAGE_SIZE
        if not _filtered(params):
            # The page alone is read: the index is in listing order already.
            ids = cast("list[bytes]", await self._client.zrevrange(index, start, start + size - 1))
            tasks = await self._read(index, ids, scope)
            total = await self._client.zcard(index)
            return _response(tasks, start, size, total)
        ids = cast("list[bytes]", await self._client.zrevrange(index, 0, -1))
        tasks = [task for task in await self._read(index, ids, scope) if matches(task, params)]
        return list_page(tasks, params)

    async def _read(self, index: str, ids: Sequence[bytes], scope: str | None) -> Sequence[Task]:
        async with self._client.pipeline(transaction=False) as pipe:
            for task_id in ids:
                pipe.hmget(self._key(task_id.decode()), ["owner", "task"])
            rows = cast("list[list[bytes | None]]", await pipe.execute())
        gone = [task_id for task_id, (_, raw) in zip(ids, rows, strict=True) if raw is None]
        if gone:
            # Tasks expire before the next save trims their index entries; a read sweeps them.
            await self._client.zrem(index, *gone)
        return [task for owner, raw in rows if (task := self._visible(owner, raw, scope)) is not None]

    async def delete(self, task_id: str, context: ServerCallContext) -> None:
        owner = cast("bytes | None", await self._client.hget(self._key(task_id), "owner"))
        if await self.get(task_id, context) is None:
            return
        async with self._client.pipeline(transaction=True) as pipe:
            pipe.delete(self._key(task_id))
            pipe.zrem(self._index(None), task_id)
            pipe.zrem(self._index((owner or b"").decode()), task_id)
            await pipe.execute()

    async def claim(self, task_id: str) -> bool:
        key = f"{self._prefix}answer:{task_id}"
        return bool(await self._client.set(key, b"1", nx=True, px=_CLAIM_MS))

    async def release(self, task_id: str) -> None:
        await self._client.delete(f"{self._prefix}answer:{task_id}")

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


def list_page(tasks: Sequence[Task], params: ListTasksRequest) -> ListTasksResponse:
    """One page of `tasks` (newest first, already filtered) as `params` asks."""
    start = page_offset(params.page_token)
    size = params.page_size or DEFAULT_LIST_TASKS_PAGE_SIZE
    return _response(tasks[start : start + size], start, size, len(tasks))


def _response(page: Sequence[Task], start: int, size: int, total: int) -> ListTasksResponse:
    more = start + size < total
    return ListTasksResponse(
        tasks=page, next_page_token=str(start + size) if more else "", page_size=size, total_size=total
    )


def _filtered(params: ListTasksRequest) -> bool:
    return bool(params.context_id or params.status or params.HasField("status_timestamp_after"))


def matches(task: Task, params: ListTasksRequest) -> bool:
    """Whether `task` passes the filters of a ``ListTasks`` call."""
    if params.context_id and task.context_id != params.context_id:
        return False
    if params.status and task.status.state != params.status:
        return False
    if params.HasField("status_timestamp_after"):
        after = params.status_timestamp_after.ToNanoseconds()
        return task.status.HasField("timestamp") and task.status.timestamp.ToNanoseconds() >= after
    return True


def page_offset(token: str) -> int:
    """Where a page starts: the `next_page_token` of the page before, or 0."""
    if not token:
        return 0
    if not token.isascii() or not token.isdigit():
        msg = f"invalid page token {token!r}: pass the next_page_token of the previous page"
        raise InvalidParamsError(message=msg)
    return int(token)
