"""`RemoteAgent`: an agent another node hosts, as this node's router lists it."""

from __future__ import annotations

from collections.abc import Sequence

from reach_adapters.router import (
    AgentHandle,
    Capability,
    Fault,
    ReachMessage,
    ReachResult,
    ResultStatus,
    error_result,
    validate_capabilities,
)

__all__ = ["REMOTE_DELIVERY", "RemoteAgent"]

# The error_type of a call to an agent of another node, until delivery across nodes is built.
REMOTE_DELIVERY = "RemoteDeliveryError"


class RemoteAgent:
    """A placeholder for an agent hosted on node `node`: listed in the catalog with its node, its
    capabilities and its lease state, so callers see every agent of the cluster.

    Delivery to another node is not built yet: a call chosen for it answers at once with a
    router-fault error that was never delivered, so the router goes on to the next candidate and
    no breaker counts it.
    """

    def __init__(
        self, agent_id: str, node: str, capabilities: Sequence[Capability | dict[str, object]]
    ) -> None:
        self._agent_id = agent_id
        self.hosted_on = node
        self._capabilities = validate_capabilities(agent_id, capabilities, allow_empty=True)
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
        error = (
            f"agent {self._agent_id} is hosted on node {self.hosted_on}; delivery to node {self.hosted_on} "
            "is not built yet, so only this node's own agents take calls"
        )
        return error_result(
            message,
            ResultStatus.ERROR,
            REMOTE_DELIVERY,
            error,
            fault=Fault.ROUTER,
            agent_id=self._agent_id,
            retryable=True,
            delivered=False,
        )
