"""`ScriptBatch`: the Lua script calls (and plain commands, such as the read of a task record) a
node makes in one turn of its event loop, sent to Redis together as one pipeline.

Each command sent alone costs a write to a socket, a system call on both sides and a wake-up of
Redis; on a small machine under load those writes are the largest part of what an async task
costs a node. Tasks start and finish in bunches (a worker reads several queue entries at once,
requests arrive together), so the calls of one turn go out in one write and their replies come
back in one read. Every script stays atomic on its own; the pipeline is not a transaction and
changes nothing in what the calls do or in their order. It goes out on a direct connection
(`Direct`, direct.py says why): the client's pipeline would encode each call's ten-odd
arguments through its encoder and pay its pool and hooks for each batch.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Sequence
from functools import partial
from typing import Any

import redis.asyncio as redis
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError

from reach_adapters.cluster.direct import Arg, Direct

__all__ = ["ScriptBatch"]

_Args = Sequence[Arg]
_Keys = Sequence[str]


class _Call:
    """One command of a batch; `alone` runs it by itself, for a script Redis lost (loading it again)."""

    __slots__ = ("alone", "command", "reply")

    def __init__(
        self, command: tuple[Arg, ...], alone: Callable[[], Awaitable[Any]] | None, reply: asyncio.Future[Any]
    ) -> None:
        self.command = command
        self.alone = alone
        self.reply = reply


class ScriptBatch:
    """Runs script calls and commands for one client, those of the same loop turn in one pipeline."""

    def __init__(self, client: redis.Redis) -> None:
        self._commands = Direct(client)
        self._calls: list[_Call] = []
        self._sending: set[asyncio.Task[None]] = set()

    async def run(self, script: AsyncScript, keys: _Keys, args: _Args) -> Any:
        """`script(keys, args)`'s reply, or its error (`RedisError`, `OSError`) raised."""
        evalsha = ("EVALSHA", script.sha, len(keys), *keys, *args)
        return await self._joined(evalsha, partial(script, keys=keys, args=args))

    async def command(self, *command: Arg) -> Any:
        """The raw reply of `command` (no response callback), or its error raised."""
        return await self._joined(command, None)

    async def _joined(self, command: tuple[Arg, ...], alone: Callable[[], Awaitable[Any]] | None) -> Any:
        loop = asyncio.get_running_loop()
        call = _Call(command, alone, loop.create_future())
        self._calls.append(call)
        if len(self._calls) == 1:
            # Sent once every call that is ready in this turn has joined.
            loop.call_soon(self._send)
        return await call.reply

    def _send(self) -> None:
        calls, self._calls = self._calls, []
        sending = asyncio.get_running_loop().create_task(self._sent(calls))
        self._sending.add(sending)
        sending.add_done_callback(self._sending.discard)

    async def _sent(self, calls: list[_Call]) -> None:
        try:
            replies = await self._commands.execute_all([call.command for call in calls])
            for i, reply in enumerate(replies):
                alone = calls[i].alone
                if alone is not None and isinstance(reply, NoScriptError):
                    # Redis lost its scripts (it restarted): this call loads its own.
                    replies[i] = await _alone(alone)
        except asyncio.CancelledError:
            for call in calls:
                call.reply.cancel()
            raise
        except Exception as exc:  # noqa: BLE001 - every caller gets it, as it would alone
            for call in calls:
                if not call.reply.done():
                    call.reply.set_exception(exc)
            return
        for call, reply in zip(calls, replies, strict=True):
            if call.reply.done():  # its caller left
                continue
            if isinstance(reply, Exception):
                call.reply.set_exception(reply)
            else:
                call.reply.set_result(reply)

    async def aclose(self) -> None:
        """Disconnect its connections; batches still in flight disconnect theirs when they end."""
        await self._commands.aclose()


async def _alone(alone: Callable[[], Awaitable[Any]]) -> Any:
    """The call on its own (a script loaded first if Redis lacks it); an error as its reply."""
    try:
        return await alone()
    except Exception as exc:  # noqa: BLE001 - handed to its caller
        return exc
