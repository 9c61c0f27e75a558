"""Following one Redis stream from now on, as a node's inbox and replies readers do: one task
with a blocking XREAD, each entry's field ``m`` handed over in order, and a Redis out of reach
met with the process's `Outage` (one warning, a growing pause) rather than a busy retry."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator
from typing import Any

import redis.asyncio as redis
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import RedisError

from reach_adapters.cluster.direct import Direct, direct_connection, exchange, reply_timeout_s, retried
from reach_adapters.cluster.outage import Outage

__all__ = ["STREAM_MAXLEN", "StreamReader", "append", "entries", "field", "last_entry_id", "stream_entries"]

# Entries kept per inbox and replies stream (XADD MAXLEN ~): readers follow them within
# milliseconds, so this only bounds what a stream left unread (a dead node's) can hold.
STREAM_MAXLEN = 10_000
_BATCH = 256


async def append(commands: Direct, stream: str, entry: bytes) -> None:
    """Add `entry` to `stream` in the field ``m`` its readers take (`entries`), the stream kept
    to about `STREAM_MAXLEN` entries."""
    await commands.execute("XADD", stream, "MAXLEN", "~", STREAM_MAXLEN, "*", "m", entry)


def stream_entries(reply: Any) -> Iterator[tuple[bytes, list[bytes]]]:
    """(entry id, fields as a flat list of names and values) of each entry of a raw XREAD or
    XREADGROUP reply, as read on a direct connection: streams in a list of [name, entries] in
    RESP2, in a map in RESP3 (the wire's shape is the Redis protocol's, the same whichever
    redis-py reads it; the client's parsed reply, by contrast, changes with the URL's
    ``protocol``). Nothing for a reply of None: the block ran out."""
    for _stream, items in reply.items() if isinstance(reply, dict) else reply or ():
        yield from items


def field(fields: list[bytes] | None, name: bytes) -> bytes | None:
    """The value of field `name` in an entry's flat list of names and values (None for an entry
    without it, or without fields: XREADGROUP lists a deleted one so when reading history)."""
    fields = fields or []
    for i in range(0, len(fields) - 1, 2):
        if fields[i] == name:
            return fields[i + 1]
    return None


def entries(reply: Any) -> list[tuple[bytes, bytes]]:
    """(entry id, field ``m``) of each entry of a raw XREAD reply on one stream, as the readers
    take it."""
    out: list[tuple[bytes, bytes]] = []
    for entry_id, fields in stream_entries(reply):
        raw = field(fields, b"m")
        if raw is not None:
            out.append((entry_id, raw))
    return out


async def last_entry_id(client: redis.Redis, stream: str) -> bytes | str:
    """Where a reader starting now begins: after the stream's last entry (older ones are for a
    former run of this node, whose callers are gone)."""
    last = await client.xrevrange(stream, count=1)
    entry_id: bytes | str | None = last[0][0] if last else None
    return entry_id or "0-0"


class StreamReader:
    """Hands each new entry of `stream` to `handle`, from `start` until `aclose`.

    `name` is the loop's name in `outage` and in the task's name; `block_ms` bounds each
    blocking read, well within the client's socket timeout, which bounds its reply.
    """

    def __init__(
        self,
        client: redis.Redis,
        stream: str,
        handle: Callable[[bytes], None],
        *,
        block_ms: int,
        outage: Outage,
        name: str,
    ) -> None:
        self._client = client
        self._timeout_s = reply_timeout_s(client)
        self._stream = stream
        self._handle = handle
        # The blocking read's command, but for where it starts.
        self._read = ("XREAD", "COUNT", _BATCH, "BLOCK", block_ms, "STREAMS", stream)
        self._outage = outage
        self._name = name
        self._task: asyncio.Task[None] | None = None
        self._conn: AbstractConnection | None = None
        self.last_id: bytes | str = "0-0"
        # A flag as well as cancel(): on 3.11 a cancel racing redis-py's read timeout can be
        # swallowed, and the reader must still stop (each blocking read is bounded).
        self._closed = False

    async def start(self) -> None:
        """Read from the stream's last entry on; raises RedisError when Redis does not answer."""
        start_id = self.last_id = await last_entry_id(self._client, self._stream)
        # A direct connection of its own (opened by its first read), held until `aclose`: each
        # blocking read is one command sent and one raw reply read (direct.py says why).
        self._conn = conn = direct_connection(self._client)
        self._task = asyncio.get_running_loop().create_task(
            self._reading(conn, start_id), name=f"reach cluster {self._name} of {self._outage.who}"
        )

    async def aclose(self) -> None:
        self._closed = True
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
            self._task = None
        if self._conn is not None:
            await self._conn.disconnect()
            self._conn = None

    async def _reading(self, conn: AbstractConnection, last_id: bytes | str) -> None:
        while not self._closed:
            try:
                reply = await retried(conn, self._timeout_s, *self._read, last_id)
            except (RedisError, OSError) as exc:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    # redis-py may turn a cancellation into a connection error: leaving wins.
                    raise asyncio.CancelledError from exc
                if self._closed:
                    return
                await asyncio.sleep(self._outage.failed(self._name, exc))
                continue
            self._outage.ok(self._name)
            for entry_id, raw in entries(reply):
                last_id = self.last_id = entry_id
                self._handle(raw)
            if reply:
                # What the entries woke (a caller waiting for its reply, a call's serving task)
                # runs first: sending the next XREAD before it would put a write to Redis, and
                # the wake-up of Redis it causes, on every call's path.
                await asyncio.sleep(0)

    async def unread(self) -> list[bytes]:
        """Entries written after the last one handled: after `aclose`, what nobody will read."""
        conn = direct_connection(self._client)
        try:
            command = ("XREAD", "COUNT", STREAM_MAXLEN, "STREAMS", self._stream, self.last_id)
            reply = await exchange(conn, self._timeout_s, *command)
        finally:
            await conn.disconnect()
        return [raw for _, raw in entries(reply)]
