"""Small real agents for router tests."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

from reach_adapters import AgentHandle, AgentInfo, Capability, FunctionAgent, Router, RoutingPolicy

# Retries without waiting: the tests exercise the logic, not the clock.
FAST = RoutingPolicy(backoff_ms=0.0, jitter_ms=0.0)


class Down(ConnectionError):
    """An agent's backend refused it before any work, and the agent says so (``delivered``):
    another replica may take even work unsafe to repeat."""

    delivered = False


def agent_info(router: Router, agent_id: str) -> AgentInfo:
    """The catalog entry of one agent."""
    return next(info for info in router.catalog() if info.agent_id == agent_id)


def echo_agent(agent_id: str, capability: str = "echo", **cap: Any) -> FunctionAgent:
    async def echo(payload: Any) -> Any:
        return {"agent": agent_id, "payload": payload}

    return FunctionAgent(echo, agent_id=agent_id, capabilities=[Capability(name=capability, **cap)])


def failing_agent(agent_id: str, exc: BaseException, capability: str = "work", **cap: Any) -> FunctionAgent:
    """An agent whose every call raises `exc`."""

    async def fail(payload: Any) -> Any:
        raise exc

    return FunctionAgent(fail, agent_id=agent_id, capabilities=[Capability(name=capability, **cap)])


class Gate:
    """An agent whose calls block until released; counts how many run at once."""

    def __init__(self, agent_id: str, capability: str = "work", **cap: Any) -> None:
        self.release = asyncio.Event()
        self.running = 0
        self.peak = 0
        self.calls: Counter[str] = Counter()
        self.agent = FunctionAgent(
            self._run, agent_id=agent_id, capabilities=[Capability(name=capability, **cap)]
        )

    async def _run(self, payload: Any) -> Any:
        self.running += 1
        self.peak = max(self.peak, self.running)
        self.calls[str(payload)] += 1
        try:
            await self.release.wait()
        finally:
            self.running -= 1
        return payload


class KeepsHandle:
    """Keeps the handle the router gives the agent (`attach`), so a test can change its state."""

    _handle: AgentHandle | None = None

    def attach(self, handle: AgentHandle) -> None:
        self._handle = handle

    @property
    def handle(self) -> AgentHandle:
        assert self._handle is not None, "register the agent first"
        return self._handle


class Handled(KeepsHandle, FunctionAgent):
    """An echo agent that keeps the handle the router gives it, so a test can change its state."""

    def __init__(self, agent_id: str, capability: str = "echo", **cap: Any) -> None:
        async def echo(payload: Any) -> Any:
            return {"agent": agent_id, "payload": payload}

        super().__init__(echo, agent_id=agent_id, capabilities=[Capability(name=capability, **cap)])
