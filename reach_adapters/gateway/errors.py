"""Errors of the gateway: what stops a configured router from being served."""

from __future__ import annotations

from reach_adapters.errors import ReachError

__all__ = ["GatewayError"]


class GatewayError(ReachError):
    """The gateway cannot be served as asked: a port in use, a bad serving option."""
