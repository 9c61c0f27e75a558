"""The ``subscriptions/listen`` streams the router holds open at 2026-07-28 servers (its change
stream, the resources its clients watch). The server acknowledges each; over HTTP a request it
leaves unacknowledged runs into the read timeout, which ends the whole session, so it is
withdrawn before that and made again later (`hold`)."""

from __future__ import annotations

import logging
import math
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager

import anyio
from mcp.client.subscriptions import Subscription, SubscriptionLost

from reach_adapters.mcp.spec import HttpServer, ServerSpec

__all__ = ["ACK_SHARE", "ack_timeout", "hold"]

logger = logging.getLogger(__name__)

# The part of an HTTP server's read timeout (and of ``connect_timeout_s``, for the first listing)
# a stream's acknowledgement is waited for.
ACK_SHARE = 0.5
# A stream that drops is opened again after this pause, so a flapping one cannot spin.
_RELISTEN_DELAY_S = 0.1
# One left unacknowledged is asked for again after a pause growing by the first up to the second.
_REASK_S = 30.0
_REASK_MAX_S = 600.0


def ack_timeout(spec: ServerSpec) -> float:
    """How long a stream's acknowledgement is waited for: over HTTP, half the read timeout; over
    stdio, which has none, as long as it takes."""
    if isinstance(spec.target, HttpServer):
        return spec.options.sse_read_timeout_s * ACK_SHARE
    return math.inf


async def _reask_later(agent_id: str, stream: str, ack_s: float, unacknowledged: int) -> None:
    """Say that the server of `agent_id` left `stream` unacknowledged, and pause before asking
    again, longer after each of `unacknowledged` requests in a row that went unanswered.

    Warned of once in a row: a server that never acknowledges would otherwise fill the log."""
    pause_s = min(_REASK_S * unacknowledged, _REASK_MAX_S)
    logger.log(
        logging.WARNING if unacknowledged == 1 else logging.INFO,
        "MCP server %s left %s unacknowledged for %.1f s (%d in a row); what it carries goes "
        "unnoticed until a later request for it, in %.0f s, is answered",
        agent_id,
        stream,
        ack_s,
        unacknowledged,
        pause_s,
    )
    await anyio.sleep(pause_s)


async def hold(
    listen: Callable[[], AbstractAsyncContextManager[Subscription]],
    ack_s: float,
    agent_id: str,
    stream: str,
    *,
    opened: Callable[[], None] | None = None,
    reopened: Callable[[], None] | None = None,
) -> None:
    """Hold the `stream` that `listen` opens at the server of `agent_id` for good: `opened()`
    each time the server acknowledges it within `ack_s`; when it drops, `reopened()` and open it
    again; a request left unacknowledged is asked again later (`_reask_later`). Its events also
    reach the session's message handler, so they are only let go here. An `MCPError` (the server
    refused the stream, or the connection closed) ends it, raised."""
    unacknowledged = 0
    while True:
        heard = False
        try:
            async with _acknowledged(listen, ack_s) as subscription:
                if subscription is not None:
                    heard = True
                    if opened is not None:
                        opened()
                    async for _event in subscription:
                        pass
        except SubscriptionLost:
            heard = True
        if not heard:
            unacknowledged += 1
            await _reask_later(agent_id, stream, ack_s, unacknowledged)
            continue
        unacknowledged = 0
        if reopened is not None:
            reopened()
        await anyio.sleep(_RELISTEN_DELAY_S)


@asynccontextmanager
async def _acknowledged(
    listen: Callable[[], AbstractAsyncContextManager[Subscription]], within_s: float
) -> AsyncIterator[Subscription | None]:
    """The stream `listen` opens, or None (the request withdrawn) when the server did not
    acknowledge it within `within_s`."""
    async with AsyncExitStack() as stack:
        subscription: Subscription | None = None
        with anyio.move_on_after(within_s):
            subscription = await stack.enter_async_context(listen())
        yield subscription
