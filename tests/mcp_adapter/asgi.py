"""MCP servers served over streamable HTTP in the test's own event loop, and what may stand in
front of one: an ASGI wrapper that answers a tool's calls with an HTTP status of its own, a TCP
proxy that cuts the connection of a tool's call."""

from __future__ import annotations

import asyncio
import contextlib
import json
import socket
from collections.abc import AsyncIterator, Mapping
from typing import Any

import uvicorn

from tests.refusing import refusing_requests, replaying

__all__ = ["cutting", "mute_listen", "refusing", "serve_asgi"]

Scope = dict[str, Any]
Receive = Any
Send = Any
ASGIApp = Any


@contextlib.asynccontextmanager
async def serve_asgi(app: ASGIApp) -> AsyncIterator[str]:
    """Serve `app` (an MCP server's streamable HTTP app) on 127.0.0.1, a port the OS picked, with
    its lifespan; yield its MCP endpoint's URL."""
    sock = socket.create_server(("127.0.0.1", 0))
    config = uvicorn.Config(app, log_config=None, log_level="warning", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        async with asyncio.timeout(20):
            while not server.started:
                if task.done():
                    task.result()
                await asyncio.sleep(0.01)
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    finally:
        server.should_exit = True
        async with asyncio.timeout(20):
            await asyncio.wait({task})
        sock.close()


def refusing(app: ASGIApp, refusals: Mapping[str, tuple[int, Mapping[str, str]]]) -> ASGIApp:
    """`app`, except that a ``tools/call`` of a tool named in `refusals` is answered with its status
    and headers (a plain text body), as a rate limiter or proxy in front of a server does: the
    server never sees it."""
    return refusing_requests(app, lambda body: refusals.get(_tool_called(body) or ""))


def mute_listen(app: ASGIApp) -> ASGIApp:
    """`app`, except that a ``subscriptions/listen`` request gets a response that starts (as JSON)
    and never says anything, as a server that frames the stream's acknowledgement wrongly does."""

    async def wrapped(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await app(scope, receive, send)
            return
        first = await receive()
        if b'"subscriptions/listen"' not in first.get("body", b""):
            await app(scope, replaying(receive, first), send)
            return
        headers = [(b"content-type", b"application/json")]
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        await send({"type": "http.response.body", "body": b"", "more_body": True})
        while (await receive())["type"] != "http.disconnect":
            pass

    return wrapped


def _tool_called(body: bytes) -> str | None:
    try:
        request = json.loads(body)
    except ValueError:
        return None
    if isinstance(request, dict) and request.get("method") == "tools/call":
        name = request.get("params", {}).get("name")
        return name if isinstance(name, str) else None
    return None


@contextlib.asynccontextmanager
async def cutting(url: str, marker: bytes) -> AsyncIterator[str]:
    """A TCP proxy to the server of `url` (on 127.0.0.1): it forwards both ways, and cuts both
    connections of a request whose bytes contain `marker` once it has passed it on, as a network
    failing mid-call does; yield `url` through it."""
    address, _, rest = url.removeprefix("http://").partition("/")
    upstream = int(address.rpartition(":")[2])

    async def forward(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, cut: bool) -> bool:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
            if cut and marker in data:
                return True
        return False

    async def handle(client_reader: asyncio.StreamReader, client_writer: asyncio.StreamWriter) -> None:
        server_reader, server_writer = await asyncio.open_connection("127.0.0.1", upstream)
        back = asyncio.create_task(forward(server_reader, client_writer, cut=False))
        try:
            if await forward(client_reader, server_writer, cut=True):
                client_writer.transport.abort()
        except OSError:
            pass
        finally:
            back.cancel()
            await asyncio.wait({back})
            server_writer.close()
            client_writer.close()

    proxy = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{proxy.sockets[0].getsockname()[1]}/{rest}"
    finally:
        proxy.close()
