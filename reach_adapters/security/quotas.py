"""Per-principal rate limits, kept by the `limits` library (moving windows).

Its storage is in memory for one process; the same limiter runs on shared storage (Redis) once
several nodes must count together.
"""

from __future__ import annotations

import math
import time

from limits import RateLimitItem, RateLimitItemPerMinute, RateLimitItemPerSecond
from limits.aio.storage import MemoryStorage, Storage
from limits.aio.strategies import MovingWindowRateLimiter

from reach_adapters.router import ErrorKind, Refusal
from reach_adapters.security.spec import PrincipalSpec

__all__ = ["Quotas"]


class Quotas:
    """Takes calls from principals' quotas: ``quota_per_minute`` and ``burst`` (per second)."""

    def __init__(self, storage: Storage | None = None) -> None:
        self._limiter = MovingWindowRateLimiter(MemoryStorage() if storage is None else storage)
        self._items: dict[tuple[int | None, int | None], list[tuple[RateLimitItem, str]]] = {}

    async def take(self, principal: str, spec: PrincipalSpec, cost: int = 1) -> Refusal | None:
        """Count `cost` calls for `principal`, or refuse when a limit would be passed, saying which
        limit and when to try again.

        A limit that refuses counts nothing; with both limits set, a call the minute's quota
        refuses has used its place in the second's burst (checked first, as the cheaper wait).
        """
        limiter = self._limiter
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
