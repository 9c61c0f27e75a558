"""Calls to another node's agents over Redis Streams: the calling side (docs/cluster.md).

A call is one entry XADDed to the host's inbox stream, ``{prefix}inbox:{host}``; its answer comes
back on this node's replies stream, ``{prefix}replies:{node}``, which one reader task follows for
the whole node and hands to the waiting call by request id. Redis is the only moving part: no node
publishes an address, opens a port to the others or needs credentials of theirs.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
import redis.asyncio as redis
from pydantic import ValidationError
from redis.exceptions import RedisError

from reach_adapters.cluster.records import Keys
from reach_adapters.cluster.stats import NodeStats
from reach_adapters.router import (
    UNKNOWN_OUTCOME,
    Fault,
    ReachMessage,
    ReachResult,
    ResultStatus,
    error_result,
)

__all__ = ["REMOTE_DELIVERY", "STREAM_MAXLEN", "Transport", "entries", "last_entry_id", "wire_message"]

logger = logging.getLogger(__name__)

# The error_type of a call across nodes that failed in transit (Redis out of reach, host gone).
REMOTE_DELIVERY = "RemoteDeliveryError"
# Entries kept per inbox and replies stream (XADD MAXLEN ~): readers follow them within
# milliseconds, so this only bounds what a stream left unread (a dead node's) can hold.
STREAM_MAXLEN = 10_000
_BATCH = 256
_BACKOFF_S = 0.5


def wire_message(message: ReachMessage, agent_id: str, deadline: float) -> dict[str, Any]:
    """`message` as JSON for agent `agent_id` on another node: a directed call with no fallback,
    its meta kept (task and trace ids, depth, lineage, principal, capability) and `deadline`.

    ``resume`` travels only when the caller set it: its mere presence means "an answer to a
    question the agent asked", not the task's input.
    """
    meta = message.meta_info
    exclude = None if "resume" in meta.__pydantic_fields_set__ else {"meta_info": {"resume"}}
    data = message.model_dump(mode="json", exclude=exclude)
    data["meta_info"]["deadline"] = deadline
    data["routing_hint"] = {"mode": "directed", "target": agent_id}
    return data


def entries(reply: Any) -> list[tuple[bytes, bytes]]:
    """(entry id, field ``m``) of each entry of an XREAD reply on one stream."""
    out: list[tuple[bytes, bytes]] = []
    for _stream, items in reply or ():
        for entry_id, fields in items:
            raw = fields.get(b"m")
            if raw is not None:
                out.append((entry_id, raw))
    return out


async def last_entry_id(client: redis.Redis, stream: str) -> bytes | str:
    """Where a reader starting now begins: after the stream's last entry (older ones are for a
    former run of this node, whose callers are gone)."""
    last = await client.xrevrange(stream, count=1)
    entry_id: bytes | str | None = last[0][0] if last else None
    return entry_id or "0-0"


@dataclass(slots=True)
class _Pending:
    future: asyncio.Future[ReachResult]
    message: ReachMessage
    host: str
    agent_id: str


class Transport:
    """This node's calls to other nodes' agents, waiting for their replies.

    `call` never raises for a failure in transit: Redis out of reach is a not-delivered router
    fault (the router tries the next candidate at once); the host's lease ending while a call
    waits (`lost`) ends it as delivered with an unknown outcome. A caller that gives up (a
    cancellation, its deadline) sends the host a cancel entry.
    """

    def __init__(
        self, client: redis.Redis, keys: Keys, node_id: str, stats: NodeStats, *, block_ms: int
    ) -> None:
        self._client = client
        self._keys = keys
        self.node_id = node_id
        self._stats = stats
        self._block_ms = block_ms
        self._replies = keys.replies(node_id)
        self._pending: dict[str, _Pending] = {}
        self._background: set[asyncio.Task[None]] = set()
        self._reader: asyncio.Task[None] | None = None
        # A flag as well as cancel(): on 3.11 a cancel racing redis-py's read timeout can be
        # swallowed, and the reader must still stop (each blocking read is bounded).
        self._closed = False
        # Set by the node while it finds Redis out of reach: calls fail at once instead of waiting
        # for a connection attempt to time out.
        self.reachable: Callable[[], bool] = lambda: True

    async def start(self) -> None:
        start_id = await last_entry_id(self._client, self._replies)
        self._reader = asyncio.get_running_loop().create_task(
            self._reading(start_id), name=f"reach cluster replies of {self.node_id}"
        )

    async def aclose(self) -> None:
        self._closed = True
        if self._reader is not None:
            self._reader.cancel()
            await asyncio.gather(self._reader, return_exceptions=True)
            self._reader = None
        for pending in list(self._pending.values()):
            self._end(pending, f"node {self.node_id} left the cluster while the call waited")
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)

    async def call(self, host: str, agent_id: str, message: ReachMessage, timeout_s: float) -> ReachResult:
        """Deliver `message` to `agent_id` on node `host` and wait for its result, at most until
        the message's deadline (`timeout_s` from now when it has none)."""
        deadline = time.time() + timeout_s
        if not self.reachable():
            return self._unreachable(message, host, agent_id, "it was out of reach a moment ago")
        request_id = secrets.token_hex(8)
        entry = {
            "op": "call",
            "id": request_id,
            "reply_to": self.node_id,
            "agent_id": agent_id,
            "message": wire_message(message, agent_id, deadline),
        }
        future: asyncio.Future[ReachResult] = asyncio.get_running_loop().create_future()
        self._pending[request_id] = _Pending(future, message, host, agent_id)
        try:
            try:
                await self._client.xadd(
                    self._keys.inbox(host), {"m": orjson.dumps(entry)}, maxlen=STREAM_MAXLEN, approximate=True
                )
            except (RedisError, OSError) as exc:
                return self._unreachable(message, host, agent_id, str(exc))
            self._stats.remote_calls_sent += 1
            try:
                async with asyncio.timeout(timeout_s):
                    return await future
            except (asyncio.CancelledError, TimeoutError):
                # The caller gave up, or its deadline passed: the host stops the agent too.
                self._spawn(self._cancel(host, request_id))
                raise
        finally:
            del self._pending[request_id]

    def lost(self, node: str, agent_id: str, reason: str) -> None:
        """`node`'s lease of `agent_id` ended: calls waiting on it will never be answered."""
        for pending in list(self._pending.values()):
            if pending.host == node and pending.agent_id == agent_id:
                why = f"node {node} stopped hosting agent {agent_id} while the call waited ({reason})"
                self._end(pending, why)

    def _end(self, pending: _Pending, why: str) -> None:
        if pending.future.done():
            return
        self._stats.remote_calls_failed += 1
        # Delivered, maybe done: the router resends it only where that is safe (DESIGN §6).
        pending.future.set_result(
            error_result(
                pending.message,
                ResultStatus.ERROR,
                REMOTE_DELIVERY,
                f"{why}; {UNKNOWN_OUTCOME}",
                fault=Fault.AGENT,
                agent_id=pending.agent_id,
                retryable=True,
                delivered=True,
            )
        )

    def _unreachable(self, message: ReachMessage, host: str, agent_id: str, why: str) -> ReachResult:
        self._stats.remote_calls_failed += 1
        error = (
            f"cannot deliver to agent {agent_id} on node {host}: the cluster's Redis is out of reach "
            f"({why}); the call was not delivered"
        )
        return error_result(
            message,
            ResultStatus.ERROR,
            REMOTE_DELIVERY,
            error,
            fault=Fault.ROUTER,
            agent_id=agent_id,
            retryable=True,
            delivered=False,
        )

    async def _cancel(self, host: str, request_id: str) -> None:
        self._stats.remote_calls_cancelled += 1
        entry = orjson.dumps({"op": "cancel", "id": request_id})
        try:
            await self._client.xadd(
                self._keys.inbox(host), {"m": entry}, maxlen=STREAM_MAXLEN, approximate=True
            )
        except (RedisError, OSError) as exc:
            logger.warning("could not ask node %s to cancel call %s: %s", host, request_id, exc)

    def _spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _reading(self, last_id: bytes | str) -> None:
        while not self._closed:
            try:
                reply = await self._client.xread({self._replies: last_id}, count=_BATCH, block=self._block_ms)
            except (RedisError, OSError) as exc:
                current = asyncio.current_task()
                if current is not None and current.cancelling():
                    raise asyncio.CancelledError from exc
                # The node warns once per outage; this reader just tries again.
                logger.debug("node %s: reading replies failed: %s", self.node_id, exc)
                await asyncio.sleep(_BACKOFF_S)
                continue
            for entry_id, raw in entries(reply):
                last_id = entry_id
                self._resolve(raw)

    def _resolve(self, raw: bytes) -> None:
        try:
            data = orjson.loads(raw)
            pending = self._pending.get(data["id"])
            if pending is None or pending.future.done():
                return  # its caller gave up already
            result = ReachResult.model_validate(data["result"])
        except (ValueError, KeyError, TypeError, ValidationError) as exc:
            logger.warning("node %s: ignoring a malformed reply %.200r: %s", self.node_id, raw, exc)
            return
        pending.future.set_result(result)
