"""Errors of the MCP adapter, each a `ReachError` the core already knows how to treat."""

from __future__ import annotations

from reach_adapters.errors import AgentCallError, ReachError, ReachTimeoutError

__all__ = ["MCPConnectionError", "MCPOfflineError", "MCPProtocolError", "MCPTimeoutError"]


class MCPConnectionError(ReachError, ConnectionError):
    """An MCP server cannot be started or reached, or its connection was lost.

    Also a `ConnectionError`, so the router's delivery treats it as transient and fails over to
    another replica.
    """


class MCPOfflineError(MCPConnectionError):
    """No session to the server is open now, so the call was never sent: another replica may take
    it, even work that is not safe to repeat."""

    delivered = False


class MCPTimeoutError(ReachTimeoutError):
    """An MCP server did not finish its handshake and tool listing in time."""


class MCPProtocolError(AgentCallError):
    """An MCP server answered outside the protocol, e.g. a tool listing whose cursor never ends."""
