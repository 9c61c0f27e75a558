"""What an agent may tell the router about itself after registration."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from reach_adapters.router.capability import Capability
from reach_adapters.router.state import AgentState

__all__ = ["AgentHandle"]


class AgentHandle:
    """Given to an agent's optional ``attach(handle)`` when it is registered.

    Adapters use it to report what only they can see: an MCP server whose process died is OFFLINE
    at once, and a ``tools/list_changed`` notification changes the capabilities.
    """

    def __init__(
        self,
        agent_id: str,
        set_state: Callable[[AgentState, str], None],
        set_capabilities: Callable[[Sequence[Capability | Mapping[str, Any]]], None],
    ) -> None:
        self._agent_id = agent_id
        self._set_state = set_state
        self._set_capabilities = set_capabilities

    @property
    def agent_id(self) -> str:
        return self._agent_id

    def set_state(self, state: AgentState, reason: str = "") -> None:
        self._set_state(state, reason)

    def set_capabilities(self, capabilities: Sequence[Capability | Mapping[str, Any]]) -> None:
        """Replace the agent's declarations; in-flight calls keep the limits they started with."""
        self._set_capabilities(capabilities)
