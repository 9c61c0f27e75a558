"""A routed call made for an HTTP client lasts only as long as the client waits for it.

A client that hangs up (its own timeout, Ctrl-C) has given up on the call: the call is cancelled
as a caller giving up cancels it, so a deferred call leaves the queue instead of being delivered
later with nobody to answer, and a compensable agent's work is compensated.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine
from typing import Any, TypeVar

from starlette.requests import Request

__all__ = ["while_connected"]

T = TypeVar("T")


async def while_connected(request: Request, call: Coroutine[Any, Any, T]) -> T | None:
    """`call`'s result, or None when the client hung up first (the call is then cancelled).

    The request's body must have been read: what the client sends next is its disconnect.
    """
    work = asyncio.ensure_future(call)
    gone = asyncio.ensure_future(_hung_up(request))
    try:
        await asyncio.wait((work, gone), return_when=asyncio.FIRST_COMPLETED)
    finally:
        gone.cancel()
        if not work.done():
            work.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await work
    return None if work.cancelled() else work.result()


async def _hung_up(request: Request) -> None:
    while (await request.receive())["type"] != "http.disconnect":
        pass
