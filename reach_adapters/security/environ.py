"""Secrets security.yaml names by environment variable, read once when it is put in force."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from reach_adapters.security.errors import SecurityConfigError

__all__ = ["MIN_HMAC_SECRET_BYTES", "env_value", "hmac_secret"]

# RFC 7518 §3.2: an HMAC-SHA256 key at least as long as the hash.
MIN_HMAC_SECRET_BYTES = 32


def env_value(environ: Mapping[str, str], name: str, loc: Sequence[str | int]) -> str:
    """The value of `name`; `loc` is where security.yaml names it, for the error."""
    value = environ.get(name, "")
    if not value:
        problem = f"environment variable {name} is not set or empty; set it before starting reach"
        raise SecurityConfigError(problem, loc=loc)
    return value


def hmac_secret(environ: Mapping[str, str], name: str, loc: Sequence[str | int]) -> bytes:
    """An HMAC secret from `name`, refused when shorter than `MIN_HMAC_SECRET_BYTES`."""
    secret = env_value(environ, name, loc).encode()
    if len(secret) < MIN_HMAC_SECRET_BYTES:
        problem = (
            f"the secret in {name} is {len(secret)} bytes; an HMAC secret needs at least "
            f"{MIN_HMAC_SECRET_BYTES} (e.g. 'openssl rand -hex 32')"
        )
        raise SecurityConfigError(problem, loc=loc)
    return secret
