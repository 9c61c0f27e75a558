"""`RedisTaskStore`: async task records in the cluster's Redis, shared by every node.

One key per task (``{prefix}task:{id}``, the `TaskRecord` as JSON, given ``PX task_result_ttl_s``
once finished) and an index ZSET by submit time for listing. Every change of status that can
race with another node is one Lua script, so it is all or nothing and decided in Redis: the
record and its queue entry are written together (`enqueue`), a task starts only while unfinished
(`start`), and the first node to finish it wins (`finish`), acking its entry in the same step.
Records are encoded in Python only (Lua's cjson would round the times).
"""

from __future__ import annotations

from typing import Any, cast

import orjson
import redis.asyncio as redis

from reach_adapters.cluster.batching import ScriptBatch
from reach_adapters.cluster.records import Keys
from reach_adapters.router.tasks import TaskRecord, TaskStatus
from reach_adapters.router.tasks.records import UNFINISHED

__all__ = ["QUEUE_FULL", "RedisTaskStore", "done_event"]

QUEUE_FULL = "queue full"
# Index entries looked at per `expire`: the oldest, where forgotten tasks gather.
_EXPIRE_BATCH = 500
_LIST_BATCH = 200

_Letters = list[dict[str, Any]]

# A done event: _DONE, the task id as a JSON string, _RECORD, the finished record, "}".
_DONE = b'{"op":"done","task_id":'
_RECORD = b',"record":'

_UNFINISHED_LUA = f"""
local function unfinished(raw)
  local status = cjson.decode(raw)['status']
  return {" or ".join(f"status == '{status}'" for status in sorted(UNFINISHED))}
end
"""

# KEYS: record, index, queue. ARGV: record JSON, created_at, task id, queue bound (0: none),
# enqueue (1/0). Returns {0, held} when the id is taken, {1} when the queue is full, {2} when kept.
# The entry carries the record as queued (field r): the worker taking it needs no read of its own,
# and `start` checks in Redis that the task is still unfinished.
_ENQUEUE = """
local held = redis.call('GET', KEYS[1])
if held then return {0, held} end
local bound = tonumber(ARGV[4])
if bound > 0 and redis.call('XLEN', KEYS[3]) >= bound then return {1} end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
if ARGV[5] == '1' then redis.call('XADD', KEYS[3], '*', 't', ARGV[3], 'r', ARGV[1]) end
return {2}
"""

# KEYS: record. ARGV: record JSON. Sets it only while the task is unfinished; 1, or 0.
_UPDATE = (
    _UNFINISHED_LUA
    + """
local held = redis.call('GET', KEYS[1])
if not held or not unfinished(held) then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
return 1
"""
)

# KEYS: record, queue. ARGV: record JSON, group, entry id, consumer. The run starts (1) only while
# the task is unfinished (else 0: its entry may be acked) and its entry is still this consumer's
# (else -1: a node that stalled past the visibility timeout finds its entry taken over, and must
# neither run the task beside its new owner nor ack the entry from under it).
_START = (
    _UNFINISHED_LUA
    + """
local pending = redis.call('XPENDING', KEYS[2], ARGV[2], ARGV[3], ARGV[3], 1)
if #pending == 0 or pending[1][2] ~= ARGV[4] then return -1 end
local held = redis.call('GET', KEYS[1])
if not held or not unfinished(held) then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
return 1
"""
)

# KEYS: record, queue, events, dead letters. ARGV: record JSON, keep ms, group, entry id ('' for
# none), event head, dead letter ('' for none), dead letters kept, required status ('' for any
# unfinished). The record is set (and the dead letter kept) only while the task is unfinished and
# in the required status (1, else 0); the entry is acked and deleted either way: its task ended.
# The done event carries the finished record (head .. record .. '}'): a wait on any node answers
# from it, without a read of its own.
_FINISH = (
    _UNFINISHED_LUA
    + """
local held = redis.call('GET', KEYS[1])
local won = 0
if held and unfinished(held) and (ARGV[8] == '' or cjson.decode(held)['status'] == ARGV[8]) then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  redis.call('PUBLISH', KEYS[3], ARGV[5] .. ARGV[1] .. '}')
  if ARGV[6] ~= '' then
    redis.call('XADD', KEYS[4], 'MAXLEN', '~', ARGV[7], '*', 'd', ARGV[6])
  end
  won = 1
end
if ARGV[4] ~= '' then
  redis.call('XACK', KEYS[2], ARGV[3], ARGV[4])
  redis.call('XDEL', KEYS[2], ARGV[4])
end
return won
"""
)


class RedisTaskStore:
    """The `TaskStore` of a cluster; the runner (`ClusterTasks`) uses its atomic steps."""

    def __init__(self, client: redis.Redis, keys: Keys) -> None:
        self._client = client
        self.keys = keys
        self._enqueue = client.register_script(_ENQUEUE)
        self._start = client.register_script(_START)
        self._update = client.register_script(_UPDATE)
        self._finish = client.register_script(_FINISH)
        self._batch = ScriptBatch(client)

    async def aclose(self) -> None:
        """Disconnect the connections of its atomic steps (the client stays its owner's)."""
        await self._batch.aclose()

    # -- the TaskStore protocol ----------------------------------------------------------------

    async def create(self, record: TaskRecord) -> TaskRecord | None:
        """Keep a record without queueing it (the protocol's step; the runner uses `enqueue`)."""
        held = await self.enqueue(record, queue_bound=0, queue=False)
        return held if isinstance(held, TaskRecord) else None

    async def get(self, task_id: str) -> TaskRecord | None:
        raw = await self.get_raw(task_id)
        return None if raw is None else TaskRecord.model_validate_json(raw)

    async def get_raw(self, task_id: str) -> bytes | None:
        """The record's JSON, undecoded. Batched: the waits for many tasks read theirs in the same turns."""
        raw: bytes | None = await self._batch.command("GET", self.keys.task(task_id))
        return raw

    async def save(self, record: TaskRecord, *, keep_s: float | None = None) -> None:
        px = _ms(keep_s) if record.finished and keep_s is not None else None
        await self._client.set(self.keys.task(record.task_id), _dumps(record), px=px)

    async def list(self, *, principal: str | None, status: TaskStatus | None, limit: int) -> list[TaskRecord]:
        found: list[TaskRecord] = []
        start = 0
        while len(found) < limit:
            batch = await self._client.zrevrange(self.keys.task_index, start, start + _LIST_BATCH - 1)
            ids = cast("list[bytes]", batch)
            if not ids:
                break
            start += len(ids)
            raws = await self._client.mget([self.keys.task(task_id.decode()) for task_id in ids])
            for raw in raws:
                if raw is None:
                    continue
                record = TaskRecord.model_validate_json(raw)
                if (principal is None or record.principal == principal) and status in (None, record.status):
                    found.append(record)
                    if len(found) >= limit:
                        break
        return found

    async def expire(self, max_finished: int) -> int:
        """Drop index entries of records Redis forgot (their PX ran out) among the oldest, and the
        oldest finished records while more than `max_finished` tasks are indexed."""
        index = self.keys.task_index
        oldest = cast("list[bytes]", await self._client.zrange(index, 0, _EXPIRE_BATCH - 1))
        ids = [task_id.decode() for task_id in oldest]
        if not ids:
            return 0
        raws = await self._client.mget([self.keys.task(task_id) for task_id in ids])
        gone = [task_id for task_id, raw in zip(ids, raws, strict=True) if raw is None]
        excess = await self._client.zcard(index) - len(gone) - max_finished
        for task_id, raw in zip(ids, raws, strict=True):
            if excess <= 0:
                break
            if raw is not None and TaskRecord.model_validate_json(raw).finished:
                gone.append(task_id)
                excess -= 1
        if gone:
            async with self._client.pipeline(transaction=True) as pipe:
                pipe.zrem(index, *gone)
                pipe.delete(*[self.keys.task(task_id) for task_id in gone])
                await pipe.execute()
        return len(gone)

    # -- the runner's atomic steps --------------------------------------------------------------

    async def enqueue(
        self, record: TaskRecord, *, queue_bound: int, queue: bool = True
    ) -> TaskRecord | str | None:
        """Keep a new task and queue it in one step: None when kept, the held record when the id
        is taken, `QUEUE_FULL` when `queue_bound` entries wait already."""
        keys = self.keys
        reply = await self._batch.run(
            self._enqueue,
            [keys.task(record.task_id), keys.task_index, keys.task_queue],
            # The score as redis-py spells a float (repr: exact, and read back the same).
            [_dumps(record), repr(record.created_at), record.task_id, queue_bound, int(queue)],
        )
        if reply[0] == 0:
            return TaskRecord.model_validate_json(reply[1])
        return QUEUE_FULL if reply[0] == 1 else None

    async def update(self, record: TaskRecord) -> bool:
        """Save the unfinished `record`'s new status (deferred, running again) unless the task
        finished meanwhile (cancelled elsewhere): whether it was saved."""
        return bool(await self._batch.run(self._update, [self.keys.task(record.task_id)], [_dumps(record)]))

    async def start(self, record: TaskRecord, entry_id: str, consumer: str) -> int:
        """Save `record` (now running): 1. Or 0 when the task finished meanwhile (cancelled
        elsewhere: its entry may be acked), -1 when its queue entry `entry_id` is no longer
        `consumer`'s (another node took it over: leave the entry alone)."""
        keys = [self.keys.task(record.task_id), self.keys.task_queue]
        args = [_dumps(record), self.keys.task_group, entry_id, consumer]
        return int(await self._batch.run(self._start, keys, args))

    async def finish(
        self,
        record: TaskRecord,
        *,
        keep_s: float,
        entry_id: str | None,
        dead_letter: dict[str, Any] | None = None,
        dead_kept: int = 10_000,
        only_from: TaskStatus | None = None,
    ) -> bool:
        """Save the finished `record` unless another node finished it first (False then), ack and
        delete its queue entry, announce it (with the record) on the events channel, keep a dead
        letter if given. With `only_from`, only a task in that status is finished (a queued one
        cancelled)."""
        keys = self.keys
        # The head of ``{"op": "done", "task_id": ..., "record": {...}}``; the script adds the rest.
        event = _DONE + orjson.dumps(record.task_id) + _RECORD
        dead = b"" if dead_letter is None else orjson.dumps(dead_letter)
        won = await self._batch.run(
            self._finish,
            [keys.task(record.task_id), keys.task_queue, keys.task_events, keys.dead_letters],
            [
                _dumps(record),
                _ms(keep_s),
                keys.task_group,
                entry_id or "",
                event,
                dead,
                dead_kept,
                "" if only_from is None else only_from.value,
            ],
        )
        return bool(won)

    async def dead_letters(self, owner: str | None, limit: int) -> _Letters:
        """The newest dead letters first; for an `owner`, only its tasks'."""
        scan = limit if owner is None else limit * 10
        entries = cast(
            "list[tuple[bytes, dict[bytes, bytes]]]",
            await self._client.xrevrange(self.keys.dead_letters, count=scan),
        )
        found: _Letters = []
        for _, fields in entries:
            letter = orjson.loads(fields[b"d"])
            principal = letter.pop("principal", None)
            if owner is None or principal == owner:
                found.append(letter)
            if len(found) >= limit:
                break
        return found


def done_event(data: bytes) -> tuple[str, bytes] | None:
    """The task id and finished record (JSON) of a done event as `finish` publishes it, read
    without decoding the record: every node hears every event, and most wait for none of them.
    None for any other message."""
    if not data.startswith(_DONE):
        return None
    # The task id is a JSON string, inside which every quote is escaped: the first `,"record":`
    # after it ends it.
    cut = data.find(_RECORD, len(_DONE))
    if cut < 0 or not data.endswith(b"}"):
        return None
    try:
        task_id = orjson.loads(data[len(_DONE) : cut])
    except orjson.JSONDecodeError:
        return None
    if not isinstance(task_id, str):
        return None
    return task_id, data[cut + len(_RECORD) : -1]


def _dumps(record: TaskRecord) -> str:
    return record.model_dump_json()


def _ms(seconds: float | None) -> int:
    return max(int((seconds or 0.0) * 1000), 1)
