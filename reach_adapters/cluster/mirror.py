"""Keeps the local router in step with the cluster cache: other nodes' agents as `RemoteAgent`s."""

from __future__ import annotations

import logging

from reach_adapters.cluster.cache import CachedLease, ClusterCache, lease_state
from reach_adapters.cluster.remote import RemoteAgent
from reach_adapters.cluster.transport import Transport
from reach_adapters.errors import ReachError
from reach_adapters.router import AgentState, Router

__all__ = ["Mirror"]

logger = logging.getLogger(__name__)


class Mirror:
    """Registers, updates and removes the router's `RemoteAgent`s from the cache's leases.

    The router lists one agent per id: when several other nodes host one agent id, the one listed
    first stays listed while its lease lasts, then another takes its place. Runs on the node's
    clock ticks and after each pub/sub message; never on the call path. The transport hears of
    every lease that ended, so calls waiting on it end too.
    """

    def __init__(self, router: Router, cache: ClusterCache, transport: Transport) -> None:
        self._router = router
        self._cache = cache
        self._transport = transport
        self.remote: dict[str, RemoteAgent] = {}
        # Capability declarations last applied per agent, to re-declare only on a change.
        self._declared: dict[str, tuple[dict[str, object], ...]] = {}
        self._clashes: set[str] = set()

    async def apply(self, now: float) -> None:
        cache = self._cache
        cache.expire(now)
        gone, cache.gone = cache.gone, {}
        for (node, agent_id), reason in gone.items():
            self._transport.lost(node, agent_id, reason)
            listed = self.remote.get(agent_id)
            if listed is not None and listed.hosted_on == node:
                await self._remove(agent_id, reason)
        for agent_id, lease in self._listed().items():
            agent = self.remote.get(agent_id)
            record = lease.record
            if agent is None:
                agent = self._add(agent_id, record.node, record.capabilities)
                if agent is None:
                    continue
            elif record.capabilities != self._declared.get(agent_id) and agent.handle is not None:
                agent.handle.set_capabilities(list(record.capabilities))
            self._declared[agent_id] = record.capabilities
            state, reason = lease_state(lease, now)
            if agent.handle is not None:
                agent.handle.set_state(state, reason)

    def _listed(self) -> dict[str, CachedLease]:
        """One lease per agent id: the listed host's while it holds one, else any other's."""
        chosen: dict[str, CachedLease] = {}
        for (node, agent_id), lease in self._cache.leases.items():
            listed = self.remote.get(agent_id)
            if agent_id not in chosen or (listed is not None and listed.hosted_on == node):
                chosen[agent_id] = lease
        return chosen

    async def clear(self) -> None:
        """Remove every remote agent (the node leaves the cluster)."""
        for agent_id in list(self.remote):
            await self._remove(agent_id, "this node left the cluster")

    def _add(
        self, agent_id: str, node: str, capabilities: tuple[dict[str, object], ...]
    ) -> RemoteAgent | None:
        if agent_id in self._router:
            if agent_id not in self._clashes:
                self._clashes.add(agent_id)
                logger.warning(
                    "agent %s of node %s has the id of an agent of this node; it is not listed here "
                    "(give each agent of the cluster its own instance id)",
                    agent_id,
                    node,
                )
            return None
        try:
            agent = RemoteAgent(agent_id, node, list(capabilities), self._transport)
            self._router.register(agent)
        except ReachError as exc:
            logger.warning("cannot list agent %s of node %s: %s", agent_id, node, exc)
            return None
        self._clashes.discard(agent_id)
        self.remote[agent_id] = agent
        return agent

    async def _remove(self, agent_id: str, reason: str) -> None:
        agent = self.remote.pop(agent_id, None)
        self._declared.pop(agent_id, None)
        if agent is None:
            return
        if agent.handle is not None:
            agent.handle.set_state(AgentState.OFFLINE, reason)
        try:
            await self._router.deregister(agent_id, drain_timeout=0)
        except ReachError as exc:
            logger.debug("remote agent %s already gone from the router: %s", agent_id, exc)
