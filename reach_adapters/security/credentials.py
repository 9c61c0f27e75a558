"""Who is calling: bearer tokens checked against ``security.yaml``, static tokens and JWTs.

`Authenticator` is the MCP SDK's `TokenVerifier`. Everything it needs (token digests, keys, the
JWKS client) is read when it is built, so a missing variable or key file is a config error at
load time, not a 401 later. Refusals are logged with their reason, never with the token.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import jwt
from cryptography.hazmat.primitives.asymmetric import ec, ed448, ed25519, rsa
from cryptography.hazmat.primitives.serialization import load_pem_public_key
from mcp.server.auth.provider import AccessToken

from reach_adapters.security.environ import env_value, hmac_secret
from reach_adapters.security.errors import SecurityConfigError
from reach_adapters.security.spec import JWTSpec, SecuritySpec

__all__ = ["ANONYMOUS", "ANONYMOUS_PRINCIPAL", "Authenticator", "JWTVerifier", "token_digest"]

logger = logging.getLogger(__name__)

ANONYMOUS_PRINCIPAL = "anonymous"
# Who calls on a surface listed in `open` without credentials.
ANONYMOUS = AccessToken(
    token="",
    client_id=ANONYMOUS_PRINCIPAL,
    scopes=[],
    subject=ANONYMOUS_PRINCIPAL,
)

# A JWKS fetch blocks a worker thread; past this the token is refused rather than waited for.
_JWKS_TIMEOUT_S = 5.0
_JWKS_LIFESPAN_S = 300
# An access token without an expiry would be valid forever.
_REQUIRED_CLAIMS = ["exp", "iss", "aud"]
_KEY_TYPES: dict[str, tuple[type[Any], ...]] = {
    "RS": (rsa.RSAPublicKey,),
    "PS": (rsa.RSAPublicKey,),
    "ES": (ec.EllipticCurvePublicKey,),
    "Ed": (ed25519.Ed25519PublicKey, ed448.Ed448PublicKey),
}


def token_digest(token: str) -> bytes:
    """The SHA-256 of a bearer token: what ``token_sha256`` holds (as hex) and what is compared."""
    return hashlib.sha256(token.encode()).digest()


class JWTVerifier:
    """Checks a JWT's signature, ``iss``, ``aud``, ``exp`` (and ``nbf``) as `spec` says."""

    def __init__(self, spec: JWTSpec, *, key: Any = None, jwks: jwt.PyJWKClient | None = None) -> None:
        self.spec = spec
        self._key = key
        self._jwks = jwks

    @classmethod
    def from_spec(cls, spec: JWTSpec, directory: Path, environ: Mapping[str, str]) -> JWTVerifier:
        if spec.jwks_url is not None:
            client = jwt.PyJWKClient(spec.jwks_url, lifespan=_JWKS_LIFESPAN_S, timeout=_JWKS_TIMEOUT_S)
            return cls(spec, jwks=client)
        if spec.public_key_file is not None:
            return cls(spec, key=_public_key(directory / spec.public_key_file, spec.algorithms))
        assert spec.secret_env is not None  # one of the three, says JWTSpec
        return cls(spec, key=hmac_secret(environ, spec.secret_env, ("jwt", "secret_env")))

    async def verify(self, token: str) -> AccessToken | None:
        spec = self.spec
        try:
            key = self._key if self._jwks is None else await self._signing_key(token)
            claims: dict[str, Any] = jwt.decode(
                token,
                key,
                algorithms=spec.algorithms,
                audience=spec.audience,
                issuer=spec.issuer,
                leeway=spec.leeway_s,
                options={"require": _REQUIRED_CLAIMS},
            )
        except (jwt.PyJWTError, TimeoutError) as exc:
            logger.info("bearer JWT refused: %s", exc or type(exc).__name__)
            return None
        principal = claims.get(spec.principal_claim)
        if not isinstance(principal, str) or not principal:
            logger.info("bearer JWT refused: its %r claim is not a non-empty string", spec.principal_claim)
            return None
        return AccessToken(
            token=token,
            client_id=principal,
            scopes=_scopes(claims.get("scope")),
            expires_at=int(claims["exp"]),
            subject=principal,
            claims=claims,
        )

    async def _signing_key(self, token: str) -> Any:
        # PyJWKClient caches the key set; a miss fetches it with blocking I/O, so off the loop.
        assert self._jwks is not None
        fetch = asyncio.to_thread(self._jwks.get_signing_key_from_jwt, token)
        return (await asyncio.wait_for(fetch, _JWKS_TIMEOUT_S)).key


class Authenticator:
    """Maps a bearer token to its principal: a static token by its SHA-256 digest, else a JWT.

    Implements the MCP SDK's `TokenVerifier` protocol; the `AccessToken`'s ``client_id`` and
    ``subject`` are the principal's name.
    """

    def __init__(self, tokens: Mapping[bytes, str], jwt_verifier: JWTVerifier | None = None) -> None:
        self._tokens = dict(tokens)
        self.jwt = jwt_verifier

    @classmethod
    def from_spec(
        cls, spec: SecuritySpec, directory: Path, environ: Mapping[str, str] | None = None
    ) -> Authenticator:
        """Read every token variable and key `spec` names (from `environ`, default the process's);
        raise `SecurityConfigError` naming the field when one is missing."""
        environ = os.environ if environ is None else environ
        tokens: dict[bytes, str] = {}
        for name, principal in spec.principals.items():
            if principal.token_env is not None:
                digest = token_digest(
                    env_value(environ, principal.token_env, ("principals", name, "token_env"))
                )
                field = "token_env"
            elif principal.token_sha256 is not None:
                digest = bytes.fromhex(principal.token_sha256)
                field = "token_sha256"
            else:
                continue  # reached only as an agent, or as the anonymous caller
            twin = tokens.setdefault(digest, name)
            if twin != name:
                problem = f"principal '{name}' has the same token as '{twin}'; give each principal its own"
                raise SecurityConfigError(problem, loc=("principals", name, field))
        verifier = None if spec.jwt is None else JWTVerifier.from_spec(spec.jwt, directory, environ)
        return cls(tokens, verifier)

    async def verify_token(self, token: str) -> AccessToken | None:
        principal = self._tokens.get(token_digest(token))
        if principal is not None:
            return AccessToken(token=token, client_id=principal, scopes=[], subject=principal)
        if self.jwt is not None and token.count(".") == 2:
            return await self.jwt.verify(token)
        logger.info("bearer token refused: it is no principal's token%s", "" if self.jwt else " (no jwt set)")
        return None


def _public_key(path: Path, algorithms: Sequence[str]) -> Any:
    loc = ("jwt", "public_key_file")
    try:
        key = load_pem_public_key(path.read_bytes())
    except FileNotFoundError:
        raise SecurityConfigError(
            f"{path} does not exist; give the issuer's PEM public key", loc=loc
        ) from None
    except OSError as exc:
        raise SecurityConfigError(f"{path} cannot be read: {exc.strerror}", loc=loc) from None
    except (ValueError, TypeError):
        problem = f"{path} holds no PEM public key (-----BEGIN PUBLIC KEY-----)"
        raise SecurityConfigError(problem, loc=loc) from None
    wrong = [name for name in algorithms if not isinstance(key, _KEY_TYPES[name[:2]])]
    if wrong:
        problem = (
            f"{path} holds a {type(key).__name__.removeprefix('_')}, which algorithms {wrong} cannot use"
        )
        raise SecurityConfigError(problem, loc=loc)
    return key


def _scopes(claim: Any) -> list[str]:
    """The ``scope`` claim (RFC 9068: space-separated; some issuers send a list)."""
    if isinstance(claim, str):
        return claim.split()
    if isinstance(claim, list):
        return [str(item) for item in claim]
    return []
