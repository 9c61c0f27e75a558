"""Errors of the gateway: what stops a configured router from being served."""

from __future__ import annotations

from reach_adapters.errors import InvalidMessageError, ReachError

__all__ = ["GatewayError", "LimitExceededError"]


class GatewayError(ReachError):
    """The gateway cannot be served as asked: a port in use, a bad serving option."""


class LimitExceededError(InvalidMessageError):
    """A request went past one of the server's limits; the message names the limit and the
    ``reach serve`` flag that raises it."""
