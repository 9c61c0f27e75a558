"""Errors of the MCP adapter, each a `ReachError` the core already knows how to treat."""

from __future__ import annotations

from reach_adapters.errors import AgentCallError, ReachError, ReachTimeoutError

__all__ = [
    "MCPConnectionError",
    "MCPOfflineError",
    "MCPProtocolError",
    "MCPSessionExpiredError",
    "MCPTimeoutError",
    "MCPUnavailableError",
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
    """An MCP server did not answer in time: its handshake and tool listing, or a request the
    router sent it of its own (a resource read, a prompt)."""


class MCPProtocolError(AgentCallError):
    """An MCP server answered outside the protocol, e.g. a tool listing whose cursor never ends."""


class MCPUnavailableError(ReachError):
    """An MCP server over HTTP turned a call away before running it, answering its request with
    HTTP 429 (too many requests) or 503 (unavailable): another replica may take it, even work not
    safe to repeat. Like any 429 or 5xx it counts against the server's breaker (DESIGN §6), so a
    server that keeps turning calls away rests while its replicas take the load."""

    delivered = False

    def __init__(self, message: str, status_code: int) -> None:
        super().__init__(message)
        # Read by the router's fault rules (`is_transient`), as any HTTP error's.
        self.status_code = status_code
