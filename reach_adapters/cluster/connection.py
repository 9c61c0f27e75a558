"""Opening the cluster's Redis, for a node and for a remote worker alike: the URL and lease
checked first, and timeouts derived from the lease so an outage is noticed within a resync."""

from __future__ import annotations

import redis.asyncio as redis
from redis.asyncio.retry import Retry
from redis.backoff import ExponentialBackoff

from reach_adapters.cluster.errors import ClusterError

__all__ = ["DEFAULT_LEASE_TTL_S", "MIN_LEASE_TTL_S", "SCHEMES", "connect", "io_timeout_s"]

DEFAULT_LEASE_TTL_S = 15.0
MIN_LEASE_TTL_S = 0.5
SCHEMES = ("redis://", "rediss://", "unix://")


def io_timeout_s(lease_ttl_s: float) -> float:
    """How long one exchange with Redis may take before it counts as failed: short enough
    to notice an outage within a resync period, never under 0.2 s nor over 2 s."""
    return min(max(lease_ttl_s / 6, 0.2), 2.0)


def connect(url: str, lease_ttl_s: float) -> redis.Redis:
    """A client of the cluster at `url` (``redis://HOST:PORT/DB``) for a process holding leases of
    `lease_ttl_s`; raises `ClusterError` for a malformed URL or a lease too short. Connects lazily."""
    if not url.startswith(SCHEMES):
        msg = f"registry URL {url!r}: expected redis://HOST:PORT/DB (or rediss://, unix://)"
        raise ClusterError(msg)
    if not lease_ttl_s >= MIN_LEASE_TTL_S:
        # Renewals every TTL/3 and resyncs every TTL/6: a tiny lease floods Redis with both.
        msg = f"lease_ttl_s must be at least {MIN_LEASE_TTL_S} seconds, got {lease_ttl_s}"
        raise ClusterError(msg)
    timeout = io_timeout_s(lease_ttl_s)
    return redis.Redis.from_url(
        url,
        socket_timeout=timeout,
        socket_connect_timeout=timeout,
        retry=Retry(ExponentialBackoff(cap=timeout, base=0.05), retries=1),
    )
