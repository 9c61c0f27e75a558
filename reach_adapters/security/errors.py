"""Errors of the security configuration."""

from __future__ import annotations

from reach_adapters.errors import ReachError

__all__ = ["SecurityConfigError"]


class SecurityConfigError(ReachError):
    """``security.yaml`` cannot be put in force: a variable it names is unset, a key file is
    missing; the message says which and how to fix it."""
