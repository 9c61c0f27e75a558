"""The handshake-era (2025) clients of the router's MCP server to tell when a list changes.

They hear it as a notification on their connection, so the server keeps each one that listed its
tools, resources or prompts for as long as its connection is open: the SDK runs a connection's
``exit_stack`` when it closes, which forgets it; a send that fails forgets it too.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any, Literal

from mcp.server.connection import Connection
from mcp.server.session import ServerSession

__all__ = ["Kind", "LegacyPeers", "connection_of"]

logger = logging.getLogger(__name__)

Kind = Literal["tools", "resources", "prompts"]

# Open connections kept at most: each costs the SDK far more than its entry here, so this only
# bounds memory should connections outlive their close (an SDK that no longer runs exit stacks).
_MAX_PEERS = 10_000


class LegacyPeers:
    """Open 2025 connections that listed something, each with a session to notify it through."""

    def __init__(self, max_peers: int = _MAX_PEERS) -> None:
        self._max = max_peers
        self._open: dict[Connection, ServerSession] = {}
        self._evicted = False

    def __len__(self) -> int:
        return len(self._open)

    def remember(self, session: ServerSession) -> None:
        """Keep the connection `session` belongs to until it closes."""
        connection = connection_of(session)
        # Without it a client is simply not remembered (it sees changes on relisting).
        if connection is None or not connection.has_standalone_channel:
            # Nothing to send a notice on (a single-exchange request).
            return
        if connection in self._open:
            return
        self._open[connection] = session
        connection.exit_stack.callback(self._open.pop, connection, None)
        if len(self._open) > self._max:
            self._evict()

    def _evict(self) -> None:
        oldest = next(iter(self._open))
        del self._open[oldest]
        if not self._evicted:
            self._evicted = True
            logger.warning(
                "over %d handshake-era MCP clients are connected: the longest-connected ones no "
                "longer hear of list changes (they see them when they list again)",
                self._max,
            )

    async def announce(self, kind: Kind = "tools") -> None:
        """Tell every connection that the `kind` list changed; forget one whose send fails."""
        for connection, session in list(self._open.items()):
            try:
                await _SENDS[kind](session)
            except Exception as exc:  # noqa: BLE001 - one broken peer must not keep others uninformed
                logger.debug("could not send %s/list_changed to a client, forgetting it: %r", kind, exc)
                self._open.pop(connection, None)


_SENDS: dict[Kind, Callable[[ServerSession], Awaitable[None]]] = {
    "tools": ServerSession.send_tool_list_changed,
    "resources": ServerSession.send_resource_list_changed,
    "prompts": ServerSession.send_prompt_list_changed,
}


def connection_of(session: ServerSession) -> Connection | None:
    """The connection a request's `session` belongs to: the one object that lasts as long as the
    client's session (a stdio process, an HTTP session), with state of its own; None without one."""
    # The SDK builds a session per request; the connection is the one object a client keeps.
    # SDK 2.3 has no public way to it from a low-level handler: `ServerRequestContext` has no
    # connection field, `ServerSession` only delegates some of its properties to it, and
    # `mcp.server.context.Context.connection` is on a context the runner never builds. Read
    # defensively, for callers to do without it.
    connection: Any = getattr(session, "_connection", None)
    return connection if isinstance(connection, Connection) else None
