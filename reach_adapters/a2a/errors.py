"""Errors of the A2A adapter, each a `ReachError` the core already knows how to treat."""

from __future__ import annotations

from reach_adapters.errors import AgentCallError, InvalidDeclarationError, ReachError, ReachTimeoutError

__all__ = [
    "A2ACardError",
    "A2AConnectionError",
    "A2AOfflineError",
    "A2AOverridesError",
    "A2AProtocolError",
    "A2ATimeoutError",
]


class A2AConnectionError(ReachError, ConnectionError):
    """An A2A agent cannot be reached, or its connection broke during a call.

    Also a `ConnectionError`, so the router's delivery treats it as transient and fails over to
    another replica (when the work is safe to repeat).
    """


class A2AOfflineError(A2AConnectionError):
    """The agent was refused or is known to be down, so the call was never sent: another replica
    may take it, even work that is not safe to repeat."""

    delivered = False


class A2ATimeoutError(ReachTimeoutError):
    """An A2A agent's card did not arrive in time."""


class A2ACardError(InvalidDeclarationError):
    """An agent card cannot be fetched as JSON or does not describe usable skills; the message
    names the URL and the field."""


class A2AOverridesError(A2ACardError):
    """Capability overrides name a skill the agent's card does not have."""


class A2AProtocolError(AgentCallError):
    """An A2A agent answered outside the protocol: an unknown task state, an artifact that is
    not what its media type says; the message names the URL and the field."""
