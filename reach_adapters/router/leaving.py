"""Agents leaving `Router`: deregistered after a drain, or replaced with no gap in service."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from reach_adapters.errors import UnknownAgentError
from reach_adapters.router.agent import Agent, close_agent
from reach_adapters.router.portal import Portal
from reach_adapters.router.registry import Registry
from reach_adapters.router.state import AgentRuntime, AgentState, StateSource

__all__ = ["LeavingCalls"]

logger = logging.getLogger(__name__)


class LeavingCalls:
    """Mixed into `Router`, which holds the registry, the portal of the sync twins, and what
    these methods call back: its state changes, catalog listeners and registration."""

    _registry: Registry
    _portal: Portal
    _closing: set[asyncio.Task[None]]
    _check_open: Callable[[], None]
    _changed: Callable[[], None]
    _set_state: Callable[[AgentRuntime, AgentState, str, StateSource], None]
    register: Callable[[Agent], None]

    async def deregister(self, agent_id: str, *, drain_timeout: float = 30.0, close: bool = False) -> None:
        """Remove an agent gracefully: no new work at once, in-flight calls finish first.

        After `drain_timeout` seconds the agent is removed even if calls are still running; they
        run to completion and their results still reach their callers. With ``close=True`` the
        agent's ``aclose()`` is called too, but only once those calls are done (in the background,
        for at most its longest capability timeout), so closing never cuts a call off.
        """
        self._check_open()
        runtime = self._registry.get(agent_id)
        if runtime is None:
            msg = f"agent {agent_id} is not registered; see router.catalog() for the registered ids"
            raise UnknownAgentError(msg)
        self._set_state(runtime, AgentState.DRAINING, "deregistering", StateSource.ROUTER)
        await runtime.until_idle(drain_timeout)
        if runtime.in_flight:
            logger.warning("agent %s removed with %d calls still running", agent_id, runtime.in_flight)
        self._registry.remove(agent_id)
        logger.info("deregistered agent %s", agent_id)
        self._changed()
        if close:
            if runtime.in_flight:
                self._close_later(runtime)
            else:
                await close_agent(runtime.agent)

    async def replace(self, agent: Agent, *, close: bool = True) -> None:
        """Swap the registered agent with `agent`'s id for `agent`, with no gap in service.

        New calls go to the new agent at once; calls already running on the old one finish there,
        and the old agent is closed (``close=True``) once they are done. If the new agent's
        declaration is invalid, the old one stays registered and the error is raised.
        """
        self._check_open()
        agent_id = getattr(agent, "agent_id", None)
        old = self._registry.get(agent_id) if isinstance(agent_id, str) else None
        if old is None:
            msg = f"agent {agent_id} is not registered, so there is nothing to replace; use register()"
            raise UnknownAgentError(msg)
        self._registry.remove(old.agent_id)
        try:
            self.register(agent)
        except BaseException:
            self._registry.restore(old)
            raise
        logger.info("replaced agent %s (%d calls finish on the old one)", old.agent_id, old.in_flight)
        if close:
            self._close_later(old)

    def _close_later(self, runtime: AgentRuntime) -> None:
        """Close the agent in the background once its calls are done; `aclose` waits for it."""
        closing = asyncio.get_running_loop().create_task(runtime.close_when_idle())
        self._closing.add(closing)
        closing.add_done_callback(self._closing.discard)

    def deregister_sync(self, agent_id: str, *, drain_timeout: float = 30.0) -> None:
        self._portal.call(self.deregister(agent_id, drain_timeout=drain_timeout), method="deregister_sync")
