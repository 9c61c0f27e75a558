"""Telling the clients of the router's MCP server that a list changed: its tools (the router's
catalog), or the resources or prompts of an upstream MCP server, which the upstream's session
reports here (`upstream_changed`, with the updates of resources it watches) for every router MCP
server to pass on."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Coroutine
from typing import Any

from mcp.server.context import ServerRequestContext
from mcp.server.subscriptions import (
    InMemorySubscriptionBus,
    PromptsListChanged,
    ResourcesListChanged,
    ServerEvent,
    ToolsListChanged,
)
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from reach_adapters.mcp.peers import Kind, LegacyPeers
from reach_adapters.router import running_loop

__all__ = ["Kind", "Notices", "on_upstream_change", "upstream_changed"]

logger = logging.getLogger(__name__)

KINDS: tuple[Kind, ...] = ("tools", "resources", "prompts")
_EVENTS: dict[Kind, ServerEvent] = {
    "tools": ToolsListChanged(),
    "resources": ResourcesListChanged(),
    "prompts": PromptsListChanged(),
}

_listeners: list[Callable[[str, ServerEvent], None]] = []


def upstream_changed(agent_id: str, event: ServerEvent) -> None:
    """The MCP server of agent `agent_id` said a list of it changed, or a resource it has
    (on its session's loop). A listener that fails is logged: it runs in the session's message
    handler, which must go on, and so must the other listeners."""
    for listener in tuple(_listeners):
        try:
            listener(agent_id, event)
        except Exception:
            logger.exception("listener %r of MCP server %s's changes failed", listener, agent_id)


def on_upstream_change(listener: Callable[[str, ServerEvent], None]) -> Callable[[], None]:
    """Hear of every upstream's changes, from any thread; returns the call that stops it."""
    _listeners.append(listener)

    def stop() -> None:
        if listener in _listeners:
            _listeners.remove(listener)

    return stop


class Notices:
    """The list-changed notices of one server: 2026-07-28 clients hear them on their
    ``subscriptions/listen`` stream (`bus`), handshake-era ones on the connection they listed
    something on; a burst of changes (several servers reconnecting) becomes one notice of each
    kind."""

    def __init__(self) -> None:
        self.bus = InMemorySubscriptionBus()
        self.legacy = LegacyPeers()
        # Built outside any loop: notices go out on the loop that serves clients, once one lists.
        self._loop = running_loop()
        self._pending: set[Kind] = set()
        self._announcing: asyncio.Task[None] | None = None
        self._running: set[asyncio.Task[None]] = set()

    def seen(self, ctx: ServerRequestContext[Any, Any]) -> None:
        """A client listed something: from now on it hears when lists change."""
        if self._loop is None:
            self._loop = asyncio.get_running_loop()
        if ctx.protocol_version not in MODERN_PROTOCOL_VERSIONS:
            self.legacy.remember(ctx.session)

    def changed(self, *kinds: Kind) -> None:
        """Tell every client that these lists changed; callable from any thread."""
        self._on_loop(self._schedule, kinds)

    def soon(self, work: Coroutine[Any, Any, None]) -> None:
        """Run `work` on the loop that serves clients, from any thread; dropped before any has."""
        if not self._on_loop(self._start, work):
            work.close()

    def _on_loop(self, callback: Callable[..., None], *args: Any) -> bool:
        """Have the loop that serves clients call ``callback(*args)``, from any thread; False
        when no loop does (none yet, or it closed, also while this call was being made)."""
        loop = self._loop
        if loop is None or loop.is_closed():
            return False
        try:
            loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:
            return False
        return True

    def _start(self, work: Coroutine[Any, Any, None]) -> None:
        task = asyncio.get_running_loop().create_task(work)
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    def _schedule(self, kinds: tuple[Kind, ...]) -> None:
        self._pending.update(kinds)
        if self._announcing is None:
            self._announcing = asyncio.get_running_loop().create_task(self._announce())

    async def _announce(self) -> None:
        kinds, self._pending = self._pending, set()
        # Changes from here on are announced once this round is out.
        try:
            for kind in KINDS:
                if kind in kinds:
                    await self.bus.publish(_EVENTS[kind])
                    await self.legacy.announce(kind)
        finally:
            self._announcing = None
            if self._pending:
                self._schedule(())
