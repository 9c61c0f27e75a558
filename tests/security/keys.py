"""Keys and JWTs a test makes itself, and a JWKS endpoint serving the public half."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import jwt
import uvicorn
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from tests.waiting import wait_until

ISSUER = "https://issuer.test"
AUDIENCE = "https://reach.test/mcp"
KID = "key-1"


def rsa_key() -> rsa.RSAPrivateKey:
    return rsa.generate_private_key(public_exponent=65537, key_size=2048)


def ec_key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def public_pem(key: rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey) -> bytes:
    return key.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )


def jwks(key: rsa.RSAPrivateKey, kid: str = KID) -> dict[str, Any]:
    public: dict[str, Any] = jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
    return {"keys": [{**public, "kid": kid, "use": "sig", "alg": "RS256"}]}


def sign(
    key: Any, *, algorithm: str = "RS256", kid: str | None = KID, ttl_s: float = 300, **claims: Any
) -> str:
    """A JWT from `key`: issuer, audience, subject 'alice' and an expiry unless `claims` say otherwise
    (a claim given as None is left out)."""
    now = int(time.time())
    payload = {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "iat": now, "exp": now + int(ttl_s), **claims}
    payload = {name: value for name, value in payload.items() if value is not None}
    headers = None if kid is None else {"kid": kid}
    return jwt.encode(payload, key, algorithm=algorithm, headers=headers)


@contextmanager
def jwks_server(document: dict[str, Any]) -> Iterator[str]:
    """Serve `document` at ``/jwks`` on 127.0.0.1 (a port of its own) in a thread; yields its URL."""

    async def keys(request: Request) -> JSONResponse:
        return JSONResponse(document)

    app = Starlette(routes=[Route("/jwks", keys)])
    sock = socket.create_server(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        wait_until(lambda: server.started, timeout=20, what="the JWKS server to start")
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/jwks"
    finally:
        server.should_exit = True
        thread.join(timeout=20)
        sock.close()
