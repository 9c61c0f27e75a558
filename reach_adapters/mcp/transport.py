"""The SDK client for each kind of target, watched so a dead server is noticed the moment it dies."""

from __future__ import annotations

import contextvars
import json
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from types import TracebackType
from typing import Any

import anyio
import httpx2
from mcp import Client, StdioServerParameters, stdio_client
from mcp.client._transport import ReadStream, TransportStreams
from mcp.client.session import MessageHandlerFnT
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.message import SessionMessage

from reach_adapters.mcp.options import MCPOptions, resolve_command
from reach_adapters.mcp.spec import HttpServer, Target
from reach_adapters.mcp.upstream import Call, Relays
from reach_adapters.router import REFUSED_STATUS_CODES

__all__ = ["open_client"]

_Item = SessionMessage | Exception


def open_client(
    target: Target,
    options: MCPOptions,
    *,
    on_eof: Callable[[], None],
    on_message: MessageHandlerFnT,
    relays: Relays,
) -> Client:
    """An un-entered client for `target`; `on_eof` runs when the server's side of the stream ends.

    Response caching is off: a re-scan after ``tools/list_changed`` must see the new listing. The
    server's log messages, and with ``options.relay_requests`` its sampling and elicitation
    requests, go to the caller `relays` finds. A stdio ``python`` is the interpreter running
    Agent Reach, as in config files (`resolve_command`).
    """
    handlers: dict[str, Any] = {
        "message_handler": on_message,
        "cache": None,
        "logging_callback": relays.on_log,
        "mode": "legacy" if options.protocol == "2025-11-25" else "auto",
    }
    if options.relay_requests:
        handlers |= {"sampling_callback": relays.on_sampling, "elicitation_callback": relays.on_elicitation}
    if isinstance(target, StdioServerParameters):
        params = target.model_copy(update={"command": resolve_command(target.command)})
        return Client(_Watched(stdio_client(params), on_eof), **handlers)
    if isinstance(target, HttpServer):
        return Client(_Watched(_http(target, options, relays), on_eof), **handlers)
    # In process there is no stream that could end: the server lives as long as this process.
    return Client(target, **handlers)


@asynccontextmanager
async def _http(target: HttpServer, options: MCPOptions, relays: Relays) -> AsyncIterator[TransportStreams]:
    timeout = httpx2.Timeout(options.http_timeout_s, read=options.sse_read_timeout_s)
    async with (
        _HttpClient(relays, headers=dict(target.headers), timeout=timeout, auth=target.auth) as http,
        streamable_http_client(target.url, http_client=http) as streams,
    ):
        yield streams


class _HttpClient(httpx2.AsyncClient):
    """Tells `relays` of a tool call that could not connect, or that the server turned away with
    HTTP 429 or 503: the SDK reports the first, as any transport failure, as a connection lost
    during the call, whose outcome is unknown, and the second as an internal error of the server;
    but neither call ran, and a replica may take it even when it is not safe to repeat."""

    def __init__(self, relays: Relays, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._relays = relays

    async def send(self, request: httpx2.Request, **kwargs: Any) -> httpx2.Response:
        try:
            response = await super().send(request, **kwargs)
        except (httpx2.ConnectError, httpx2.ConnectTimeout):
            # Refused, unreachable, or no TLS handshake: not one byte of the request was sent.
            call = _tool_call(self._relays.current(), request.content)
            if call is not None:
                call.unsent = True
            raise
        if response.status_code in REFUSED_STATUS_CODES:
            call = _tool_call(self._relays.current(), request.content)
            if call is not None:
                call.turned_away = (response.status_code, response.headers.get("retry-after"))
        return response


def _tool_call(call: Call | None, body: bytes) -> Call | None:
    """`call` when `body`, a request of its context, was its tool call; any other request of its
    context (an answer to the server, sent after the call was) says nothing of the call."""
    if call is None:
        return None
    try:
        request = json.loads(body)
    except ValueError:
        return None
    if isinstance(request, dict) and request.get("method") == "tools/call":
        return call
    return None


class _Watched(AbstractAsyncContextManager[TransportStreams]):
    """A transport whose read stream reports its end of stream."""

    def __init__(
        self, inner: AbstractAsyncContextManager[TransportStreams], on_eof: Callable[[], None]
    ) -> None:
        self._inner = inner
        self._on_eof = on_eof

    async def __aenter__(self) -> TransportStreams:
        read, write = await self._inner.__aenter__()
        return _EofStream(read, self._on_eof), write

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> bool | None:
        return await self._inner.__aexit__(exc_type, exc, tb)


class _EofStream:
    """Passes items through; end of stream means the peer is gone (a process that exited)."""

    def __init__(self, inner: ReadStream[_Item], on_eof: Callable[[], None]) -> None:
        self._inner = inner
        self._on_eof = on_eof

    @property
    def last_context(self) -> contextvars.Context | None:
        # The dispatcher reads the sender's context off streams that carry one (HTTP).
        context: contextvars.Context | None = getattr(self._inner, "last_context", None)
        return context

    async def receive(self) -> _Item:
        try:
            return await self._inner.receive()
        except anyio.EndOfStream:
            self._on_eof()
            raise

    async def aclose(self) -> None:
        await self._inner.aclose()

    def __aiter__(self) -> _EofStream:
        return self

    async def __anext__(self) -> _Item:
        # The inner stream directly, not through `receive`: the session reads every message here.
        try:
            return await self._inner.receive()
        except anyio.EndOfStream:
            self._on_eof()
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _EofStream:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()
