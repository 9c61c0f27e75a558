"""`A2AAgent`: a remote agent that speaks A2A, every skill on its card a capability."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Coroutine, Mapping, Sequence
from typing import Any, TypeVar

import httpx
from a2a.types.a2a_pb2 import AgentCard
from pydantic import JsonValue

from middleware import ReachMessage, ReachResult, ResultStatus
from reach_adapters.a2a.calls import Exchange, request_for
from reach_adapters.a2a.card import Declared, declare, declare_offline
from reach_adapters.a2a.client import Link
from reach_adapters.a2a.errors import (
    A2ACardError,
    A2AClosedError,
    A2AConnectionError,
    A2ANotTakenError,
    A2AOfflineError,
    A2AProtocolError,
    A2ATimeoutError,
)
from reach_adapters.a2a.hop import NO_THREAD, UNARY
from reach_adapters.a2a.options import A2AOptions
from reach_adapters.a2a.states import checked_payload, message_result, task_result
from reach_adapters.a2a.threads import Threads
from reach_adapters.errors import (
    InvalidDeclarationError,
    InvalidMessageError,
    ReachError,
)
from reach_adapters.router import (
    AgentHandle,
    AgentState,
    Capability,
    ErrorKind,
    Fault,
    StreamEnded,
    agent_id_part,
    checked_options,
    error_result,
    on_loop,
    onward,
    parse_agent_id,
    reconnect_until,
    request_meta,
    thread_of,
    time_left,
)

__all__ = ["A2AAgent"]

logger = logging.getLogger(__name__)

T = TypeVar("T")
# Ends of a call that are no failure of the agent's: each becomes a result (`_refused`).
_REFUSALS = (A2ANotTakenError, A2AClosedError)


class A2AAgent:
    """One A2A agent (``a2a:<name>:<instance>``); each skill of its card is a capability.

    All calls share one SDK client and HTTP client made at connect. An agent that cannot be
    reached goes OFFLINE at once and its card is fetched again with backoff until it answers;
    the router's health probe fetches the card too. Build one with `connect`.
    """

    def __init__(self, link: Link, agent_id: str, overrides: Mapping[str, Mapping[str, Any]]) -> None:
        if not isinstance(link, Link):
            msg = f"build an A2AAgent with A2AAgent.connect(url), not from a {type(link).__name__}"
            raise InvalidDeclarationError(msg)
        self._link = link
        self._agent_id = agent_id
        self._overrides = overrides
        self._declared = Declared()
        self._threads = Threads(agent_id, link.options.threads)
        self._handles: list[AgentHandle] = []
        self._offline: str | None = "not connected yet"
        self._reprobe: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._closed = False

    # -- connecting --------------------------------------------------------------------------

    @classmethod
    async def connect(
        cls,
        url: str,
        name: str | None = None,
        *,
        headers: Mapping[str, str] | None = None,
        auth: httpx.Auth | None = None,
        options: A2AOptions | Mapping[str, Any] | None = None,
        overrides: Mapping[str, Mapping[str, Any]] | None = None,
        offline_ok: bool = False,
    ) -> A2AAgent:
        """Fetch the agent card below `url` (``/.well-known/agent-card.json``) and return the
        agent ``a2a:<name>:<instance>``, `name` defaulting to the card's name.

        ``headers=`` and ``auth=`` (an ``httpx.Auth``) go with every request to `url`'s origin,
        the card's included, and nowhere else; ``overrides`` lays capability fields over a
        skill's, by skill id. With ``offline_ok=True`` (and a `name`) an agent that cannot be
        reached is returned OFFLINE, with the capabilities ``overrides`` declares, and its card
        is fetched in the background until it answers (as ``reach serve`` does).

        Raises `InvalidDeclarationError` for bad arguments, `A2ACardError` naming the URL and the
        field when the card is missing, not JSON or unusable, `A2AConnectionError` when the agent
        cannot be reached, and `A2ATimeoutError` when the card does not come within
        ``options.connect_timeout_s``.
        """
        checked = checked_options(A2AOptions, options, f"A2A agent at {url}")
        if not isinstance(url, str) or not url.startswith(("http://", "https://")):
            msg = f"A2AAgent.connect takes the agent's base URL (http:// or https://), got {url!r}"
            raise InvalidDeclarationError(msg)
        link = Link(url, headers, auth, checked)
        try:
            try:
                card = await link.fetch_card()
            except (A2AConnectionError, A2ATimeoutError) as exc:
                if not offline_ok or name is None:
                    raise
                return cls._unreachable(link, name, dict(overrides or {}), str(exc))
            agent_id = f"a2a:{name or agent_id_part(card.name.lower(), 'agent')}:{checked.instance}"
            parse_agent_id(agent_id)
            agent = cls(link, agent_id, dict(overrides or {}))
            agent._adopt(card)
        except BaseException:
            await link.aclose()
            raise
        agent._loop = asyncio.get_running_loop()
        agent._set_state(AgentState.ONLINE, "connected")
        return agent

    @classmethod
    def _unreachable(
        cls, link: Link, name: str, overrides: dict[str, Mapping[str, Any]], reason: str
    ) -> A2AAgent:
        """An agent whose card could not be fetched: OFFLINE, declaring what `overrides` say,
        its card fetched again in the background."""
        agent_id = f"a2a:{name}:{link.options.instance}"
        parse_agent_id(agent_id)
        agent = cls(link, agent_id, overrides)
        agent._declared = declare_offline(link.options, overrides)
        agent._loop = asyncio.get_running_loop()
        logger.warning(
            "A2A agent %s at %s cannot be reached: %s; it is OFFLINE until its card can be fetched",
            agent_id,
            link.shown,
            reason,
        )
        agent._offline = reason
        agent._start_reprobe()
        return agent

    # -- the agent protocol ------------------------------------------------------------------

    @property
    def agent_id(self) -> str:
        return self._agent_id

    @property
    def url(self) -> str:
        return self._link.url

    @property
    def card(self) -> AgentCard:
        return self._link.card

    @property
    def options(self) -> A2AOptions:
        return self._link.options

    @property
    def capabilities(self) -> Sequence[Capability]:
        return self._declared.capabilities

    @property
    def connected(self) -> bool:
        return self._offline is None

    def __repr__(self) -> str:
        state = "online" if self._offline is None else f"offline: {self._offline}"
        return f"A2AAgent({self._agent_id!r}, {self._link.shown!r}, {state})"

    def attach(self, handle: AgentHandle) -> None:
        """Called by the router on registration: state and card changes are reported through it."""
        self._handles.append(handle)
        if self._offline is not None:
            handle.set_state(AgentState.OFFLINE, self._offline)

    def adapt_payload(self, capability: str, payload: JsonValue) -> JsonValue:
        """A plain text for a skill that reads text is that text: ``"hi"`` -> ``{"text": "hi"}``."""
        if isinstance(payload, str) and capability in self._declared.text_skills:
            return {"text": payload}
        return payload

    async def invoke(self, message: ReachMessage) -> ReachResult:
        return await on_loop(self._loop, self._invoke(message), self._loop_gone)

    async def astream(self, message: ReachMessage) -> AsyncIterator[JsonValue]:
        """Each artifact chunk as the agent streams it; an agent that streams none yields its
        answer once. A task that ends other than completed ends the stream with its result
        (`StreamEnded`): failed, rejected or waiting for input is not the agent's failure, and a
        question is answered with ``resume=`` on the same thread, and streams in one piece."""
        meta = message.meta_info
        if "resume" in meta.__pydantic_fields_set__ and (meta.stream_mode is not None or meta.subgraphs):
            # A reach server answers a task's question as a call, in one piece: a caller reading
            # `[mode, chunk]` pairs would mis-read it (as the MCP hop refuses modes it cannot keep).
            msg = (
                f"A2A agent {self._agent_id} answers resume= in one piece, so its stream_mode or "
                "subgraphs cannot shape the chunks: stream the answer without them, or send it with route"
            )
            raise InvalidMessageError(msg)
        where = f"A2A agent at {self._link.shown}: artifact update"
        streamed = False
        async with self._threads.first_turns_in_order(message.meta_info):
            exchange = self._exchange(message, stream=True)
            try:
                async for parts in exchange.events():
                    streamed = True
                    yield checked_payload(parts, where)
            except _REFUSALS as exc:
                raise StreamEnded(self._refused(message, exc)) from None
            result = self._result(message, exchange)
        if result.status is not ResultStatus.OK:
            raise StreamEnded(result)
        if not streamed:
            yield result.payload

    async def probe(self) -> bool:
        """The router's health probe: the card fetched once. A success brings back an agent this
        adapter took OFFLINE, and takes in a changed card."""
        return await self._on_loop(self._probe())

    async def aclose(self) -> None:
        """Stop re-probing, cancel the remote tasks of calls in flight (those calls end
        cancelled), let pending cancels end, close the HTTP client. Safe to call twice."""
        if self._closed:
            return
        self._closed = True
        reprobe, self._reprobe = self._reprobe, None
        if reprobe is not None:
            reprobe.cancel()
            await asyncio.wait({reprobe})
        await self._link.aclose()
        self._set_state(AgentState.OFFLINE, "closed")

    async def __aenter__(self) -> A2AAgent:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- calls -------------------------------------------------------------------------------

    async def _on_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the loop that connected: the HTTP client's connections belong to it."""
        return await on_loop(self._loop, coro, self._loop_gone)

    def _loop_gone(self) -> A2AOfflineError:
        msg = f"A2A agent {self._agent_id}: the event loop it was connected on is gone; connect again"
        return A2AOfflineError(msg)

    async def _invoke(self, message: ReachMessage) -> ReachResult:
        async with self._threads.first_turns_in_order(message.meta_info):
            exchange = self._exchange(message)
            try:
                async for _ in exchange.events():
                    pass
            except _REFUSALS as exc:
                return self._refused(message, exc)
            return self._result(message, exchange)

    def _refused(self, message: ReachMessage, exc: A2ANotTakenError | A2AClosedError) -> ReachResult:
        """A call that ended for a reason that is neither the agent's failure nor the task's:
        a message its task does not take (the caller's to fix), or the agent closed under it."""
        if isinstance(exc, A2ANotTakenError):
            # Refused at the door: no work was started.
            kind = type(exc).__name__
            status, fault, delivered = ResultStatus.REJECTED, Fault.CALLER, False
        else:
            status, kind, fault, delivered = ResultStatus.CANCELLED, ErrorKind.CANCELLED, Fault.ROUTER, True
        return error_result(
            message, status, kind, str(exc), fault=fault, agent_id=self._agent_id, delivered=delivered
        )

    def _exchange(self, message: ReachMessage, *, stream: bool = False) -> Exchange:
        if self._offline is not None:
            msg = f"A2A agent {self._agent_id} is offline ({self._offline}); its card is being fetched again"
            raise A2AOfflineError(msg)
        meta = message.meta_info
        skill = meta.capability or ""
        timeouts_s = self._declared.timeouts_s
        if skill not in timeouts_s:
            skills = sorted(cap.name for cap in self._declared.capabilities)
            msg = f"agent {self._agent_id} has no skill for capability {skill!r}; it has {skills}"
            raise InvalidMessageError(msg)
        options = self._link.options
        carried = request_meta(
            onward(meta, self._agent_id, skill if options.hop_tokens else None), stream=stream
        )
        if not stream and self._link.streaming:
            carried[UNARY] = True
        if thread_of(meta) is None:
            carried[NO_THREAD] = True
        turn = self._threads.turn(meta)
        request = request_for(message, skill, carried, turn, options.return_immediately)
        # The skill's own timeout (its override's, if any), as the router bounds the call by it.
        timeout_s = time_left(message, timeouts_s[skill])
        return Exchange(self._link, request, timeout_s, self._lost)

    def _result(self, message: ReachMessage, exchange: Exchange) -> ReachResult:
        url = self._link.shown
        if exchange.reply is not None:
            result = message_result(message, self._agent_id, url, exchange.reply)
        elif exchange.task is not None:
            result = task_result(message, self._agent_id, url, exchange.task)
        else:
            msg = f"A2A agent at {url} ended the call with neither a task nor a message"
            raise A2AProtocolError(msg)
        self._threads.remember(message.meta_info, result)
        return result

    # -- health ------------------------------------------------------------------------------

    async def _probe(self) -> bool:
        if self._closed:
            return False
        try:
            card = await self._link.fetch_card(self._link.options.connect_timeout_s)
            self._adopt(card)
        except A2ACardError as exc:
            # The agent answers, but with a card that cannot be used: say so, it will not fix itself.
            logger.warning("A2A agent %s: its card cannot be used: %s", self._agent_id, exc)
            return False
        except ReachError as exc:
            logger.debug("A2A agent %s: probe failed: %s", self._agent_id, exc)
            return False
        if self._offline is not None:
            self._set_state(AgentState.ONLINE, "agent card fetched again")
        return True

    def _adopt(self, card: AgentCard) -> None:
        """Take a (re-)fetched card: new capabilities are reported to the router."""
        declared = declare(card, self._link.shown, self._link.options, self._overrides)
        self._link.adopt(card)
        changed = declared.capabilities != self._declared.capabilities
        self._declared = declared
        if changed:
            for handle in self._handles:
                handle.set_capabilities(declared.capabilities)

    def _lost(self, reason: str) -> None:
        """A call could not reach the agent: OFFLINE now, and its card fetched until it answers."""
        if self._offline is not None or self._closed:
            return
        logger.warning("A2A agent %s is offline: %s", self._agent_id, reason)
        self._set_state(AgentState.OFFLINE, reason)
        self._start_reprobe()

    def _start_reprobe(self) -> None:
        policy = self._link.options.reprobe
        if policy.enabled:
            self._reprobe = asyncio.get_running_loop().create_task(
                reconnect_until(self._reprobed, policy), name=f"{self._agent_id} re-probe"
            )

    async def _reprobed(self) -> bool:
        """One re-probe: True once the agent is back (by this probe or the router's) or closed."""
        if self._offline is None or self._closed:
            return True
        if await self._probe():
            logger.info("A2A agent %s is back", self._agent_id)
            return True
        return False

    def _set_state(self, state: AgentState, reason: str) -> None:
        self._offline = None if state is AgentState.ONLINE else reason
        for handle in self._handles:
            handle.set_state(state, reason)
