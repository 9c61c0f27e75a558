"""Capability overrides from config files, laid over what any agent declares, now and later."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from middleware import ReachMessage, ReachResult
from reach_adapters.router.agent import Agent
from reach_adapters.router.capability import Capability, validate_capabilities
from reach_adapters.router.handle import AgentHandle

__all__ = ["PatchedAgent", "patch_capabilities"]


def patch_capabilities(
    agent_id: str,
    capabilities: Sequence[Capability | Mapping[str, Any]],
    patches: Mapping[str, Mapping[str, Any]],
) -> tuple[Capability, ...]:
    """`capabilities` with each patch's fields laid over the capability of that name."""
    if not capabilities:
        return ()
    patched = []
    for item in validate_capabilities(agent_id, capabilities):
        patch = patches.get(item.name)
        patched.append(item if not patch else item.model_copy(update=patch))
    return tuple(patched)


class PatchedAgent:
    """Wraps an agent so the router sees its capabilities with the config's overrides applied.

    Adapters that re-declare later (an MCP server's ``tools/list_changed``) go through the same
    patches. Everything else (``probe``, ``aclose``, ``astream``...) is the wrapped agent's own,
    present exactly when the wrapped agent has it, because the router looks for those by name.
    """

    def __init__(self, agent: Agent, patches: Mapping[str, Mapping[str, Any]]) -> None:
        self.wrapped = agent
        self._patches = {name: dict(patch) for name, patch in patches.items()}
        self._source: Sequence[Capability] = agent.capabilities
        self._capabilities = patch_capabilities(agent.agent_id, self._source, self._patches)

    @property
    def agent_id(self) -> str:
        return self.wrapped.agent_id

    @property
    def capabilities(self) -> Sequence[Capability]:
        current = self.wrapped.capabilities
        if current is not self._source:
            self._source = current
            self._capabilities = patch_capabilities(self.agent_id, current, self._patches)
        return self._capabilities

    def __repr__(self) -> str:
        return f"PatchedAgent({self.wrapped!r}, overrides={sorted(self._patches)})"

    def __getattr__(self, name: str) -> Any:
        return getattr(self.wrapped, name)

    def attach(self, handle: AgentHandle) -> None:
        attach = getattr(self.wrapped, "attach", None)
        if not callable(attach):
            return

        def set_capabilities(capabilities: Sequence[Capability | Mapping[str, Any]]) -> None:
            handle.set_capabilities(patch_capabilities(self.agent_id, capabilities, self._patches))

        attach(AgentHandle(handle.agent_id, handle.set_state, set_capabilities))

    async def invoke(self, message: ReachMessage) -> ReachResult:
        return await self.wrapped.invoke(message)
