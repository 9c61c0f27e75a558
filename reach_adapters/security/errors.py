"""Errors of authentication: a ``security.yaml`` that cannot be put in force, a request refused."""

from __future__ import annotations

from collections.abc import Sequence

from reach_adapters.errors import ReachError

__all__ = ["AuthenticationError", "HopTokenError", "SecurityConfigError"]


class SecurityConfigError(ReachError):
    """``security.yaml`` names something that is not there: an unset environment variable, a key
    file that is missing or holds no public key.

    `loc` is the field's path in the file, so the config loader can name its line.
    """

    def __init__(self, problem: str, *, loc: Sequence[str | int] = ()) -> None:
        self.problem = problem
        self.loc = tuple(loc)
        field = ".".join(str(part) for part in self.loc)
        super().__init__(f"field '{field}': {problem}" if field else problem)


class AuthenticationError(ReachError):
    """A request to a protected surface carried no credentials, or ones that do not verify (HTTP 401)."""


class HopTokenError(ReachError):
    """A hop token that does not hold: bad signature, expired, used before, or made for another
    task or target."""
