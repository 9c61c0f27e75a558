"""Commands on the cross-node call path, sent on connections of their own instead of through the
client (docs/cluster.md, "Calls to another node's agent").

A call across nodes makes four commands (the caller's XADD, the host's XREAD, its reply's XADD,
the caller's XREAD). Through ``redis.asyncio.Redis`` each pays the client's round: the pool's
checkout and release, observability hooks, `pack_command`'s encoder, response callbacks, and,
with a socket timeout set, an ``asyncio.wait_for`` on every write, which on Python 3.11 is a task
of its own and one more turn of the event loop. On a small machine that is about 60 µs of CPU
per command, a tenth of what a call adds. Here a command is one buffer written and one raw reply
read on a connection with no socket timeout, the exchange bounded by one ``asyncio.timeout``
instead, with the client's retry (once, on a fresh connection) and its errors kept.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from functools import partial
from typing import Any

import redis.asyncio as redis
from redis.asyncio.connection import AbstractConnection
from redis.exceptions import ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

__all__ = [
    "Arg",
    "Direct",
    "direct_connection",
    "exchange",
    "exchange_all",
    "pack",
    "reply_timeout_s",
    "retried",
]

Arg = str | bytes | int


def direct_connection(client: redis.Redis, *, protocol: int | None = None) -> AbstractConnection:
    """A connection with the settings of `client`'s pool but no socket timeout (its replies are
    bounded by `exchange`), speaking RESP `protocol` if given. Connects on its first command.

    Its replies are raw, in the shape of the protocol it speaks: the URL's ``protocol=`` unless
    given here, else redis-py's default (RESP3 since redis-py 8, RESP2 before). Who reads them
    takes both shapes (RESP3 has maps where RESP2 has flat lists: `streams.stream_entries`)."""
    pool = client.connection_pool
    settings = {**pool.connection_kwargs, "socket_timeout": None}
    if protocol is not None:
        settings["protocol"] = protocol
    return pool.connection_class(**settings)


def reply_timeout_s(client: redis.Redis) -> float | None:
    """How long a reply may take on a direct connection: the client's own socket timeout."""
    timeout_s: float | None = client.connection_pool.connection_kwargs.get("socket_timeout")
    return timeout_s


def pack(*args: Arg) -> bytes:
    """`args` as one command in the Redis protocol (RESP), in one buffer: what the connection's
    `pack_command` makes, at half its cost (no encoder round, no chunking of large values)."""
    out = [b"*%d\r\n" % len(args)]
    for arg in args:
        if isinstance(arg, str):
            arg = arg.encode()
        elif isinstance(arg, int):
            arg = b"%d" % arg
        out.append(b"$%d\r\n%s\r\n" % (len(arg), arg))
    return b"".join(out)


async def exchange(conn: AbstractConnection, timeout_s: float | None, *args: Arg) -> Any:
    """Send one command on `conn` and read its raw reply, all within `timeout_s` (connecting
    too: with no socket timeout, only this bounds the handshake's replies).

    Raises as the client would: `RedisTimeoutError` when the reply is late, ConnectionError
    when the connection fails, the command's `ResponseError`. A failed exchange leaves `conn`
    disconnected (redis-py disconnects on a failed write or read, this on a late one), so it
    reconnects on its next command instead of reading a reply meant for this one.
    """
    return _sole(await exchange_all(conn, timeout_s, [args]))


async def exchange_all(
    conn: AbstractConnection, timeout_s: float | None, commands: Sequence[Sequence[Arg]]
) -> list[Any]:
    """Send `commands` on `conn` in one write and read their raw replies, all within `timeout_s`,
    as `exchange` does one; a command's `ResponseError` is its reply (the connection stays usable:
    the reply was read whole), a late or failed exchange raises."""
    try:
        async with asyncio.timeout(timeout_s):
            await conn.send_packed_command(b"".join([pack(*args) for args in commands]))
            replies: list[Any] = []
            for _ in commands:
                try:
                    replies.append(await conn.read_response())
                except ResponseError as exc:
                    replies.append(exc)
            return replies
    except TimeoutError:
        await conn.disconnect(nowait=True)
        msg = f"no reply from Redis within {timeout_s} s to {commands[0][0]!r}"
        raise RedisTimeoutError(msg) from None


async def retried(conn: AbstractConnection, timeout_s: float | None, *args: Arg) -> Any:
    """`exchange`, retried as the client retries its own commands: once, on a fresh connection."""
    return await conn.retry.call_with_retry(
        partial(exchange, conn, timeout_s, *args), lambda _: conn.disconnect()
    )


def _sole(replies: list[Any]) -> Any:
    """The reply of a pipeline of one command, its `ResponseError` raised."""
    (reply,) = replies
    if isinstance(reply, ResponseError):
        raise reply
    return reply


class Direct:
    """Commands (one, or a pipeline of them) on direct connections, one per exchange in flight,
    kept for the next.

    What `redis.asyncio.Redis.execute_command` does on the call path, without its per-command
    costs (see the module's docstring); replies come raw (no response callbacks).
    """

    def __init__(self, client: redis.Redis) -> None:
        self._client = client
        self._timeout_s = reply_timeout_s(client)
        self._idle: list[AbstractConnection] = []
        self._closed = False

    async def execute(self, *args: Arg) -> Any:
        """The raw reply of the command `args`; raises `RedisError` (or OSError) as the client does."""
        return _sole(await self.execute_all([args]))

    async def execute_all(self, commands: Sequence[Sequence[Arg]]) -> list[Any]:
        """The raw replies of `commands`, sent in one write as a pipeline (not a transaction): a
        command's `ResponseError` is its reply; a failed exchange raises (`RedisError`, OSError),
        retried as a whole, as the client retries a pipeline."""
        conn = self._idle.pop() if self._idle else direct_connection(self._client)
        try:
            return await conn.retry.call_with_retry(
                partial(exchange_all, conn, self._timeout_s, commands), lambda _: conn.disconnect()
            )
        finally:
            if self._closed:
                await conn.disconnect()
            else:
                self._idle.append(conn)

    async def aclose(self) -> None:
        """Disconnect the connections; commands still running disconnect theirs when they end."""
        self._closed = True
        idle, self._idle = self._idle, []
        for conn in idle:
            await conn.disconnect()
