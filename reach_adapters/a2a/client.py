"""The one connection to an A2A agent: its HTTP client, its card, and the SDK client over both.

Made once at connect and reused by every call: a call costs its own round trips, no setup.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
from collections.abc import AsyncGenerator, Coroutine, Mapping
from typing import Any

import httpx
from a2a.client import A2ACardResolver, AgentCardResolutionError, Client, ClientConfig, ClientFactory
from a2a.client.errors import A2AClientError
from a2a.types.a2a_pb2 import AgentCard, CancelTaskRequest, GetExtendedAgentCardRequest, StreamResponse
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from a2a.utils.errors import A2AError

from reach_adapters.a2a.errors import A2ACardError, A2AConnectionError, A2ATimeoutError
from reach_adapters.a2a.options import A2AOptions
from reach_adapters.a2a.transport import http_client, origin
from reach_adapters.security import redact_text, redact_url

__all__ = ["Link"]

logger = logging.getLogger(__name__)


class Link:
    """An agent's base URL, HTTP client, card and SDK client; `refresh` swaps in a new card."""

    def __init__(
        self, url: str, headers: Mapping[str, str] | None, auth: httpx.Auth | None, options: A2AOptions
    ) -> None:
        self.url = url.rstrip("/")
        self.shown = redact_url(self.url)
        self.options = options
        self.http = http_client(self.url, headers, auth, options)
        # Whether calls carry credentials of their own, which an extended card may answer.
        self.credentials = bool(headers) or auth is not None
        self.card = AgentCard()
        self.client: Client | None = None
        # Whether the card says the agent streams: calls then learn the task's id from the first
        # event. Kept apart from the card, as every call reads it.
        self.streaming = False
        # Set by `aclose`: a call failing from then on failed because the agent was closed.
        self.closing = False
        # Ids of the remote tasks calls are following now, cancelled by `aclose`.
        self.live: set[str] = set()
        # Calls under way, and set when there are none: `aclose` lets them end first.
        self.calls = 0
        self.quiet = asyncio.Event()
        self.quiet.set()
        self._cancels: set[asyncio.Task[None]] = set()
        self._readers: set[asyncio.Future[None]] = set()
        self._elsewhere: set[tuple[str, str, int | None]] = set()

    async def fetch_card(self, timeout_s: float | None = None) -> AgentCard:
        """The agent's card, fetched now; every failure is a `ReachError` naming the URL.

        When the public card says the agent has an extended card and this link has credentials,
        that card is the one used: a secured agent (a ``reach serve`` with a security.yaml) may
        list in public only what anyone may call, and each caller's skills in its extended card.
        """
        timeout_s = self.options.connect_timeout_s if timeout_s is None else timeout_s
        card = await self._public_card(timeout_s)
        if not (card.capabilities.extended_agent_card and self.credentials):
            return card
        return await self._extended_card(card, timeout_s)

    async def _extended_card(self, card: AgentCard, timeout_s: float) -> AgentCard:
        where = f"the extended agent card of {self.shown}"
        try:
            client = self._sdk_client(card)
        except ValueError:
            return card  # no interface this client speaks: `adopt` says so, with the card's details
        try:
            async with asyncio.timeout(timeout_s):
                return await client.get_extended_agent_card(GetExtendedAgentCardRequest())
        except TimeoutError:
            msg = f"{where} did not arrive within {timeout_s} s; raise connect_timeout_s"
            raise A2ATimeoutError(msg) from None
        except (A2AError, httpx.HTTPError) as exc:
            cause = exc.__cause__ if isinstance(exc, A2AClientError) else exc
            if isinstance(cause, httpx.HTTPStatusError) and cause.response.status_code in (401, 403):
                # Headers need not be credentials: the public card serves, and calls say the rest.
                logger.warning(
                    "%s was refused (HTTP %d): the public card is used; check the agent's headers, "
                    "auth or bearer_token_env if skills are missing",
                    where,
                    cause.response.status_code,
                )
                return card
            if isinstance(cause, httpx.TransportError):
                msg = f"cannot reach the A2A agent at {self.shown}: {redact_text(str(cause) or repr(cause))}"
                raise A2AConnectionError(msg) from None
            msg = f"{where} cannot be read: {redact_text(str(exc))}"
            raise A2ACardError(msg) from None

    async def _public_card(self, timeout_s: float) -> AgentCard:
        where = f"{self.shown}{AGENT_CARD_WELL_KNOWN_PATH}"
        resolver = A2ACardResolver(self.http, self.url)
        try:
            async with asyncio.timeout(timeout_s):
                return await resolver.get_agent_card(http_kwargs={"timeout": timeout_s})
        except TimeoutError:
            msg = f"A2A agent card at {where} did not arrive within {timeout_s} s; raise connect_timeout_s"
            raise A2ATimeoutError(msg) from None
        except AgentCardResolutionError as exc:
            cause = exc.__cause__
            if isinstance(cause, httpx.TimeoutException):
                msg = f"A2A agent card at {where}: no answer within {timeout_s} s; raise connect_timeout_s"
                raise A2ATimeoutError(msg) from None
            if isinstance(cause, httpx.RequestError):
                msg = f"cannot reach the A2A agent at {self.shown}: {redact_text(str(cause) or repr(cause))}"
                raise A2AConnectionError(msg) from None
            if exc.status_code is not None:
                msg = (
                    f"no agent card at {where} (HTTP {exc.status_code}); check the agent's base URL "
                    "(the card is served at /.well-known/agent-card.json below it) and its credentials"
                )
                if exc.status_code >= 500:
                    raise A2AConnectionError(msg) from None
                raise A2ACardError(msg) from None
            msg = f"the agent card at {where} cannot be read: {redact_text(exc.message)}"
            raise A2ACardError(msg) from None

    def adopt(self, card: AgentCard) -> None:
        """Use `card` for calls from now on: a new SDK client over the same HTTP client."""
        if self.client is not None and card == self.card:
            return
        self._check_interfaces(card)
        try:
            client = self._sdk_client(card)
        except ValueError as exc:
            offered = [f"{i.protocol_binding} {i.protocol_version}" for i in card.supported_interfaces]
            msg = (
                f"agent card at {self.shown}: field 'supported_interfaces' offers {offered or 'nothing'}, "
                f"none of which this client speaks (JSON-RPC, 1.0 or 0.3): {exc}"
            )
            raise A2ACardError(msg) from None
        self.card, self.client = card, client
        self.streaming = card.capabilities.streaming

    def _sdk_client(self, card: AgentCard) -> Client:
        """The SDK's client for `card`, over this link's HTTP client; ValueError when the card
        offers no interface it speaks."""
        return ClientFactory(ClientConfig(httpx_client=self.http, streaming=True)).create(card)

    def _check_interfaces(self, card: AgentCard) -> None:
        """Refuse a card that moves calls from https to plain http; say once per origin when calls
        go to another origin than the configured URL's (credentials are not sent there)."""
        ours = origin(self.url)
        for index, interface in enumerate(card.supported_interfaces):
            try:
                theirs = origin(interface.url)
            except (httpx.InvalidURL, TypeError):
                continue  # the SDK says which interfaces it cannot use
            if ours[0] == "https" and theirs[0] == "http":
                msg = (
                    f"agent card at {self.shown}: field 'supported_interfaces[{index}].url' "
                    f"({redact_url(interface.url)}) is plain http while the agent was configured at "
                    "https; calls are not downgraded. Fix the card, or configure the http URL if meant"
                )
                raise A2ACardError(msg)
            if theirs != ours and theirs not in self._elsewhere:
                self._elsewhere.add(theirs)
                logger.warning(
                    "A2A agent at %s: its card sends calls to another origin, %s; the configured "
                    "headers and auth are not sent there",
                    self.shown,
                    redact_url(interface.url),
                )

    def cancel_soon(self, task_id: str) -> None:
        """Tell the agent to cancel `task_id`, in the background: the call that owned it is gone."""
        self._background(self._cancel(task_id), f"a2a cancel {task_id}")

    def close_soon(self, stream: AsyncGenerator[StreamResponse, None]) -> None:
        """Close an event stream no call reads any more, in the background."""
        self._background(stream.aclose(), "a2a close stream")

    def hold(self, reader: asyncio.Future[None]) -> None:
        """Keep a reader a cancelled call left behind until it ends (the loop holds tasks only
        weakly). Not waited for by `aclose`: closing the HTTP client ends it."""
        self._readers.add(reader)
        reader.add_done_callback(self._readers.discard)

    def _background(self, work: Coroutine[Any, Any, None], name: str) -> None:
        # A context of its own: nothing of the call that left it behind applies to it.
        task = asyncio.get_running_loop().create_task(work, name=name, context=contextvars.Context())
        self._cancels.add(task)
        task.add_done_callback(self._cancels.discard)

    async def _cancel(self, task_id: str) -> None:
        client = self.client
        if client is None:
            return
        try:
            async with asyncio.timeout(self.options.cancel_timeout_s):
                await client.cancel_task(CancelTaskRequest(id=task_id))
        except (A2AError, TimeoutError, httpx.HTTPError) as exc:
            # A task that ended meanwhile is not cancelable: nothing is left to stop.
            logger.info("A2A agent at %s: cancelling task %s failed: %r", self.shown, task_id, exc)
        else:
            logger.debug("A2A agent at %s: task %s cancelled", self.shown, task_id)

    async def aclose(self) -> None:
        """Cancel the tasks calls still follow, let pending cancels finish (each is bounded),
        then close the HTTP client: a remote task is told to stop before the connection goes."""
        self.closing = True
        for task_id in sorted(self.live):
            self.cancel_soon(task_id)
        # A cancelled task's stream ends with its cancelled state; a call that learns its task's
        # id only now cancels it too (`Exchange`). What is still running then fails on close.
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(self.options.cancel_timeout_s):
                await self.quiet.wait()
        if self._cancels:
            await asyncio.wait(set(self._cancels))
        self.client = None
        try:
            await self.http.aclose()
        except (A2AClientError, httpx.HTTPError) as exc:
            logger.debug("A2A agent at %s: closing its HTTP client failed: %r", self.shown, exc)
