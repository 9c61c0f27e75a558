"""uvicorn's httptools protocol with two bounds on each request's head (request line and headers):
the time to send it and its size.

httptools parses in C, where h11 parses in Python: a gateway request costs the server about a
quarter less CPU with it. uvicorn bounds neither the head's size (its h11 option does not apply to
httptools) nor, once a request's first byte came, the time the rest of the head takes, so a client
sending its headers a byte at a time would hold a connection, and one of `limit_concurrency`'s
places, for as long as it liked (slowloris). Here a connection with no request under way whose
next head is not complete `head_timeout_s` after it opened, or after its last response, is closed;
a head past `max_head_bytes` is answered 400 and its connection closed, as uvicorn answers any
request httptools cannot parse.
"""

from __future__ import annotations

import asyncio
from itertools import chain
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
        # One timer per connection, moved lazily: a response only pushes `_deadline` on, and the
        # timer, when it fires early, waits out the rest (a timer armed and cancelled for every
        # response cost a busy connection more than the rest of this class).
        self._head_timer: asyncio.TimerHandle | None = None
        self._deadline = 0.0
        # Heads read whole and responses sent: equal when no request is under way.
        self._heads = 0
        self._responses = 0
        # Whether the next bytes belong to a head, and how many of them came so far.
        self._in_head = True
        self._head_bytes = 0

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None
        super().connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        counting, heads = self._in_head, self._heads
        super().data_received(data)
        # httptools holds a header until its line ends, so the head parsed alone would let one
        # endless header grow unbounded: what arrives while a head stays incomplete counts too.
        if counting and self._in_head and self._heads == heads:
            self._head_bytes += len(data)
            if self._head_bytes > self.max_head_bytes and not self.transport.is_closing():
                self.send_400_response(self._too_large())

    def on_headers_complete(self) -> None:
        # The head as it was sent: the request target, and each header with its ": " and CRLF.
        size = len(self.url) + len(b"".join(chain.from_iterable(self.headers))) + 4 * len(self.headers)
        if size > self.max_head_bytes:
            raise _HeadTooLargeError(self._too_large())
        self._heads += 1
        self._in_head = False
        self._head_bytes = 0
        super().on_headers_complete()

    def on_message_complete(self) -> None:
        super().on_message_complete()
        self._in_head = True

    def on_response_complete(self) -> None:
        self._responses += 1
        super().on_response_complete()
        self._arm()

    def _too_large(self) -> str:
        return f"request head larger than {self.max_head_bytes} bytes"

    def _arm(self) -> None:
        self._deadline = self.loop.time() + self.head_timeout_s
        if self._head_timer is None:
            self._head_timer = self.loop.call_at(self._deadline, self._expired, self._deadline)

    def _expired(self, armed_for: float) -> None:
        self._head_timer = None
        # A request under way is the body timeout's and the handler's; its response re-arms this.
        # Otherwise no head came whole in time, whether bytes of one came or none (a bare CRLF
        # stops uvicorn's keep-alive timer without starting a request).
        if self._heads != self._responses or self.transport.is_closing():
            return
        if self._deadline > armed_for:
            # A response since it was armed moved the deadline on.
            self._head_timer = self.loop.call_at(self._deadline, self._expired, self._deadline)
            return
        self.logger.info("closing a connection whose request head did not arrive in time")
        self.transport.close()


def gateway_protocol(head_timeout_s: float, max_head_bytes: int) -> type[HttpToolsProtocol]:
    """The protocol class to give uvicorn (``http=``) for these bounds."""
    bounds = {"head_timeout_s": head_timeout_s, "max_head_bytes": max_head_bytes}
    return type("GatewayProtocol", (_BoundedHead,), bounds)
