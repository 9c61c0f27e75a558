"""One upstream MCP session's side of relaying: the calls in flight on it (`Call`), and the
callbacks its client answers the upstream's requests and notifications with (`Relays`), which
hand each to the caller's end of the call it belongs to (`relay.Relay`), or refuse to guess.
"""

from __future__ import annotations

import logging
from contextvars import ContextVar, Token

from mcp.client.context import ClientRequestContext
from mcp.types import (
    INVALID_REQUEST,
    CreateMessageRequestParams,
    CreateMessageResult,
    CreateMessageResultWithTools,
    ElicitRequestParams,
    ElicitResult,
    ErrorData,
    LoggingMessageNotificationParams,
)

from reach_adapters.mcp.relay import Relay, current_relay
from reach_adapters.mcp.url_elicitation import Completions
from reach_adapters.router import CallerWait

__all__ = ["Call", "Relays"]

logger = logging.getLogger(__name__)

_Sampled = CreateMessageResult | CreateMessageResultWithTools


class Call:
    """One call on an upstream session: the caller's relay, if any, and whether the caller was
    refused something the upstream asked during it, or the router refused to guess whose it was.

    Its own context manager (`Relays.calling`): one object a call, where a generator-based one
    would add a generator and a wrapper to every call on the session."""

    __slots__ = ("_token", "owner", "refusal", "relay", "turned_away", "unguessed", "unsent", "waiting")

    # Set (by `call_tool`, in the delivery's task) only on a call with a relay: others pay nothing.
    waiting: CallerWait
    # Set (True, by the HTTP transport) only when the connection for its request could not be opened,
    # so it never reached the server: others pay nothing, and it is read with getattr.
    unsent: bool
    # Set (by the HTTP transport) only when the server answered its request with HTTP 429 or 503:
    # the status and the Retry-After header, if any; read with getattr too.
    turned_away: tuple[int, str | None]

    def __init__(self, owner: Relays, relay: Relay | None) -> None:
        self.owner = owner
        self.relay = relay
        self.refusal: str | None = None
        self.unguessed: str | None = None
        self._token: Token[Call | None] | None = None

    def __enter__(self) -> Call:
        self._token = _call.set(self)
        self.owner._in_flight.add(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.owner._in_flight.discard(self)
        if self._token is not None:
            _call.reset(self._token)

    def refuse(self, msg: str) -> ErrorData:
        return self.refused(ErrorData(code=INVALID_REQUEST, message=msg))

    def refused(self, error: ErrorData) -> ErrorData:
        """`error`, answered upstream for the caller, which is to blame if the call fails on it."""
        self.refusal = error.message
        return error


_call: ContextVar[Call | None] = ContextVar("reach_mcp_call", default=None)


class Relays:
    """One upstream session's side: the calls in flight on it, and the callbacks its client
    answers the upstream's requests and notifications with."""

    def __init__(self, agent_id: str) -> None:
        self._agent_id = agent_id
        self._in_flight: set[Call] = set()
        self.completions = Completions(agent_id, self._in_flight)
        # Whether the operator was told that log messages are dropped for want of a caller.
        self._warned = False

    def calling(self) -> Call:
        """The call about to be sent on this session, to enter (``with``) for as long as it is in
        flight: every call is counted, relayed or not, so a request read off the stream is never
        guessed onto a caller."""
        return Call(self, current_relay.get())

    def current(self) -> Call | None:
        """The call on this session being made in this context: its own task's, or that of a
        request the SDK handles in its sender's context (over HTTP, each request's own POST)."""
        call = _call.get()
        return call if call is not None and call.owner is self else None

    def _find(self) -> Call | None:
        call = self.current()
        if call is not None:
            # Handled in the calling task itself: in process, or an input-required round.
            return call
        if len(self._in_flight) == 1:
            return next(iter(self._in_flight))
        return None

    def _no_caller(self, call: Call | None, feature: str) -> ErrorData:
        if call is not None:
            msg = (
                f"agent-reach cannot forward {feature} from {self._agent_id}: the call was not made "
                "by an MCP client (a Python or HTTP caller has nobody to ask)"
            )
            return call.refuse(msg)
        if not self._in_flight:
            msg = (
                f"agent-reach cannot forward {feature} from {self._agent_id}: the server asked "
                "outside any tool call, when there is no caller to ask"
            )
            return ErrorData(code=INVALID_REQUEST, message=msg)
        msg = (
            f"agent-reach cannot forward {feature} from {self._agent_id}: {len(self._in_flight)} calls "
            "are in flight on this session and the request names none (a request on the server's "
            "own stream, over stdio or its HTTP GET stream, as an MCP SDK 1.x tool's "
            "ctx.session.create_message without related_request_id; max_concurrency 1 for this "
            "server leaves no doubt)"
        )
        # Whichever call it was fails on the router's refusal to guess, not on the server.
        for each in self._in_flight:
            each.unguessed = msg
        return ErrorData(code=INVALID_REQUEST, message=msg)

    async def on_sampling(
        self, ctx: ClientRequestContext, params: CreateMessageRequestParams
    ) -> _Sampled | ErrorData:
        call = self._find()
        if call is None or call.relay is None:
            return self._no_caller(call, "sampling")
        return await call.relay.sample(call, params)

    async def on_elicitation(
        self, ctx: ClientRequestContext, params: ElicitRequestParams
    ) -> ElicitResult | ErrorData:
        call = self._find()
        if call is None or call.relay is None:
            return self._no_caller(call, "elicitation")
        return await call.relay.elicit(call, params)

    async def on_log(self, params: LoggingMessageNotificationParams) -> None:
        call = self._find()
        if call is not None and call.relay is not None:
            await call.relay.log(params)
            return
        if call is None and len(self._in_flight) > 1:
            self._unattributed()
        logger.debug("MCP server %s logged with no caller to hear it: %s", self._agent_id, params.data)

    def _unattributed(self) -> None:
        """Tell the operator, once for this server, that its log messages are dropped: a message
        that names no call is never handed to a caller it may not belong to."""
        if self._warned:
            return
        self._warned = True
        logger.warning(
            "MCP server %s sends log messages that name no call (as over stdio) while several calls "
            "are in flight on it: agent-reach cannot tell whose they are and drops them; its "
            "callers hear them only when their call is the only one on that server (said once)",
            self._agent_id,
        )
