"""`ClusterNode`: joins a router to the cluster named by a Redis URL.

Three background tasks, none on the call path: the publisher (this node's leases, renewed every
TTL/3 and at once on a catalog change), the listener (other nodes' changes over pub/sub), and the
clock (a full resync every TTL/6, lease judgement, the router brought in step with the cache).
Two more carry calls between nodes: the reader of this node's replies (`Transport`) and the
reader of its inbox (`Inbox`).
"""

from __future__ import annotations

import asyncio
import logging
import secrets
import socket
import time
from collections.abc import Coroutine
from typing import Any

import orjson
import redis.asyncio as redis
from redis.exceptions import RedisError

from reach_adapters.cluster.cache import ClusterCache, LeaseKey
from reach_adapters.cluster.connection import DEFAULT_LEASE_TTL_S, MIN_LEASE_TTL_S, connect, io_timeout_s
from reach_adapters.cluster.errors import ClusterError
from reach_adapters.cluster.inbox import Inbox
from reach_adapters.cluster.leases import Leases
from reach_adapters.cluster.mirror import Mirror
from reach_adapters.cluster.outage import Outage
from reach_adapters.cluster.records import Keys, checked_keys
from reach_adapters.cluster.stats import NodeStats
from reach_adapters.cluster.tasks import DEFAULT_VISIBILITY_TIMEOUT_S, ClusterTasks
from reach_adapters.cluster.transport import Transport
from reach_adapters.router import Router

__all__ = ["DEFAULT_LEASE_TTL_S", "MIN_LEASE_TTL_S", "ClusterNode"]

logger = logging.getLogger(__name__)


class ClusterNode:
    """This process as a node of a cluster: its agents leased in Redis, others' agents listed.

    Use `join`; `aclose` leaves (deleting this node's leases, so the others drop its agents at
    once), and so does closing the router. While Redis is out of reach the node keeps routing to
    its own agents, warns once per outage, retries with a growing backoff, and resyncs when Redis is back.
    """

    def __init__(
        self, router: Router, client: redis.Redis, *, node_id: str, lease_ttl_s: float, keys: Keys
    ) -> None:
        self.router = router
        self.node_id = node_id
        self.lease_ttl_s = lease_ttl_s
        self.keys = keys
        self._client = client
        self._ttl_ms = max(int(lease_ttl_s * 1000), 3)
        self.cache = ClusterCache(node_id)
        self.stats = NodeStats()
        self.leases = Leases(router, client, keys, node_id, ttl_ms=self._ttl_ms, stats=self.stats)
        self._outage = Outage(
            f"node {node_id}",
            first_s=self.tick_s,
            meanwhile="serving this node's agents from the cache and retrying",
            recovery="resyncing",
            on_back=self.leases.forget,
        )
        # Blocking reads return well within the socket timeout, which would cut them off.
        block_ms = max(int(io_timeout_s(lease_ttl_s) * 500), 50)
        self.transport = Transport(client, keys, node_id, self.stats, block_ms=block_ms, outage=self._outage)
        self._mirror = Mirror(router, self.cache, self.transport)
        self.inbox = Inbox(
            router,
            client,
            keys,
            node_id,
            self.stats,
            self._hosts,
            block_ms=block_ms,
            # A replies stream outlives its last reply by this much: a dead caller's goes away.
            reply_ttl_ms=max(self._ttl_ms * 2, 10_000),
            outage=self._outage,
        )
        self._tasks: list[asyncio.Task[None]] = []
        self._stop_listening = router.on_catalog_change(self.leases.changed)
        # A node must not outlive its router: closing the router makes it leave.
        self._stop_closing = router.on_close(self.aclose)
        self._closed = False
        self._left = False
        self.tasks: ClusterTasks | None = None

    @property
    def client(self) -> redis.Redis:
        """The node's connection to the cluster's Redis, for what else a node keeps there (the
        A2A tasks `reach serve` answers for)."""
        return self._client

    @property
    def renew_s(self) -> float:
        """How often this node renews its leases: TTL/3."""
        return self.lease_ttl_s / 3

    @property
    def tick_s(self) -> float:
        """How often the cache is resynced and leases judged: TTL/6, so staleness stays < TTL."""
        return self.lease_ttl_s / 6

    @classmethod
    async def join(
        cls,
        router: Router,
        url: str,
        *,
        node_id: str | None = None,
        lease_ttl_s: float = DEFAULT_LEASE_TTL_S,
        prefix: str = "reach:",
        tasks: bool = True,
        task_visibility_timeout_s: float = DEFAULT_VISIBILITY_TIMEOUT_S,
    ) -> ClusterNode:
        """Make `router` a node of the cluster at `url` (``redis://HOST:PORT/DB``).

        Publishes its agents and reads the whole catalog before returning, so other nodes' agents
        are listed at once. With `tasks`, the router's async tasks are kept and run in the
        cluster's Redis (`ClusterTasks`, with `task_visibility_timeout_s`). Raises `ClusterError`
        when Redis does not answer, or for a malformed URL, lease or `prefix`.
        """
        keys = checked_keys(prefix)
        client = connect(url, lease_ttl_s)
        node = cls(
            router,
            client,
            node_id=node_id or f"{socket.gethostname()}-{secrets.token_hex(3)}",
            lease_ttl_s=lease_ttl_s,
            keys=keys,
        )
        try:
            await node.leases.claim()
            # Reading the inbox before the leases are out: no call can come before its reader.
            await node.inbox.start()
            await node.transport.start()
            await node.leases.publish()
            await node._resync()
        except ClusterError:
            await node.aclose(deregister=False)
            raise
        except RedisError as exc:
            await node.aclose(deregister=False)
            msg = f"cannot reach the cluster registry at {url}: {exc}; start Redis there or fix the URL"
            raise ClusterError(msg) from exc
        await node._mirror.apply(time.monotonic())
        if tasks:
            try:
                node.tasks = await ClusterTasks.start(
                    router,
                    client,
                    node_id=node.node_id,
                    keys=node.keys,
                    stats=node.stats,
                    visibility_timeout_s=task_visibility_timeout_s,
                )
            except ClusterError:
                await node.aclose()
                raise
        node._start()
        logger.info(
            "node %s joined the cluster at %s: %d agent(s) here, %d on other nodes, lease %.1f s",
            node.node_id,
            url,
            len(node.leases.published),
            len(node.cache.leases),
            lease_ttl_s,
        )
        return node

    def _start(self) -> None:
        self._spawn(self.leases.renewing(self._outage, self.renew_s, lambda: self._closed), "publisher")
        self._spawn(self._listening(), "listener")
        self._spawn(self._ticking(), "clock")

    def _spawn(self, work: Coroutine[Any, Any, None], name: str) -> None:
        self._tasks.append(asyncio.get_running_loop().create_task(work, name=f"reach cluster {name}"))

    async def aclose(self, *, deregister: bool = True) -> None:
        """Leave the cluster: stop the background tasks, answer calls from other nodes still
        running here (outcome unknown), delete this node's leases (unless ``deregister=False``:
        they then expire on their own) and unlist other nodes' agents. Closing again does nothing.
        """
        if self._left:
            return
        self._left = True
        self._stop_listening()
        self._stop_closing()
        if self.tasks is not None:
            await self.tasks.aclose()
        await self.inbox.aclose()
        # A flag as well as cancel(): on 3.11 a cancel racing a timeout can be swallowed.
        self._closed = True
        self.leases.changed()
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        self._tasks.clear()
        if deregister:
            try:
                await self.leases.delete()
            except RedisError as exc:
                logger.warning(
                    "node %s left without deleting its leases (they expire): %s", self.node_id, exc
                )
        await self.transport.aclose()
        await self._mirror.clear()
        await self._client.aclose()

    def _hosts(self, agent_id: str) -> bool:
        """Whether `agent_id` is one of this node's own agents (not another node's, listed here)."""
        return agent_id in self.router and agent_id not in self._mirror.remote

    # -- other nodes' leases -----------------------------------------------------------------

    async def _resync(self) -> None:
        """Read every lease with its remaining TTL (SCAN, then GET and PTTL in one round trip)."""
        started = time.monotonic()
        keys = [key async for key in self._client.scan_iter(match=self.keys.leases, count=1000)]
        async with self._client.pipeline(transaction=False) as pipe:
            for key in keys:
                pipe.get(key)
                pipe.pttl(key)
            replies = await pipe.execute()
        now = time.monotonic()
        seen: set[LeaseKey] = set()
        for raw, left in zip(replies[::2], replies[1::2], strict=True):
            if raw is not None and left > 0:
                observed = self.cache.observe(raw, left, now, started)
                if observed is not None:
                    seen.add(observed)
        self.cache.resynced(seen, started)

    async def _ticking(self) -> None:
        next_try = 0.0
        while not self._closed:
            now = time.monotonic()
            if now >= next_try:
                await self._outage.guarded("resync", self._resync())
                pause = self._outage.pause("resync")
                next_try = now + (self.tick_s if pause is None else pause)
            await self._mirror.apply(time.monotonic())
            await asyncio.sleep(self.tick_s)

    async def _listening(self) -> None:
        while not self._closed:
            await self._outage.guarded("listener", self._listen())
            pause = self._outage.pause("listener")
            await asyncio.sleep(self.tick_s if pause is None else pause)

    async def _listen(self) -> None:
        async with self._client.pubsub(ignore_subscribe_messages=True) as pubsub:
            await pubsub.subscribe(self.keys.channel)
            # Listening again: this loop's part of an outage is over (`_listen` returns only on leaving).
            self._outage.ok("listener")
            while not self._closed:
                message = await pubsub.get_message(timeout=self.tick_s)
                if message is not None and message.get("type") == "message":
                    self._announced(message["data"])
                    await self._mirror.apply(time.monotonic())

    def _announced(self, data: bytes) -> None:
        try:
            message = orjson.loads(data)
            if message["op"] == "put":
                raw = orjson.dumps(message["record"], option=orjson.OPT_SORT_KEYS)
                self.cache.observe(raw, int(message["record"]["ttl_ms"]), time.monotonic())
            elif message["op"] == "del":
                reason = f"deregistered on node {message['node']}"
                self.cache.forget(str(message["agent_id"]), str(message["node"]), reason)
        except (ValueError, KeyError, TypeError):
            logger.warning("ignoring a malformed message on the cluster channel: %.200r", data)
