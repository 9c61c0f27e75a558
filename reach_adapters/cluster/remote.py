"""`RemoteAgent`: an agent another node hosts, as this node's router lists and calls it."""

from __future__ import annotations

from collections.abc import Sequence

from reach_adapters.cluster.transport import Transport
from reach_adapters.router import (
    AgentHandle,
    Capability,
    ReachMessage,
    ReachResult,
    time_left,
    validate_capabilities,
)

__all__ = ["RemoteAgent"]

# A call with neither a deadline nor a capability this agent declares (the router sets both).
_DEFAULT_TIMEOUT_S = 30.0


class RemoteAgent:
    """An agent hosted on node `hosted_on`, listed here with that node, its capabilities (the
    declarations its node leased: timeout, concurrency, idempotency, schemas, all as there) and its
    lease state; calls go to it over the cluster's Redis (`Transport`).

    The declarations are the host's own, so this router retries, times out and fails over across
    nodes as it would in one process: a failure in transit is a router fault, never delivered (the
    next candidate at once); a host gone mid-call an outcome unknown, resent only where safe.
    """

    def __init__(
        self,
        agent_id: str,
        node: str,
        capabilities: Sequence[Capability | dict[str, object]],
        transport: Transport,
    ) -> None:
        self._agent_id = agent_id
        self.hosted_on = node
        self._capabilities = validate_capabilities(agent_id, capabilities, allow_empty=True)
        # The called capability's own timeout bounds a call with no deadline (computed once).
        self._timeouts_s = {cap.name: cap.timeout_ms / 1000.0 for cap in self._capabilities}
        self._transport = transport
        self.handle: AgentHandle | None = None

    @property
    def agent_id(self) -> str:
        return self._agent_id

    @property
    def capabilities(self) -> Sequence[Capability]:
        return self._capabilities

    def attach(self, handle: AgentHandle) -> None:
        self.handle = handle

    def __repr__(self) -> str:
        return f"RemoteAgent({self._agent_id!r}, node={self.hosted_on!r})"

    async def invoke(self, message: ReachMessage) -> ReachResult:
        cap_s = self._timeouts_s.get(message.meta_info.capability or "", _DEFAULT_TIMEOUT_S)
        timeout_s = time_left(message, cap_s)
        return await self._transport.call(self.hosted_on, self._agent_id, message, timeout_s)
