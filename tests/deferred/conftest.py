"""Helpers for the deferred queue's tests: how many calls wait there, and agents that arrive late."""

from __future__ import annotations

from typing import Any

from reach_adapters import AgentHandle, Capability, FunctionAgent, Router
from tests.gateway.conftest import config_dir, serve

__all__ = ["Switchable", "config_dir", "recorder", "serve", "waiting"]


def waiting(router: Router) -> int:
    """Calls waiting in the router's deferred queue now."""
    return router.deferred_waiting


def recorder(agent_id: str, capability: str, seen: list[Any], **cap: Any) -> FunctionAgent:
    """An agent answering ``{"agent", "payload"}`` and noting each payload in `seen`, in order."""

    async def serve(payload: Any) -> Any:
        seen.append(payload)
        return {"agent": agent_id, "payload": payload}

    return FunctionAgent(serve, agent_id=agent_id, capabilities=[Capability(name=capability, **cap)])


class Switchable(FunctionAgent):
    """An echo agent whose state a test sets through the handle the router gives it; with `seen`,
    it notes each payload there, in order."""

    def __init__(self, agent_id: str, capability: str, seen: list[Any] | None = None, **cap: Any) -> None:
        async def echo(payload: Any) -> Any:
            if seen is not None:
                seen.append(payload)
            return {"agent": agent_id, "payload": payload}

        super().__init__(echo, agent_id=agent_id, capabilities=[Capability(name=capability, **cap)])
        self.handle: AgentHandle | None = None

    def attach(self, handle: AgentHandle) -> None:
        self.handle = handle
