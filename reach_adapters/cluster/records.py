"""What a node publishes about each of its agents (a lease record), and where it lives in Redis.

One key per lease (``{prefix}lease:{agent_id}``, set with ``SET ... PX ttl``): Redis 7.0 has no
per-field hash TTL, and a key that expires on its own is the lease. Catalog changes go out on one
pub/sub channel (``{prefix}catalog``) as ``{"op": "put", "record": ...}`` or ``{"op": "del", ...}``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from reach_adapters.router import AgentState

__all__ = ["Keys", "LeaseRecord"]


@dataclass(frozen=True, slots=True)
class Keys:
    """The names a cluster uses in its Redis database; `prefix` keeps clusters sharing one apart."""

    prefix: str = "reach:"

    def lease(self, agent_id: str) -> str:
        return f"{self.prefix}lease:{agent_id}"

    @property
    def leases(self) -> str:
        """The SCAN pattern of every lease key."""
        return f"{self.prefix}lease:*"

    @property
    def channel(self) -> str:
        return f"{self.prefix}catalog"


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
