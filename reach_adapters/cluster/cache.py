"""The node's copy of the cluster catalog: other nodes' lease records and when each lease ends.

Routing never asks Redis: it reads the router, which the node keeps in step with this cache. The
cache learns from pub/sub messages (at once) and from a full resync every TTL/6 (expiry events and
pub/sub messages can be lost), and judges leases on its own clock between resyncs, so an agent
whose node went silent is found out even while Redis is down.

Leases are kept per (node, agent id): two nodes hosting one agent id hold two leases, and one
ending leaves the other in place.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass

from reach_adapters.cluster.records import LeaseRecord
from reach_adapters.router import AgentState

__all__ = ["CachedLease", "ClusterCache", "LeaseKey", "lease_state"]

logger = logging.getLogger(__name__)

# (node, agent id): what one lease is about.
LeaseKey = tuple[str, str]

# States another node's agent may show here; one that is leaving or reconnecting there is offline
# here, since this node can neither wait for it nor drain it.
_SHOWN = frozenset({AgentState.ONLINE, AgentState.BUSY, AgentState.SUSPICIOUS, AgentState.OFFLINE})


@dataclass(slots=True)
class CachedLease:
    record: LeaseRecord
    # When the lease ends, on this node's monotonic clock (observed remaining TTL + observation time).
    expires_at: float
    seen_at: float


def lease_state(lease: CachedLease, now: float) -> tuple[AgentState, str]:
    """The state this node shows for a lease at `now`.

    A healthy lease always has more than TTL/2 left as seen here (renewed every TTL/3, seen at
    most TTL/6 late); under TTL/3 left, its renewal is a whole renewal period late: SUSPICIOUS.
    """
    record = lease.record
    left = lease.expires_at - now
    ttl = record.ttl_ms / 1000.0
    if left < ttl / 3:
        late = ttl * 2 / 3 - left
        return AgentState.SUSPICIOUS, f"lease of node {record.node} not renewed for {late:.1f} s past due"
    if record.state in _SHOWN:
        return record.state, record.state_reason
    return AgentState.OFFLINE, f"{record.state} on node {record.node}"


class ClusterCache:
    """Other nodes' leases by (node, agent id); records of this node (`node_id`) are left out."""

    def __init__(self, node_id: str) -> None:
        self.node_id = node_id
        self.leases: dict[LeaseKey, CachedLease] = {}
        # Leases ended since the router was last brought in step, with why.
        self.gone: dict[LeaseKey, str] = {}
        # When each lease was deregistered: a resync that read it before then must not revive it.
        self._forgotten: dict[LeaseKey, float] = {}

    def observe(
        self, raw: bytes, ttl_left_ms: int, now: float, read_since: float | None = None
    ) -> LeaseKey | None:
        """A lease seen in Redis (or announced) with `ttl_left_ms` left at `now`; its key, or
        None when it is this node's own or malformed. `read_since`: when the resync that read it
        began (a lease deregistered since then is gone, whatever that read saw)."""
        try:
            record = LeaseRecord.loads(raw)
        except (ValueError, KeyError, TypeError):
            logger.warning("ignoring a malformed lease record in the cluster registry: %.200r", raw)
            return None
        if record.node == self.node_id:
            return None
        key = (record.node, record.agent_id)
        if read_since is None:
            self._forgotten.pop(key, None)
        elif self._forgotten.get(key, read_since) > read_since:
            return None
        self.gone.pop(key, None)
        self.leases[key] = CachedLease(record, now + ttl_left_ms / 1000.0, now)
        return key

    def forget(self, agent_id: str, node: str, reason: str) -> None:
        """Drop `node`'s lease of `agent_id` (deregistered there, or the node left)."""
        self._forgotten[(node, agent_id)] = time.monotonic()
        if self.leases.pop((node, agent_id), None) is not None:
            self.gone[(node, agent_id)] = reason

    def resynced(self, seen: set[LeaseKey], started: float) -> None:
        """After a full read of the registry begun at `started`: leases not in it have ended,
        unless announced after the read began (the read may have passed their key before)."""
        self._forgotten = {key: at for key, at in self._forgotten.items() if at >= started}
        ended = [key for key, lease in self.leases.items() if key not in seen and lease.seen_at < started]
        for key in ended:
            del self.leases[key]
            self.gone[key] = f"lease of node {key[0]} expired"

    def expire(self, now: float) -> None:
        """Drop leases that ended by this node's clock (Redis may be out of reach to tell)."""
        for key, lease in list(self.leases.items()):
            if lease.expires_at <= now:
                del self.leases[key]
                self.gone[key] = f"lease of node {key[0]} expired"
