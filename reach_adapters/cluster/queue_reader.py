"""The task queue's reader: the entries queued for one node, read with XREADGROUP on a
connection of its own.

Its replies are read raw, in the wire's shape (RESP2 or RESP3: `stream_entries` reads both): the
client's parsed reply changes shape when the URL says ``protocol=3`` (redis-py then gives RESP3's
map of streams), and a reader that misread it would stop taking tasks for good.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import redis.asyncio as redis

from reach_adapters.cluster.direct import direct_connection, reply_timeout_s, retried
from reach_adapters.cluster.streams import field, stream_entries
from reach_adapters.cluster.takeover import drop_foreign, text

__all__ = ["QueueReader", "block_seconds"]


def block_seconds(client: redis.Redis) -> float:
    """How long a blocking read may wait: well inside the client's socket timeout."""
    timeout = client.connection_pool.connection_kwargs.get("socket_timeout")
    return min(1.0, float(timeout) / 2) if timeout else 1.0


class QueueReader:
    """Reads new entries of the task queue `stream` for consumer `node_id` of `group`."""

    def __init__(
        self,
        client: redis.Redis,
        stream: str,
        group: str,
        node_id: str,
        drop: Callable[[str], Awaitable[None]],
    ) -> None:
        # Opened by the first read.
        self._conn = direct_connection(client)
        block_s = block_seconds(client)
        timeout_s = reply_timeout_s(client)
        # One bound covers a reconnect, the block and the reply: the block on top of the client's.
        self._timeout_s = None if timeout_s is None else timeout_s + block_s
        block_ms = int(block_s * 1000)
        self._stream = stream
        # Acks and deletes an entry (`TaskWorkers.ack`).
        self._drop = drop
        self._command = ("XREADGROUP", "GROUP", group, node_id, "COUNT")
        self._tail = ("BLOCK", block_ms, "STREAMS", stream, ">")

    async def read(self, count: int) -> list[tuple[str, str, bytes | None]]:
        """Up to `count` new entries, each as (entry id, task id, the record it carries or None);
        none once the block runs out. Redis's errors are raised (NOGROUP among them)."""
        reply = await retried(self._conn, self._timeout_s, *self._command, count, *self._tail)
        out: list[tuple[str, str, bytes | None]] = []
        for entry_id, fields in stream_entries(reply):
            task_id = field(fields, b"t")
            if task_id is not None:
                out.append((text(entry_id), text(task_id), field(fields, b"r")))
                continue
            await drop_foreign(self._drop, self._stream, text(entry_id))
        return out

    async def aclose(self) -> None:
        await self._conn.disconnect()
