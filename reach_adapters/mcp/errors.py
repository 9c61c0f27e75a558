"""Errors of the MCP adapter, each a `ReachError` the core already knows how to treat."""

from __future__ import annotations

from reach_adapters.errors import AgentCallError, ReachError, ReachTimeoutError

__all__ = ["MCPConnectionError", "MCPProtocolError", "MCPTimeoutError"]


class MCPConnectionError(ReachError, ConnectionError):
    """An MCP server cannot be started or reached, or its connection was lost.

    Also a `ConnectionError`, so the router's delivery treats it as transient and fails over to
    another replica.
    """


class MCPTimeoutError(ReachTimeoutError):
    """An MCP server did not finish its handshake and tool listing in time."""


class MCPProtocolError(AgentCallError):
    """An MCP server answered outside the protocol, e.g. a tool listing whose cursor never ends."""
