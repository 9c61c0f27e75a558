"""What may stand in front of a server under test: an ASGI wrapper that answers some requests with
an HTTP status of its own, as a rate limiter or proxy does, so the server never sees them."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["Refusal", "refusing_requests", "replaying"]

ASGIApp = Any
# The status and headers to answer a request's body with, or None to let it through.
Refusal = Callable[[bytes], tuple[int, Mapping[str, str]] | None]


def refusing_requests(app: ASGIApp, refusal: Refusal) -> ASGIApp:
    """`app`, except that a POST whose body `refusal` answers gets that status and headers (and a
    plain text body) instead."""

    async def wrapped(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        body = b""
        more = True
        while more:
            part = await receive()
            body += part.get("body", b"")
            more = part.get("more_body", False)
        refused = refusal(body)
        if refused is not None:
            status, headers = refused
            listed = [(b"content-type", b"text/plain")]
            listed += [(name.encode(), value.encode()) for name, value in headers.items()]
            await send({"type": "http.response.start", "status": status, "headers": listed})
            await send({"type": "http.response.body", "body": b"slow down"})
            return
        await app(scope, replaying(receive, {"type": "http.request", "body": body, "more_body": False}), send)

    return wrapped


def replaying(receive: Any, first: dict[str, Any]) -> Any:
    """`receive`, giving the request's `first` message (already read) once more before the rest."""
    replayed = False

    async def replay() -> Any:
        nonlocal replayed
        if replayed:
            return await receive()
        replayed = True
        return first

    return replay
