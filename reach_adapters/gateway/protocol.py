"""uvicorn's httptools protocol with two bounds on each request's head (request line and headers):
the time to send it and its size.

httptools parses in C, where h11 parses in Python: a gateway request costs the server about a
quarter less CPU with it. uvicorn bounds neither the head's size (its h11 option does not apply to
httptools) nor, once a request's first byte came, the time the rest of the head takes, so a client
sending its headers a byte at a time would hold a connection, and one of `limit_concurrency`'s
places, for as long as it liked (slowloris). Here a connection whose head is not complete
`head_timeout_s` after it opened, or after its last response, is closed; a head past
`max_head_bytes` is answered 400 and its connection closed, as for any request httptools cannot
parse.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import httptools
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

__all__ = ["gateway_protocol"]


class _HeadTooLargeError(httptools.HttpParserError):
    """Raised from a parser callback: uvicorn answers a parser error with 400 and closes."""


class _BoundedHead(HttpToolsProtocol):
    head_timeout_s: ClassVar[float] = 10.0
    max_head_bytes: ClassVar[int] = 16 * 1024

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None
        self._head_done = False
        self._head_bytes = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self._head_done = False
        self._head_bytes = 0

    def on_url(self, url: bytes) -> None:
        self._count(len(url))
        super().on_url(url)

    def on_header(self, name: bytes, value: bytes) -> None:
        self._count(len(name) + len(value) + 4)  # with its ": " and CRLF, as it was sent
        super().on_header(name, value)

    def on_headers_complete(self) -> None:
        self._head_done = True
        super().on_headers_complete()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        # `_head_done` stays: it is the next request's to reset when its first byte comes (a
        # pipelined one may have its head in already).
        self._arm()

    def _count(self, size: int) -> None:
        self._head_bytes += size
        if self._head_bytes > self.max_head_bytes:
            msg = f"request head larger than {self.max_head_bytes} bytes"
            raise _HeadTooLargeError(msg)

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(self.head_timeout_s, self._expired)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _expired(self) -> None:
        self._head_timer = None
        # With the head in, the request is under way, and the body timeout holds.
        if not self._head_done and not self.transport.is_closing():
            self.logger.info("closing a connection whose request head did not arrive in time")
            self.transport.close()


def gateway_protocol(head_timeout_s: float, max_head_bytes: int) -> type[HttpToolsProtocol]:
    """The protocol class to give uvicorn (``http=``) for these bounds."""
    bounds = {"head_timeout_s": head_timeout_s, "max_head_bytes": max_head_bytes}
    return type("GatewayProtocol", (_BoundedHead,), bounds)
