"""What a cluster's Redis says about it, read without being a node (``reach cluster``): each node
with its agents and the age of its leases, and the async task queue with its dead letters.

Lease keys are found with `Keys.leases` and grouped by each record's `node` field, not by the
key's name, so both layouts (``lease:AGENT`` and ``lease:NODE:AGENT``) read the same.
"""

from __future__ import annotations

import time
from collections import Counter
from dataclasses import dataclass
from typing import Any

import redis.asyncio as redis
from redis.exceptions import RedisError, ResponseError

from reach_adapters.cluster.cache import CachedLease, lease_state
from reach_adapters.cluster.errors import ClusterError
from reach_adapters.cluster.records import Keys, LeaseRecord, checked_keys

__all__ = ["AgentLease", "ClusterSurvey", "NodeSurvey", "TaskQueueSurvey", "survey"]


@dataclass(frozen=True, slots=True)
class AgentLease:
    """One agent's lease as Redis holds it; `state` is what the nodes show (SUSPICIOUS when late)."""

    record: LeaseRecord
    left_ms: int
    state: str

    @property
    def age_ms(self) -> int:
        """Time since the last renewal: the lease is set for `ttl_ms` at each one."""
        return max(self.record.ttl_ms - self.left_ms, 0)


@dataclass(frozen=True, slots=True)
class NodeSurvey:
    node_id: str
    agents: tuple[AgentLease, ...]

    @property
    def states(self) -> dict[str, int]:
        return dict(sorted(Counter(agent.state for agent in self.agents).items()))

    @property
    def left_ms(self) -> int:
        """The shortest lease left among its agents: the first that would end if it stopped."""
        return min(agent.left_ms for agent in self.agents)

    @property
    def renewed_ms_ago(self) -> int:
        return min(agent.age_ms for agent in self.agents)

    def to_dict(self) -> dict[str, Any]:
        return {
            "node": self.node_id,
            "agents": [
                {
                    "agent_id": a.record.agent_id,
                    "state": a.state,
                    "lease_left_ms": a.left_ms,
                    "age_ms": a.age_ms,
                }
                for a in self.agents
            ],
            "states": self.states,
            "lease_left_ms": self.left_ms,
            "renewed_ms_ago": self.renewed_ms_ago,
        }


@dataclass(frozen=True, slots=True)
class TaskQueueSurvey:
    """The async task stream: entries in it, those delivered and not acked yet, and dead letters."""

    length: int
    pending: int
    lag: int | None
    consumers: int
    dead_letters: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "length": self.length,
            "pending": self.pending,
            "lag": self.lag,
            "consumers": self.consumers,
            "dead_letters": self.dead_letters,
        }


@dataclass(frozen=True, slots=True)
class ClusterSurvey:
    nodes: tuple[NodeSurvey, ...]
    queue: TaskQueueSurvey | None
    # Lease keys whose value no node wrote (another program's keys under the prefix?).
    malformed: int

    def to_dict(self) -> dict[str, Any]:
        return {
            "nodes": [node.to_dict() for node in self.nodes],
            "task_queue": None if self.queue is None else self.queue.to_dict(),
            "malformed_leases": self.malformed,
        }


async def survey(url: str, *, prefix: str = "reach:", timeout_s: float = 5.0) -> ClusterSurvey:
    """Read the cluster at `url` once. A malformed URL raises ValueError (redis-py's); a malformed
    `prefix` or a Redis that does not answer within `timeout_s`, `ClusterError`."""
    keys = checked_keys(prefix)
    client = redis.Redis.from_url(
        url, socket_timeout=timeout_s, socket_connect_timeout=timeout_s, decode_responses=True
    )
    try:
        nodes, malformed = await _nodes(client, keys)
        queue = await _queue(client, keys)
    except RedisError as exc:
        msg = f"cannot reach the cluster registry at {url}: {exc}; start Redis there or fix the URL"
        raise ClusterError(msg) from exc
    finally:
        await client.aclose()
    return ClusterSurvey(nodes, queue, malformed)


async def _nodes(client: redis.Redis, keys: Keys) -> tuple[tuple[NodeSurvey, ...], int]:
    names = [key async for key in client.scan_iter(match=keys.leases, count=1000)]
    async with client.pipeline(transaction=False) as pipe:
        for name in names:
            pipe.get(name)
            pipe.pttl(name)
        replies = await pipe.execute()
    now = time.monotonic()
    by_node: dict[str, list[AgentLease]] = {}
    malformed = 0
    for raw, left in zip(replies[::2], replies[1::2], strict=True):
        if raw is None or left <= 0:
            continue  # ended between SCAN and GET
        try:
            record = LeaseRecord.loads(raw)
        except (ValueError, KeyError, TypeError):
            malformed += 1
            continue
        state, _ = lease_state(CachedLease(record, now + left / 1000.0, now), now)
        by_node.setdefault(record.node, []).append(AgentLease(record, left, state.value))
    nodes = tuple(
        NodeSurvey(node, tuple(sorted(agents, key=lambda a: a.record.agent_id)))
        for node, agents in sorted(by_node.items())
    )
    return nodes, malformed


async def _queue(client: redis.Redis, keys: Keys) -> TaskQueueSurvey | None:
    """None when the cluster has no task queue yet and no dead letters."""
    async with client.pipeline(transaction=False) as pipe:
        pipe.exists(keys.task_queue)
        pipe.xlen(keys.task_queue)
        pipe.xlen(keys.dead_letters)
        exists, length, dead = await pipe.execute()
    if not exists and not dead:
        return None
    group: dict[str, Any] = {}
    if exists:
        try:
            groups = await client.xinfo_groups(keys.task_queue)
        except ResponseError:
            groups = []  # not a stream: another program's key under the prefix
        group = next((g for g in groups if g.get("name") == keys.task_group), {})
    return TaskQueueSurvey(
        length=int(length),
        pending=int(group.get("pending", 0)),
        lag=None if group.get("lag") is None else int(group["lag"]),
        consumers=int(group.get("consumers", 0)),
        dead_letters=int(dead),
    )
