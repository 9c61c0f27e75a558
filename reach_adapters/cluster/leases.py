"""The leases one process holds for the agents its router hosts, whether it is a node or a
remote worker: written in one transaction every TTL/3 and at once when its catalog changes,
announced on the catalog channel when they change, deleted (and announced) when it leaves.

The same transaction keeps the process's inbox stream alive: it expires `INBOX_TTLS` leases after
the last renewal, so a process killed without leaving (whose id, ``HOSTNAME-RANDOM`` by default,
never comes back) leaves no stream behind; leaving deletes it at once."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Callable
from typing import Any

import orjson
import redis.asyncio as redis

from reach_adapters.cluster.errors import ClusterError
from reach_adapters.cluster.outage import Outage
from reach_adapters.cluster.records import Keys, LeaseRecord
from reach_adapters.cluster.stats import NodeStats
from reach_adapters.router import Router

__all__ = ["INBOX_TTLS", "Leases"]

logger = logging.getLogger(__name__)

# An inbox outlives its process's last renewal by this many leases: renewed every third of one,
# a live process's inbox never expires, even with two renewals missed.
INBOX_TTLS = 2
# The renewal loop's name in its process's `Outage`.
_LOOP = "leases"


class Leases:
    """The leases of `router`'s own agents (those with no `node`) held under `node_id`.

    `renewing` is the renewal loop; `changed` wakes it at once (the router's catalog changed,
    Redis is back); `forget` makes its next renewal announce every lease again.
    """

    def __init__(
        self,
        router: Router,
        client: redis.Redis,
        keys: Keys,
        node_id: str,
        *,
        ttl_ms: int,
        stats: NodeStats,
    ) -> None:
        self._router = router
        self._client = client
        self._keys = keys
        self.node_id = node_id
        self.ttl_ms = ttl_ms
        self._stats = stats
        self.published: dict[str, bytes] = {}
        self._wake = asyncio.Event()
        # This process's claim on its node id (`Keys.node`), and whether it holds it.
        self._token = secrets.token_hex(8)
        self._claimed = False

    def changed(self) -> None:
        self._wake.set()

    def forget(self) -> None:
        """Announce every lease at the next renewal: messages sent meanwhile may have been lost."""
        self.published = {}
        self._wake.set()

    def records(self) -> dict[str, bytes]:
        return {
            info.agent_id: LeaseRecord(
                agent_id=info.agent_id,
                node=self.node_id,
                state=info.state,
                state_reason=info.state_reason,
                ttl_ms=self.ttl_ms,
                capabilities=tuple(cap.model_dump(mode="json") for cap in info.capabilities),
            ).dumps()
            for info in self._router.catalog()
            if info.node is None
        }

    async def claim(self) -> None:
        """Take the node id, or raise `ClusterError` when another live process holds it.

        A process that died without leaving holds it until its claim lapses (one lease): a
        restart under the same id waits that long, rather than serve an inbox beside it.
        """
        key = self._keys.node(self.node_id)
        end = time.monotonic() + self.ttl_ms / 1000 + 0.5
        waited = False
        while not await self._client.set(key, self._token, nx=True, px=self.ttl_ms):
            if time.monotonic() > end:
                msg = (
                    f"node id {self.node_id!r} is held by another live process of this cluster; give this "
                    "one another id (--node-id, registry.node_id), or stop the other first"
                )
                raise ClusterError(msg)
            if not waited:
                waited = True
                logger.info(
                    "node id %s is still held (a previous run?): waiting for its claim to lapse", self.node_id
                )
            await asyncio.sleep(min(0.2, self.ttl_ms / 4000))
        self._claimed = True

    async def publish(self) -> None:
        """Renew every lease and the inbox's expiry in one transaction; announce what changed."""
        records = self.records()
        removed = [agent_id for agent_id in self.published if agent_id not in records]
        async with self._client.pipeline(transaction=True) as pipe:
            for agent_id, raw in records.items():
                pipe.set(self._keys.lease(self.node_id, agent_id), raw, px=self.ttl_ms)
                if raw != self.published.get(agent_id):
                    pipe.publish(self._keys.channel, b'{"op":"put","record":' + raw + b"}")
            self._queue_deletes(pipe, removed)
            # No-op until a caller first XADDs to it (which sets no expiry): the next renewal does.
            pipe.pexpire(self._keys.inbox(self.node_id), self.ttl_ms * INBOX_TTLS)
            if self._claimed:
                pipe.set(self._keys.node(self.node_id), self._token, px=self.ttl_ms)
            await pipe.execute()
        self.published = records

    async def delete(self) -> None:
        """Delete every lease published and the inbox (leaving): the others drop these agents at
        once, and nobody reads that inbox any more."""
        async with self._client.pipeline(transaction=True) as pipe:
            self._queue_deletes(pipe, list(self.published))
            if self._claimed:
                pipe.delete(self._keys.inbox(self.node_id), self._keys.node(self.node_id))
            await pipe.execute()
        self.published = {}

    def _queue_deletes(self, pipe: Any, agent_ids: list[str]) -> None:
        for agent_id in agent_ids:
            pipe.delete(self._keys.lease(self.node_id, agent_id))
            message = {"op": "del", "agent_id": agent_id, "node": self.node_id}
            pipe.publish(self._keys.channel, orjson.dumps(message))

    async def renewing(self, outage: Outage, renew_s: float, closed: Callable[[], bool]) -> None:
        """Renew every `renew_s` (sooner when woken), backing off while Redis refuses the leases,
        until `closed()`: a flag as well as cancel(), since on 3.11 a cancel racing a timeout can
        be swallowed (set the flag, then wake it with `changed`)."""
        while not closed():
            pause = outage.pause(_LOOP)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(renew_s if pause is None else pause):
                    await self._wake.wait()
            self._wake.clear()
            if closed():
                return
            if await outage.guarded(_LOOP, self.publish()):
                self._stats.lease_renewals += 1
            else:
                self._stats.lease_renewal_failures += 1
