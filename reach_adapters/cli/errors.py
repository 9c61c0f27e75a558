"""Errors of the command line itself."""

from __future__ import annotations

from reach_adapters.errors import ReachError

__all__ = ["UsageError"]


class UsageError(ReachError):
    """A flag or argument cannot be used as given; exits with the usage code, like argparse."""
