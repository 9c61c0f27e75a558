"""`ScriptBatch`: the Lua script calls a node makes in one turn of its event loop, sent to Redis
together as one pipeline.

Each command sent alone costs a write to a socket, a system call on both sides and a wake-up of
Redis; on a small machine under load those writes are the largest part of what an async task
costs a node. Tasks start and finish in bunches (a worker reads several queue entries at once,
requests arrive together), so the calls of one turn go out in one write and their replies come
back in one read. Every script stays atomic on its own; the pipeline is not a transaction and
changes nothing in what the calls do or in their order.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import redis.asyncio as redis
from redis.commands.core import AsyncScript
from redis.exceptions import NoScriptError

__all__ = ["ScriptBatch"]

_Args = Sequence[str | bytes | int | float]
_Keys = Sequence[str]


class _Call:
    __slots__ = ("args", "keys", "reply", "script")

    def __init__(self, script: AsyncScript, keys: _Keys, args: _Args, reply: asyncio.Future[Any]) -> None:
        self.script = script
        self.keys = keys
        self.args = args
        self.reply = reply


class ScriptBatch:
    """Runs script calls for one client, those of the same loop turn in one pipeline."""

    def __init__(self, client: redis.Redis) -> None:
        self._client = client
        self._calls: list[_Call] = []
        self._sending: set[asyncio.Task[None]] = set()

    async def run(self, script: AsyncScript, keys: _Keys, args: _Args) -> Any:
        """`script(keys, args)`'s reply, or its error (`RedisError`, `OSError`) raised."""
        loop = asyncio.get_running_loop()
        call = _Call(script, keys, args, loop.create_future())
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
            if len(calls) == 1:
                call = calls[0]
                replies: list[Any] = [await _alone(call)]
            else:
                async with self._client.pipeline(transaction=False) as pipe:
                    for call in calls:
                        pipe.evalsha(call.script.sha, len(call.keys), *call.keys, *call.args)
                    replies = await pipe.execute(raise_on_error=False)
                for i, reply in enumerate(replies):
                    if isinstance(reply, NoScriptError):
                        # Redis lost its scripts (it restarted): this call loads its own.
                        replies[i] = await _alone(calls[i])
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


async def _alone(call: _Call) -> Any:
    """The call on its own (the script loaded first if Redis lacks it); an error as its reply."""
    try:
        return await call.script(keys=call.keys, args=call.args)
    except Exception as exc:  # noqa: BLE001 - handed to its caller
        return exc
