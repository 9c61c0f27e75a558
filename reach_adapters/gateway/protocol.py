"""uvicorn's h11 protocol with a deadline for each request's head (request line and headers).

uvicorn stops its keep-alive timer at a request's first byte and has no timer of its own for the
rest of the head, so a client sending its headers a byte at a time would hold a connection, and
one of `limit_concurrency`'s places, for as long as it liked (slowloris). Here a connection whose
head is not complete `head_timeout_s` after it opened, or after its last response, is closed.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

__all__ = ["head_timeout_protocol"]


class _HeadTimeout(H11Protocol):
    head_timeout_s: ClassVar[float] = 10.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._head_timer: asyncio.TimerHandle | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._arm()

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._arm()

    def _arm(self) -> None:
        self._disarm()
        self._head_timer = self.loop.call_later(self.head_timeout_s, self._expired)

    def _disarm(self) -> None:
        if self._head_timer is not None:
            self._head_timer.cancel()
            self._head_timer = None

    def _expired(self) -> None:
        self._head_timer = None
        # Past IDLE, h11 has the whole head: the request is under way, and the body timeout holds.
        if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
            self.logger.info("closing a connection whose request head did not arrive in time")
            self.conn.send(h11.ConnectionClosed())
            self.transport.close()


def head_timeout_protocol(head_timeout_s: float) -> type[H11Protocol]:
    """The protocol class to give uvicorn (``http=``) for this deadline."""
    return type("HeadTimeoutProtocol", (_HeadTimeout,), {"head_timeout_s": head_timeout_s})
