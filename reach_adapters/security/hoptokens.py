"""Hop tokens: short-lived JWTs (HS256) that bind the calling agent, the target, the task and an
expiry, carried when an agent's call passes from one gateway to another (MCP request ``_meta``).

Gateways that trust each other's agents share the secret (``hop_tokens.secret_env``); the
receiving one accepts a token only from a principal with ``role: gateway``, once, for the task and
tool it names, and applies the permissions of the principal that names the calling agent in its
own security.yaml.
"""

from __future__ import annotations

import secrets
import time
from collections import OrderedDict
from collections.abc import Mapping

import jwt

from reach_adapters.security.environ import hmac_secret
from reach_adapters.security.errors import HopTokenError
from reach_adapters.security.spec import HopTokenSpec

__all__ = ["HOP_ISSUER", "HopTokens"]

HOP_ISSUER = "agent-reach/hop"
_ALGORITHM = "HS256"
_REQUIRED = ["exp", "sub", "aud", "iss", "jti", "task_id"]
# Token ids seen while their tokens are valid; past this many the oldest are forgotten (a hop a
# second for the longest ttl_s is 3,600 of them).
_MAX_SEEN = 100_000


class HopTokens:
    def __init__(self, secret: bytes, ttl_s: float) -> None:
        self._secret = secret
        self.ttl_s = ttl_s
        self._seen: OrderedDict[str, float] = OrderedDict()

    @classmethod
    def from_spec(cls, spec: HopTokenSpec, environ: Mapping[str, str]) -> HopTokens:
        return cls(hmac_secret(environ, spec.secret_env, ("hop_tokens", "secret_env")), spec.ttl_s)

    def mint(self, agent_id: str, target: str, task_id: str) -> str:
        now = time.time()
        claims = {
            "iss": HOP_ISSUER,
            "sub": agent_id,
            "aud": target,
            "task_id": task_id,
            "jti": secrets.token_urlsafe(12),
            "iat": int(now),
            "exp": now + self.ttl_s,
        }
        return jwt.encode(claims, self._secret, algorithm=_ALGORITHM)

    def verify(self, token: str, target: str, task_id: str) -> str:
        """The calling agent's id, when `token` is good for calling `target` for `task_id` now,
        and was not used before; raises `HopTokenError` saying why not."""
        try:
            claims = jwt.decode(
                token,
                self._secret,
                algorithms=[_ALGORITHM],
                audience=target,
                issuer=HOP_ISSUER,
                options={"require": _REQUIRED},
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
        if claims["task_id"] != task_id:
            msg = "the hop token was signed for another task"
            raise HopTokenError(msg)
        self._use(str(claims["jti"]), float(claims["exp"]))
        return str(claims["sub"])

    def _use(self, jti: str, expires: float) -> None:
        seen = self._seen
        if jti in seen:
            msg = "the hop token was used before; a gateway signs a fresh one for every call"
            raise HopTokenError(msg)
        now = time.time()
        while seen and (len(seen) >= _MAX_SEEN or next(iter(seen.values())) < now):
            seen.popitem(last=False)
        seen[jti] = expires
