"""Hop tokens: short-lived JWTs (HS256) that bind the calling agent, the target and an expiry,
carried when an agent's call passes from one gateway to another (MCP request ``_meta``).

Gateways that trust each other's agents share the secret (``hop_tokens.secret_env``); the
receiving one verifies the token and applies the permissions of the principal that names the
calling agent in its own security.yaml.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

import jwt

from reach_adapters.security.errors import SecurityConfigError
from reach_adapters.security.spec import HopTokenSpec

__all__ = ["HOP_ISSUER", "HopTokenError", "HopTokens"]

HOP_ISSUER = "agent-reach/hop"
_ALGORITHM = "HS256"
# RFC 7518 §3.2: an HS256 key at least as long as the hash.
_MIN_SECRET_BYTES = 32


class HopTokenError(Exception):
    """A hop token that does not hold: bad signature, expired, or made for another target."""


class HopTokens:
    def __init__(self, secret: bytes, ttl_s: float) -> None:
        self._secret = secret
        self.ttl_s = ttl_s

    @classmethod
    def from_spec(cls, spec: HopTokenSpec, environ: Mapping[str, str]) -> HopTokens:
        secret = environ.get(spec.secret_env, "").encode()
        if len(secret) < _MIN_SECRET_BYTES:
            state = "is not set" if not secret else f"holds only {len(secret)} bytes"
            msg = (
                f"{spec.secret_env} {state}; set it to the same secret of "
                f"{_MIN_SECRET_BYTES} bytes or more on every gateway that trusts the others' agents "
                "(e.g. from 'openssl rand -hex 32')"
            )
            raise SecurityConfigError(msg, loc=("hop_tokens", "secret_env"))
        return cls(secret, spec.ttl_s)

    def mint(self, agent_id: str, target: str, principal: str | None, task_id: str) -> str:
        now = time.time()
        claims = {
            "iss": HOP_ISSUER,
            "sub": agent_id,
            "aud": target,
            "iat": int(now),
            "exp": now + self.ttl_s,
            "task_id": task_id,
        }
        if principal is not None:
            claims["on_behalf_of"] = principal
        return jwt.encode(claims, self._secret, algorithm=_ALGORITHM)

    def verify(self, token: str, target: str) -> str:
        """The calling agent's id, when `token` is good for calling `target` now."""
        try:
            claims = jwt.decode(
                token,
                self._secret,
                algorithms=[_ALGORITHM],
                audience=target,
                issuer=HOP_ISSUER,
                options={"require": ["exp", "sub", "aud", "iss"]},
            )
        except jwt.ExpiredSignatureError:
            msg = "the hop token has expired; the calling gateway signs a fresh one per call"
            raise HopTokenError(msg) from None
        except jwt.InvalidAudienceError:
            msg = f"the hop token was signed for another target, not {target!r}"
            raise HopTokenError(msg) from None
        except jwt.InvalidTokenError as exc:
            msg = f"the hop token is not valid here ({exc}); do the gateways share hop_tokens.secret_env?"
            raise HopTokenError(msg) from None
        return str(claims["sub"])
