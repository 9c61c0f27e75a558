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
from dataclasses import dataclass
from typing import Any

import orjson
import redis.asyncio as redis
from pydantic import ValidationError
from redis.exceptions import RedisError
from redis.exceptions import TimeoutError as RedisTimeoutError

from reach_adapters.cluster.direct import Direct
from reach_adapters.cluster.outage import Outage
from reach_adapters.cluster.records import Keys
from reach_adapters.cluster.stats import NodeStats
from reach_adapters.cluster.streams import StreamReader, append
from reach_adapters.router import (
    UNKNOWN_OUTCOME,
    Fault,
    ReachMessage,
    ReachResult,
    ResultStatus,
    error_result,
)

__all__ = ["REMOTE_DELIVERY", "Transport", "wire_message"]

logger = logging.getLogger(__name__)

# The error_type of a call across nodes that failed in transit (Redis out of reach, host gone).
REMOTE_DELIVERY = "RemoteDeliveryError"


def wire_message(message: ReachMessage, agent_id: str, deadline: float) -> dict[str, Any]:
    """`message` as JSON for agent `agent_id` on another node: a directed call with no fallback,
    its meta kept (task and trace ids, depth, lineage, principal, capability) and `deadline`.
    (``resume`` travels only when the caller set it: `MetaInfo` dumps it only then.)
    """
    data = message.model_dump(mode="json")
    data["meta_info"]["deadline"] = deadline
    data["routing_hint"] = {"mode": "directed", "target": agent_id}
    return data


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
        self,
        client: redis.Redis,
        keys: Keys,
        node_id: str,
        stats: NodeStats,
        *,
        block_ms: int,
        outage: Outage,
    ) -> None:
        self._commands = Direct(client)
        self._keys = keys
        self.node_id = node_id
        self._stats = stats
        # While the node finds Redis out of reach, calls fail at once instead of waiting for a
        # connection attempt to time out.
        self._outage = outage
        self._pending: dict[str, _Pending] = {}
        self._background: set[asyncio.Task[None]] = set()
        self._reader = StreamReader(
            client, keys.replies(node_id), self._resolve, block_ms=block_ms, outage=outage, name="replies"
        )

    async def start(self) -> None:
        await self._reader.start()

    async def aclose(self) -> None:
        await self._reader.aclose()
        for pending in list(self._pending.values()):
            self._end(pending, f"node {self.node_id} left the cluster while the call waited")
        if self._background:
            await asyncio.gather(*self._background, return_exceptions=True)
        await self._commands.aclose()

    async def call(self, host: str, agent_id: str, message: ReachMessage, timeout_s: float) -> ReachResult:
        """Deliver `message` to `agent_id` on node `host` and wait for its result, at most until
        the message's deadline (`timeout_s` from now when it has none)."""
        deadline = time.time() + timeout_s
        if self._outage.down_since is not None:
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
                await append(self._commands, self._keys.inbox(host), orjson.dumps(entry))
            except RedisTimeoutError:
                # Written, maybe taken: Redis may still add it. Not "not delivered", which would
                # let the router send it elsewhere too; the answer, or the deadline, tells.
                logger.debug(
                    "node %s: call %s to node %s timed out on XADD; waiting", self.node_id, request_id, host
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
        try:
            await append(
                self._commands, self._keys.inbox(host), orjson.dumps({"op": "cancel", "id": request_id})
            )
        except (RedisError, OSError) as exc:
            logger.warning("could not ask node %s to cancel call %s: %s", host, request_id, exc)

    def _spawn(self, work: Any) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

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
