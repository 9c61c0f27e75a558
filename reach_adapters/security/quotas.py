"""Per-principal rate limits, kept by the `limits` library (moving windows).

Its storage is in memory for one process; the nodes of a cluster count together in its Redis
(`Quotas.shared`). While that Redis is out of reach each node counts on its own, so a quota holds
per node until it is back: refusing every call for an outage would stop the cluster, letting every
call through would lift the limit.
"""

from __future__ import annotations

import logging
import math
import time

from limits import RateLimitItem, RateLimitItemPerMinute, RateLimitItemPerSecond
from limits.aio.storage import MemoryStorage, RedisStorage, Storage
from limits.aio.strategies import MovingWindowRateLimiter
from limits.errors import StorageError

from reach_adapters.router import ErrorKind, Refusal
from reach_adapters.security.errors import SecurityConfigError
from reach_adapters.security.spec import PrincipalSpec

__all__ = ["Quotas"]

logger = logging.getLogger(__name__)

# How long a node counts alone after shared storage failed, before it tries that storage again.
_RETRY_SHARED_S = 5.0
# limits names its Redis storages by scheme: redis:// becomes async+redis://, and so on.
_SCHEMES = {"redis://": "async+redis://", "rediss://": "async+rediss://", "unix://": "async+redis+unix://"}


class Quotas:
    """Takes calls from principals' quotas: ``quota_per_minute`` and ``burst`` (per second)."""

    def __init__(self, storage: Storage | None = None) -> None:
        self._limiter = MovingWindowRateLimiter(MemoryStorage() if storage is None else storage)
        # Counts of this process alone, for when shared storage is out of reach.
        self._local = None if storage is None else MovingWindowRateLimiter(MemoryStorage())
        self._outage = False
        self._retry_at = 0.0
        self._items: dict[tuple[int | None, int | None], list[tuple[RateLimitItem, str]]] = {}

    @classmethod
    def shared(cls, url: str, prefix: str) -> Quotas:
        """Quotas counted in the Redis at `url` (a cluster's registry), under `prefix`."""
        scheme = next((s for s in _SCHEMES if url.startswith(s)), None)
        if scheme is None:
            msg = f"quota storage URL {url!r}: expected redis://, rediss:// or unix://"
            raise SecurityConfigError(msg)
        storage = RedisStorage(
            _SCHEMES[scheme] + url[len(scheme) :],
            implementation="redispy",
            key_prefix=f"{prefix}quota",
            wrap_exceptions=True,
            # A Redis that hangs must not hold every call's admission: a second, then per node.
            socket_timeout=1.0,
            socket_connect_timeout=1.0,
        )
        return cls(storage)

    async def take(self, principal: str, spec: PrincipalSpec, cost: int = 1) -> Refusal | None:
        """Count `cost` calls for `principal`, or refuse when a limit would be passed, saying which
        limit and when to try again.

        A limit that refuses counts nothing; with both limits set, a call the minute's quota
        refuses has used its place in the second's burst (checked first, as the cheaper wait).
        """
        local = self._local
        if local is not None and self._outage and time.monotonic() < self._retry_at:
            return await self._take(local, principal, spec, cost)
        try:
            refusal = await self._take(self._limiter, principal, spec, cost)
        except StorageError as exc:
            if local is None:
                raise
            if not self._outage:
                logger.warning("quota storage out of reach (%s): counting quotas on this node alone", exc)
                self._outage = True
            # A Redis that hangs costs its timeout once per pause, not on every call.
            self._retry_at = time.monotonic() + _RETRY_SHARED_S
            return await self._take(local, principal, spec, cost)
        if self._outage:
            logger.warning("quota storage is back: counting quotas with the other nodes again")
            self._outage = False
        return refusal

    async def _take(
        self, limiter: MovingWindowRateLimiter, principal: str, spec: PrincipalSpec, cost: int
    ) -> Refusal | None:
        for item, name in self._limits(spec):
            if not await limiter.hit(item, principal, cost=cost):
                stats = await limiter.get_window_stats(item, principal)
                wait_s = max(math.ceil(stats.reset_time - time.time()), 1)
                error = (
                    f"principal {principal!r} is over its {name} of {item.amount} calls per "
                    f"{_unit(item)}; try again in {wait_s} s, or raise {name} in security.yaml"
                )
                return Refusal(ErrorKind.QUOTA_EXCEEDED, error, float(wait_s))
        return None

    def _limits(self, spec: PrincipalSpec) -> list[tuple[RateLimitItem, str]]:
        key = (spec.quota_per_minute, spec.burst)
        items = self._items.get(key)
        if items is None:
            items = []
            if spec.burst is not None:
                items.append((RateLimitItemPerSecond(spec.burst), "burst"))
            if spec.quota_per_minute is not None:
                items.append((RateLimitItemPerMinute(spec.quota_per_minute), "quota_per_minute"))
            self._items[key] = items
        return items


def _unit(item: RateLimitItem) -> str:
    return "minute" if isinstance(item, RateLimitItemPerMinute) else "second"
