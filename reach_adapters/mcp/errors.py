"""Errors of the MCP adapter, each a `ReachError` the core already knows how to treat."""

from __future__ import annotations

from reach_adapters.errors import AgentCallError, ReachError, ReachTimeoutError

__all__ = [
    "MCPConnectionError",
    "MCPOfflineError",
    "MCPProtocolError",
    "MCPSessionExpiredError",
    "MCPTimeoutError",
]


class MCPConnectionError(ReachError, ConnectionError):
    """An MCP server cannot be started or reached, or its connection was lost.

    Also a `ConnectionError`, so the router's delivery treats it as transient and fails over to
    another replica.
    """


class MCPOfflineError(MCPConnectionError):
    """No session to the server is open now, so the call was never sent: another replica may take
    it, even work that is not safe to repeat."""

    delivered = False


class MCPSessionExpiredError(MCPOfflineError):
    """The server no longer knows the session a call was sent on (HTTP 404 "Session not found":
    it restarted, or ended the session): it refused the call before running it, so another
    replica may take it, and the agent opens a new session, as the MCP spec asks of a client."""


class MCPTimeoutError(ReachTimeoutError):
    """An MCP server did not finish its handshake and tool listing in time."""


class MCPProtocolError(AgentCallError):
    """An MCP server answered outside the protocol, e.g. a tool listing whose cursor never ends."""
