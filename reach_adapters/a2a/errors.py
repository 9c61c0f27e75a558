"""Errors of the A2A adapter, each a `ReachError` the core already knows how to treat."""

from __future__ import annotations

from reach_adapters.errors import (
    AgentCallError,
    InvalidDeclarationError,
    ReachError,
    ReachTimeoutError,
)
from reach_adapters.router import AgentBusyError

__all__ = [
    "A2ABusyError",
    "A2ACallTimeoutError",
    "A2ACardError",
    "A2AClosedError",
    "A2AConnectionError",
    "A2ADeniedError",
    "A2ANotHereError",
    "A2ANotTakenError",
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


class A2ACallTimeoutError(AgentCallError):
    """The agent stopped answering a call it had been sent (the HTTP client's read or write
    timeout): the outcome is unknown, and another replica is tried only for work safe to repeat.

    Not a `TimeoutError`: the router would report that as its own deadline, with the budget of
    the whole call."""

    retryable = True


class A2ABusyError(ReachError, AgentBusyError):
    """No HTTP connection to the agent came free in time, so the call was not sent: the router's
    own lack of room, not the agent's failure; another replica may take it."""

    delivered = False


class A2ADeniedError(AgentCallError):
    """The agent answered HTTP 401 or 403: the credentials the router was configured with for it
    (``headers``, ``auth``, ``bearer_token_env``) are not enough. No caller can fix that, so it is
    this agent's failure (its configuration), counted by its breaker; nothing was started, and
    another replica, which may take them, gets the call."""

    delivered = False
    retryable = True


class A2AClosedError(ReachError):
    """The agent was closed (``aclose``, or its router's) while the call was in flight: the
    remote task was told to stop, and the call ends cancelled, held against no one."""


class A2ANotHereError(ReachError, AgentBusyError):
    """``resume=`` names a thread this replica of the agent does not hold (another replica asked
    the question): the call is not sent, and the router tries the next replica."""

    delivered = False


class A2ANotTakenError(ReachError):
    """The agent refused a message for one of its tasks (``UnsupportedOperationError``, -32004):
    another answer to the task is being handled, or the task takes none any more. Nothing was
    started; it is the caller's doing (DESIGN §6, ``rejected``), never the agent's failure."""

    delivered = False
