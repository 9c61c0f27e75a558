"""Routed calls that wait for their caller's answers across its retries (MCP 2026-07-28).

A 2026 client cannot be sent requests during a call. When the upstream serving a call asks for
sampling or elicitation, the router's server answers the client with an input-required result
whose ``request_state`` names the routed call, which keeps running; the client's retry with its
answers resumes it. The state is a random token: it cannot be guessed to read another caller's
call.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from functools import partial

from mcp.server.context import ServerRequestContext
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, CallToolRequestParams, InputRequiredResult

from middleware import ReachResult
from reach_adapters.mcp.relay import Relay, can_be_asked, relaying

__all__ = ["Exchanges"]

logger = logging.getLogger(__name__)

# Calls waiting for a caller that never came back are cancelled beyond this many.
_MAX_OPEN = 1024
# How long the result of a call that ended between rounds waits for its caller.
_KEEP_S = 60.0


class Exchanges:
    """The routed calls whose callers have questions to answer, by the state handed out."""

    def __init__(self) -> None:
        self._open: OrderedDict[str, tuple[Relay, asyncio.Task[ReachResult]]] = OrderedDict()

    async def serve(
        self,
        ctx: ServerRequestContext[object],
        params: CallToolRequestParams,
        dispatch: Callable[[], Awaitable[ReachResult]],
    ) -> ReachResult | InputRequiredResult:
        """Start the call with `dispatch`, or resume the one ``params.request_state`` names; return
        its result, or the questions its upstream asked meanwhile."""
        state = params.request_state
        if state is None and not can_be_asked(ctx.session):
            # No question can end a round early: the call runs in this request's task, without the
            # task of its own a round needs, whose cost a trivial call feels.
            with relaying(Relay(ctx)):
                return await dispatch()
        if state is None:
            relay = Relay(ctx)
            task = asyncio.create_task(_run(relay, dispatch))
        else:
            entry = self._open.pop(state, None)
            if entry is None:
                msg = (
                    f"request_state {state[:16]!r} names no waiting call (it finished or expired); "
                    "call the tool again without it"
                )
                raise MCPError(INVALID_PARAMS, msg)
            relay, task = entry
            relay.resume(ctx, params.input_responses)
        woken = relay.wake_on_question()
        task.add_done_callback(partial(_wake, woken))
        try:
            await woken
        except asyncio.CancelledError:
            task.cancel()
            raise
        if task.done():
            return task.result()
        token = secrets.token_urlsafe(24)
        self._open[token] = (relay, task)
        # A call that ends before its caller comes back keeps its result for the caller a while:
        # "call again" could run work that is not safe to repeat.
        task.add_done_callback(
            lambda _: asyncio.get_running_loop().call_later(_KEEP_S, self._open.pop, token, None)
        )
        while len(self._open) > _MAX_OPEN:
            _, (_, oldest) = self._open.popitem(last=False)
            logger.warning("cancelled a routed call whose caller never answered its upstream's questions")
            oldest.cancel()
        return InputRequiredResult(input_requests=relay.take_questions(), request_state=token)

    def close(self) -> None:
        for _, task in self._open.values():
            task.cancel()
        self._open.clear()


def _wake(woken: asyncio.Future[None], _: object) -> None:
    if not woken.done():
        woken.set_result(None)


async def _run(relay: Relay, dispatch: Callable[[], Awaitable[ReachResult]]) -> ReachResult:
    with relaying(relay):
        return await dispatch()
