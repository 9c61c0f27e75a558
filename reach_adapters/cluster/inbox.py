"""Calls from other nodes to this node's agents over Redis Streams: the serving side.

One reader task follows ``{prefix}inbox:{node}``; each call runs as a task of its own, delivered
ONCE to the local agent through this node's router as a directed call, and its result is XADDed
to the caller's replies stream. A cancel entry cancels the call it names.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import orjson
import redis.asyncio as redis
from pydantic import ValidationError
from redis.exceptions import RedisError

from reach_adapters.cluster.direct import Direct
from reach_adapters.cluster.outage import Outage
from reach_adapters.cluster.records import Keys
from reach_adapters.cluster.stats import NodeStats
from reach_adapters.cluster.streams import StreamReader, append
from reach_adapters.cluster.transport import REMOTE_DELIVERY
from reach_adapters.router import (
    ABANDONED,
    UNKNOWN_OUTCOME,
    ErrorKind,
    Fault,
    ReachMessage,
    ReachResult,
    ResultStatus,
    Router,
    error_result,
)

__all__ = ["Inbox"]

logger = logging.getLogger(__name__)

# How many served call ids are remembered against repeats: far more than a retry's few seconds.
_SERVED_KEPT = 10_000


@dataclass(slots=True)
class _Served:
    task: asyncio.Task[None]
    reply_to: str
    message: ReachMessage | None = None


class Inbox:
    """Serves the calls other nodes send to this node's agents.

    `hosts(agent_id)` says whether the agent is this node's own: a call for one it no longer hosts
    is answered "not delivered" (the caller fails over), never passed on to a third node.
    A replies stream lives `reply_ttl_ms` after its last reply, so a dead caller's goes away.
    """

    def __init__(
        self,
        router: Router,
        client: redis.Redis,
        keys: Keys,
        node_id: str,
        stats: NodeStats,
        hosts: Callable[[str], bool],
        *,
        block_ms: int,
        reply_ttl_ms: int,
        outage: Outage,
    ) -> None:
        self._router = router
        self._commands = Direct(client)
        self._keys = keys
        self.node_id = node_id
        self._stats = stats
        self._hosts = hosts
        self._reply_ttl_ms = reply_ttl_ms
        self._calls: dict[str, _Served] = {}
        # Ids of calls served lately, oldest first: a call XADDed twice (redis-py retrying a write
        # that timed out but landed) runs once.
        self._served: dict[str, None] = {}
        # When each caller's replies stream was last given its expiry: renewed every half of it,
        # not on every reply (one round trip fewer per call).
        self._expiry_set: dict[str, float] = {}
        self._reader = StreamReader(
            client, keys.inbox(node_id), self._take, block_ms=block_ms, outage=outage, name="inbox"
        )

    async def start(self) -> None:
        await self._reader.start()

    async def aclose(self) -> None:
        """Stop reading; calls still running are cancelled, and their callers told so."""
        await self._reader.aclose()
        served = list(self._calls.items())
        for _, call in served:
            # Abandoned, not cancelled by its caller: no compensation (its caller hears "outcome
            # unknown", and may send it to another replica).
            call.task.cancel(ABANDONED)
        await asyncio.gather(*(call.task for _, call in served), return_exceptions=True)
        for request_id, call in served:
            if call.message is not None:
                why = f"node {self.node_id} left the cluster during the call; {UNKNOWN_OUTCOME}"
                result = error_result(
                    call.message,
                    ResultStatus.ERROR,
                    REMOTE_DELIVERY,
                    why,
                    fault=Fault.AGENT,
                    retryable=True,
                    delivered=True,
                )
                await self._reply(call.reply_to, request_id, result)
        await self._refuse_unread()
        await self._commands.aclose()

    async def _refuse_unread(self) -> None:
        """Answer the calls written after the reader stopped, as never delivered: their callers
        fail over at once instead of waiting for the leases to go, and blaming the agent."""
        try:
            unread = await self._reader.unread()
        except (RedisError, OSError) as exc:
            logger.debug("node %s: could not read its inbox's last calls: %s", self.node_id, exc)
            return
        for raw in unread:
            try:
                data = orjson.loads(raw)
                if data["op"] != "call" or data["id"] in self._served:
                    continue
                message = ReachMessage.model_validate(data["message"])
            except (ValueError, KeyError, TypeError, ValidationError):
                continue
            error = f"node {self.node_id} left the cluster before the call was read; it was not delivered"
            refused = error_result(
                message,
                ResultStatus.ERROR,
                REMOTE_DELIVERY,
                error,
                fault=Fault.ROUTER,
                agent_id=str(data.get("agent_id")),
                retryable=True,
                delivered=False,
            )
            await self._reply(str(data["reply_to"]), str(data["id"]), refused)

    def _take(self, raw: bytes) -> None:
        try:
            data = orjson.loads(raw)
            op, request_id = data["op"], str(data["id"])
            if op == "cancel":
                call = self._calls.get(request_id)
                if call is not None:
                    call.message = None  # its caller is gone: nobody to answer
                    call.task.cancel()
                return
            if op != "call" or request_id in self._calls or request_id in self._served:
                return  # an unknown op, or the same call sent twice (a client's retry of its XADD)
            reply_to = str(data["reply_to"])
        except (ValueError, KeyError, TypeError) as exc:
            logger.warning("node %s: ignoring a malformed inbox entry %.200r: %s", self.node_id, raw, exc)
            return
        task = asyncio.get_running_loop().create_task(self._serve(request_id, reply_to, data))
        self._calls[request_id] = _Served(task, reply_to)
        task.add_done_callback(lambda _: self._done(request_id))

    def _done(self, request_id: str) -> None:
        self._calls.pop(request_id, None)
        served = self._served
        served[request_id] = None
        if len(served) > _SERVED_KEPT:
            del served[next(iter(served))]

    async def _serve(self, request_id: str, reply_to: str, data: dict[str, Any]) -> None:
        agent_id = str(data.get("agent_id"))
        try:
            message = ReachMessage.model_validate(data["message"])
        except (KeyError, ValidationError) as exc:
            error = f"node {self.node_id} got a malformed call for agent {agent_id}: {exc}"
            placeholder = ReachMessage()
            invalid = error_result(
                placeholder, ResultStatus.INVALID, ErrorKind.INVALID_MESSAGE, error, fault=Fault.CALLER
            )
            await self._reply(reply_to, request_id, invalid)
            return
        call = self._calls.get(request_id)
        if call is not None:
            call.message = message
        result = self._refusal(message, agent_id)
        if result is None:
            # Admitted and deduplicated by the calling node: neither is done twice.
            result = await self._router.dispatch(message, admitted=True)
            self._stats.remote_calls_served += 1
        await self._reply(reply_to, request_id, result)

    def _refusal(self, message: ReachMessage, agent_id: str) -> ReachResult | None:
        """Why the call is not delivered here at all, or None."""
        deadline = message.meta_info.deadline
        if deadline is not None and deadline <= time.time():
            error = f"the deadline passed before the call reached node {self.node_id}; it was not delivered"
            kind, status = ErrorKind.TIMEOUT, ResultStatus.TIMEOUT
        elif not self._hosts(agent_id):
            error = f"agent {agent_id} is not hosted on node {self.node_id} (any more); not delivered"
            kind, status = ErrorKind.UNKNOWN_AGENT, ResultStatus.NO_CANDIDATE
        else:
            return None
        return error_result(
            message,
            status,
            kind,
            error,
            fault=Fault.ROUTER,
            agent_id=agent_id,
            retryable=True,
            delivered=False,
        )

    async def _reply(self, reply_to: str, request_id: str, result: ReachResult) -> None:
        stream = self._keys.replies(reply_to)
        entry = orjson.dumps({"id": request_id, "result": result.model_dump(mode="json")})
        now = time.monotonic()
        try:
            await append(self._commands, stream, entry)
            if now - self._expiry_set.get(reply_to, float("-inf")) > self._reply_ttl_ms / 2000:
                self._expiry_set[reply_to] = now
                await self._commands.execute("PEXPIRE", stream, self._reply_ttl_ms)
        except (RedisError, OSError) as exc:
            logger.warning(
                "node %s could not answer call %s of node %s (it ends at its deadline): %s",
                self.node_id,
                request_id,
                reply_to,
                exc,
            )
