"""What the MCP client of a routed call hears from the upstream server serving it: progress, log
messages, and the upstream's sampling and elicitation requests, carried across the router's hop;
and the client's own request `_meta`, carried the other way.

The router's MCP server opens a `Relay` for each ``tools/call`` (`relaying`); the upstream's
session (`upstream.Relays`) finds it through a context variable while the call runs in the
caller's task, and otherwise (a request read from the upstream's stream by its own reader task)
when it is the only relayed call in flight on that session: a message is never handed to a
caller it might not belong to. This module is the caller's end; `upstream` the session's.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any, TypeVar, cast

import anyio
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from mcp.types import (
    INTERNAL_ERROR,
    LOG_LEVEL_META_KEY,
    ClientCapabilities,
    CreateMessageRequest,
    CreateMessageRequestParams,
    CreateMessageResult,
    CreateMessageResultWithTools,
    ElicitationCapability,
    ElicitRequest,
    ElicitRequestParams,
    ElicitRequestURLParams,
    ElicitResult,
    EmptyResult,
    ErrorData,
    InputRequest,
    InputRequests,
    InputResponse,
    InputResponses,
    LoggingLevel,
    LoggingMessageNotification,
    LoggingMessageNotificationParams,
    SamplingCapability,
    ServerNotification,
    SetLevelRequestParams,
)
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from reach_adapters.mcp.converter import HOP_META
from reach_adapters.mcp.peers import connection_of

if TYPE_CHECKING:
    from reach_adapters.mcp.upstream import Call

__all__ = ["Relay", "can_be_asked", "current_relay", "relaying", "serving", "session_level", "set_level"]

# The caller's end of the call being served in this context (`relaying`), for the upstream's session.
current_relay: ContextVar[Relay | None] = ContextVar("reach_mcp_relay", default=None)

_LEVELS: list[LoggingLevel] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
]
# Where a handshake-era client's level (`set_level`) is held: in its connection's own state, which
# lasts as long as its session.
_LEVEL_STATE = "agent-reach/log_level"
# The progress token as the SDK reads a request's `_meta` (and as it is on the wire).
_TOKEN = frozenset({"progress_token", "progressToken"})
_Sampled = CreateMessageResult | CreateMessageResultWithTools
# How long a caller's request that ended waits for its open questions to be withdrawn.
_WITHDRAW_S = 1.0
_R = TypeVar("_R", CreateMessageResult, CreateMessageResultWithTools, ElicitResult)
# What a caller declares to be asked anything (`Relay._refusal`, `can_be_asked`).
_SAMPLING = ClientCapabilities(sampling=SamplingCapability())
_ELICITATION = ClientCapabilities(elicitation=ElicitationCapability())


class Relay:
    """The calling client's end of one ``tools/call`` served by the router."""

    def __init__(self, ctx: ServerRequestContext[Any]) -> None:
        self._ctx = ctx
        # A 2026-07-28 client opts in to log messages per request; an earlier one sets a level for
        # its session (`set_level`). It cannot be sent requests during a call: what the upstream
        # asks goes back to it as an input-required result (`rounds`), and the call resumes when
        # it calls again.
        self.rounds = ctx.session.protocol_version in MODERN_PROTOCOL_VERSIONS
        self.log_level: LoggingLevel | None = (
            cast("LoggingLevel | None", (ctx.meta or {}).get(LOG_LEVEL_META_KEY))
            if self.rounds
            else session_level(ctx.session)
        )
        # The routed call this request dispatched (`serving`): its delivery to an upstream carries
        # the caller's own `_meta`; nested calls and work left running do not.
        self.task_id: str | None = None
        # Progress only goes up: nested calls made for this one restart their own count.
        self._progress = float("-inf")
        self._keys = itertools.count(1)
        # Each question's answer, None when the caller came back without one.
        self._unsent: dict[str, tuple[InputRequest, asyncio.Future[InputResponse | None]]] = {}
        self._sent: dict[str, asyncio.Future[InputResponse | None]] = {}
        self._woken: asyncio.Future[None] | None = None
        # Requests forwarded to a 2025 caller awaiting its answer.
        self._asking: set[asyncio.Future[Any]] = set()
        self._ended = False

    @property
    def asking(self) -> bool:
        """Whether a request forwarded to the caller still awaits its answer (then `end` it)."""
        return bool(self._asking)

    def wake_on_question(self) -> asyncio.Future[None]:
        """A future that is done when the upstream asks the caller something not yet handed over."""
        self._woken = woken = asyncio.get_running_loop().create_future()
        if self._unsent:
            woken.set_result(None)
        return woken

    def take_questions(self) -> InputRequests:
        """What the upstream asked since the last round, to hand the caller."""
        questions = {key: request for key, (request, _) in self._unsent.items()}
        self._sent.update({key: future for key, (_, future) in self._unsent.items()})
        self._unsent.clear()
        return questions

    def resume(self, ctx: ServerRequestContext[Any], answers: InputResponses | None) -> None:
        """The caller called again with its answers: notices now go on this request's stream."""
        self._ctx = ctx
        for key, future in self._sent.items():
            if not future.done():
                future.set_result((answers or {}).get(key))
        self._sent.clear()

    def own_meta(self) -> dict[str, Any]:
        """The caller's own keys of its request's `_meta`, for the upstream serving its call, which
        would have had them directly; not the keys of this hop (the protocol's, the router's, the
        progress token: the router writes its own for the next hop)."""
        meta = self._ctx.meta
        if not meta:
            return {}
        return {key: value for key, value in meta.items() if not (key.startswith(HOP_META) or key in _TOKEN)}

    async def progress(self, progress: float, total: float | None, message: str | None) -> None:
        """Against the caller's own progress token; nothing when it asked for none."""
        if progress <= self._progress:
            return
        self._progress = progress
        await self._ctx.session.report_progress(progress, total, message)

    async def log(self, params: LoggingMessageNotificationParams) -> None:
        wanted = self.log_level
        # A 2025 upstream sends whatever it likes: only what the caller opted in to goes on.
        if wanted is None or _LEVELS.index(params.level) < _LEVELS.index(wanted):
            return
        await self.notify(LoggingMessageNotification(params=params))

    async def notify(self, notice: ServerNotification, *, related: bool = True) -> None:
        """Send the caller `notice`: on its request's stream while `related` (its call runs), else
        on its session's own (a request that has ended has no stream left)."""
        related_id = self._ctx.request_id if related else None
        await self._ctx.session.send_notification(notice, related_request_id=related_id)

    async def sample(self, call: Call, params: CreateMessageRequestParams) -> _Sampled | ErrorData:
        refused = self._refusal(call, "sampling", _SAMPLING)
        if refused is not None:
            return refused
        request = CreateMessageRequest(params=params)
        if params.tools:
            return await self._ask(call, request, CreateMessageResultWithTools)
        return await self._ask(call, request, CreateMessageResult)

    async def elicit(self, call: Call, params: ElicitRequestParams) -> ElicitResult | ErrorData:
        refused = self._refusal(call, "elicitation", _ELICITATION)
        if refused is not None:
            return refused
        if isinstance(params, ElicitRequestURLParams):
            # The server's word that the user is done comes later, naming the elicitation.
            call.owner.completions.expect([params.elicitation_id], call)
        return await self._ask(call, ElicitRequest(params=params), ElicitResult)

    def _refusal(self, call: Call, feature: str, needed: ClientCapabilities) -> ErrorData | None:
        session = self._ctx.session
        if not session.check_client_capability(needed):
            msg = f"the MCP client calling through agent-reach did not declare {feature}"
            return call.refuse(msg)
        if not session.can_send_request and not self.rounds:
            msg = (
                f"the MCP client calling through agent-reach speaks {session.protocol_version}, "
                f"where a server cannot send it {feature} requests during a call"
            )
            return call.refuse(msg)
        return None

    async def _ask(self, call: Call, request: InputRequest, kind: type[_R]) -> _R | ErrorData:
        """The caller's answer; when it gives none or an error, the refusal is the caller's. The
        time it takes is the caller's (`CallerWait`): a deadline passing meanwhile is not the
        upstream's fault."""
        with call.waiting:
            if self.rounds:
                return await self._next_round(call, request, kind)
            related = ServerMessageMetadata(related_request_id=self._ctx.request_id)
            # A task of its own, so that the caller's request ending withdraws it (`end`).
            sent = asyncio.ensure_future(self._ctx.session.send_request(request, kind, metadata=related))
            self._asking.add(sent)
            try:
                # Shielded: a cancel scope re-cancels its task until it leaves, and each cancel
                # would reach `sent`, cutting short the notice withdrawing it (`finally`).
                return await asyncio.shield(sent)
            except MCPError as exc:
                # The caller's own refusal goes back upstream as it was given.
                return call.refused(exc.error)
            except asyncio.CancelledError:
                task = asyncio.current_task()
                if not self._ended or (task is not None and task.cancelling()):
                    raise
                # Withdrawn by `end`, not by the upstream: it hears that nobody will answer.
                return call.refuse("the MCP client's call through agent-reach ended before it answered")
            finally:
                self._asking.discard(sent)
                # Withdrawn by the upstream (its question cancelled): withdrawn at the caller too,
                # once (the SDK then tells the caller).
                sent.cancel()

    async def _next_round(self, call: Call, request: InputRequest, kind: type[_R]) -> _R | ErrorData:
        """The answer to `request` from the caller's next round (`rounds`)."""
        future: asyncio.Future[InputResponse | None] = asyncio.get_running_loop().create_future()
        key = f"{request.method}-{next(self._keys)}"
        self._unsent[key] = (request, future)
        if self._woken is not None and not self._woken.done():
            self._woken.set_result(None)
        answer = await future
        if answer is None:
            return call.refuse(f"the MCP client calling through agent-reach sent no answer for {key!r}")
        return kind.model_validate(answer.model_dump(by_alias=True, mode="json", exclude_none=True))

    async def end(self) -> None:
        """The caller's request is over (answered, timed out or cancelled): withdraw what the
        upstream still asks it (the SDK sends ``notifications/cancelled``), while the request's
        stream can still carry the notice; the upstream, cancelled too, withdraws its question
        only later, once that stream is closed."""
        self._ended = True
        asking = list(self._asking)
        if not asking:
            return
        for sent in asking:
            sent.cancel()
        # Shielded: the request ending may be its own cancellation; bounded: a wedged transport.
        with anyio.CancelScope(shield=True), anyio.move_on_after(_WITHDRAW_S):
            await asyncio.wait(asking)


async def set_level(ctx: ServerRequestContext[Any], params: SetLevelRequestParams) -> EmptyResult:
    """``logging/setLevel`` from a handshake-era client: from now on, the log messages relayed to
    its session's calls are those at `params.level` and above (`session_level`)."""
    connection = connection_of(ctx.session)
    if connection is None:
        msg = "agent-reach cannot hold a log level for this session: it hears every level"
        raise MCPError(INTERNAL_ERROR, msg)
    connection.state[_LEVEL_STATE] = params.level
    return EmptyResult()


def session_level(session: ServerSession) -> LoggingLevel:
    """The level a handshake-era client set for its session (`set_level`): every level until it
    sets one, as the spec lets a server choose."""
    connection = connection_of(session)
    level: LoggingLevel | None = None if connection is None else connection.state.get(_LEVEL_STATE)
    return "debug" if level is None else level


def can_be_asked(session: ServerSession) -> bool:
    """Whether the upstream's questions may reach this caller: it declared sampling or elicitation.
    Without either, every question is refused for it (`Relay._refusal`)."""
    return session.check_client_capability(_SAMPLING) or session.check_client_capability(_ELICITATION)


def serving(task_id: str) -> None:
    """The client request being served dispatched routed call `task_id` (see `Relay.task_id`)."""
    relay = current_relay.get()
    if relay is not None:
        relay.task_id = task_id


@contextmanager
def relaying(relay: Relay) -> Iterator[Relay]:
    """Make `relay` the caller's end for the call being served in this task."""
    token = current_relay.set(relay)
    try:
        yield relay
    finally:
        current_relay.reset(token)
