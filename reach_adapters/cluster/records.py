"""What a node publishes about each of its agents (a lease record), and where it lives in Redis.

One key per lease (``{prefix}lease:{node}:{agent_id}``, set with ``SET ... PX ttl``): Redis 7.0 has no
per-field hash TTL, and a key that expires on its own is the lease. Catalog changes go out on one
pub/sub channel (``{prefix}catalog``) as ``{"op": "put", "record": ...}`` or ``{"op": "del", ...}``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import orjson

from reach_adapters.cluster.errors import ClusterError
from reach_adapters.router import AgentState

__all__ = ["PREFIX_PATTERN", "Keys", "LeaseRecord", "checked_keys"]

# The characters a cluster's key prefix may hold: none that SCAN MATCH reads as a pattern
# (``*?[]\``), so the resync of one cluster never reads another's leases.
PREFIX_PATTERN = r"^[A-Za-z0-9_.:\-]{1,64}$"
_PREFIX = re.compile(PREFIX_PATTERN)


@dataclass(frozen=True, slots=True)
class Keys:
    """The names a cluster uses in its Redis database; `prefix` keeps clusters sharing one apart."""

    prefix: str = "reach:"

    def lease(self, node: str, agent_id: str) -> str:
        """One agent's lease on one node: two nodes hosting one agent id hold two leases."""
        return f"{self.prefix}lease:{node}:{agent_id}"

    @property
    def leases(self) -> str:
        """The SCAN pattern of every lease key."""
        return f"{self.prefix}lease:*"

    @property
    def channel(self) -> str:
        return f"{self.prefix}catalog"

    def node(self, node: str) -> str:
        """Who holds node id `node`: one live process's random token, renewed with its leases, so
        two processes never serve one inbox (and run each call twice)."""
        return f"{self.prefix}node:{node}"

    def inbox(self, node: str) -> str:
        """The stream of calls (and cancellations) for the agents `node` hosts."""
        return f"{self.prefix}inbox:{node}"

    def replies(self, node: str) -> str:
        """The stream of answers to the calls `node` sent."""
        return f"{self.prefix}replies:{node}"

    def task(self, task_id: str) -> str:
        """An async task's record (JSON), created with ``SET NX``: one task per id in the cluster."""
        return f"{self.prefix}task:{task_id}"

    @property
    def task_index(self) -> str:
        """Sorted set of async task ids by submit time, for listing."""
        return f"{self.prefix}tasks:index"

    @property
    def task_queue(self) -> str:
        """The stream async tasks wait in; read by every node through one consumer group."""
        return f"{self.prefix}tasks:queue"

    @property
    def task_group(self) -> str:
        return "workers"

    @property
    def dead_letters(self) -> str:
        """The stream of tasks given up after too many deliveries."""
        return f"{self.prefix}tasks:dead"

    @property
    def task_events(self) -> str:
        """Pub/sub channel: ``{"op": "done", "task_id": ..., "record": {...}}`` (the finished record),
        ``{"op": "cancel", "task_id": ...}``."""
        return f"{self.prefix}tasks:events"


def checked_keys(prefix: str) -> Keys:
    """The `Keys` of the cluster under `prefix`, given by a user; `ClusterError` for a prefix
    with characters a key pattern would read as wildcards (or none, or too many)."""
    if not isinstance(prefix, str) or not _PREFIX.match(prefix):
        msg = (
            f"cluster key prefix {prefix!r}: use 1 to 64 letters, digits, '_', '.', ':', '-' "
            "(no glob characters such as '*', '?', '[' or ']'), e.g. 'reach:' or 'team1:'"
        )
        raise ClusterError(msg)
    return Keys(prefix)


@dataclass(frozen=True, slots=True)
class LeaseRecord:
    """One agent as its node declares it to the cluster; `capabilities` are the JSON declarations."""

    agent_id: str
    node: str
    state: AgentState
    state_reason: str
    ttl_ms: int
    capabilities: tuple[dict[str, Any], ...]

    def dumps(self) -> bytes:
        return orjson.dumps(
            {
                "agent_id": self.agent_id,
                "node": self.node,
                "state": self.state.value,
                "state_reason": self.state_reason,
                "ttl_ms": self.ttl_ms,
                "capabilities": self.capabilities,
            },
            option=orjson.OPT_SORT_KEYS,
        )

    @classmethod
    def loads(cls, raw: bytes | str) -> LeaseRecord:
        """Read a record another node wrote; raises ValueError (or KeyError, TypeError) when malformed."""
        data = orjson.loads(raw)
        return cls(
            agent_id=str(data["agent_id"]),
            node=str(data["node"]),
            state=AgentState(data["state"]),
            state_reason=str(data.get("state_reason", "")),
            ttl_ms=int(data["ttl_ms"]),
            capabilities=tuple(dict(cap) for cap in data["capabilities"]),
        )
