"""Run a router's MCP server over stdio or streamable HTTP."""

from __future__ import annotations

import asyncio
import logging
import math
import socket
from collections.abc import Callable, Sequence
from typing import Any, Literal, Protocol

import uvicorn
from mcp.server.stdio import stdio_server
from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE
from starlette.routing import Route
from starlette.types import ASGIApp

from reach_adapters.errors import InvalidDeclarationError
from reach_adapters.mcp.errors import MCPConnectionError
from reach_adapters.mcp.server import RouterMCPServer
from reach_adapters.router import Router

__all__ = ["HTTPLimits", "MCPEndpoint", "serve_mcp", "socket_url", "start_mcp_server"]

logger = logging.getLogger(__name__)

ServeTransport = Literal["stdio", "streamable-http"]

_STARTUP_TIMEOUT_S = 10.0
# Open event streams are cut after this many seconds of a graceful shutdown, so closing never hangs.
_SHUTDOWN_GRACE_S = 1.0


class HTTPLimits(Protocol):
    """What bounds a served app; the gateway's `ServerLimits` is one."""

    @property
    def max_body_bytes(self) -> int: ...

    def wrap(self, app: ASGIApp) -> ASGIApp: ...

    def uvicorn_options(self) -> dict[str, Any]: ...


async def serve_mcp(
    router: Router,
    *,
    transport: ServeTransport = "stdio",
    host: str = "127.0.0.1",
    port: int = 8000,
    path: str = "/mcp",
    name: str = "agent-reach",
    on_ready: Callable[[str], None] | None = None,
    consensus_tool: bool = False,
    instructions: str | None = None,
    upstream_instructions: bool = True,
) -> None:
    """Serve `router` as an MCP server until cancelled, or until the stdio client goes away.

    With ``transport="streamable-http"``, `on_ready` gets the URL once the server listens (useful
    with ``port=0``); `start_mcp_server` starts one without blocking instead. `consensus_tool`:
    offer the router's consensus as a tool too; `instructions`: the operator's, served before
    those of the upstream MCP servers unless `upstream_instructions` is False (all as in
    `RouterMCPServer`).
    """
    if transport == "streamable-http":
        endpoint = await start_mcp_server(
            router,
            host=host,
            port=port,
            path=path,
            name=name,
            consensus_tool=consensus_tool,
            instructions=instructions,
            upstream_instructions=upstream_instructions,
        )
        try:
            if on_ready is not None:
                on_ready(endpoint.url)
            await endpoint.wait_closed()
        finally:
            await endpoint.aclose()
        return
    if transport != "stdio":
        msg = f"transport must be 'stdio' or 'streamable-http', got {transport!r}"
        raise InvalidDeclarationError(msg)
    reach = RouterMCPServer(
        router,
        name=name,
        instructions=instructions,
        consensus_tool=consensus_tool,
        upstream_instructions=upstream_instructions,
    )
    try:
        async with stdio_server() as (read_stream, write_stream):
            await reach.server.run(read_stream, write_stream, reach.server.create_initialization_options())
    finally:
        reach.close()


async def start_mcp_server(
    router: Router,
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    path: str = "/mcp",
    name: str = "agent-reach",
    sock: socket.socket | None = None,
    routes: Sequence[Route] = (),
    shutdown_timeout_s: float = _SHUTDOWN_GRACE_S,
    limits: HTTPLimits | None = None,
    consensus_tool: bool = False,
    instructions: str | None = None,
    upstream_instructions: bool = True,
) -> MCPEndpoint:
    """Start serving `router` over streamable HTTP in the background; ``port=0`` picks a free port.

    An application serving more than MCP (the gateway's HTTP API) passes its Starlette `routes`,
    served beside `path` on the same port, and may pass a `sock` it bound itself (then `host` and
    `port` are not used), to report a port in use before building anything, and its `limits`:
    a wrapper around the whole app, uvicorn options, and the body limit of MCP requests.
    `consensus_tool`: offer the router's consensus as a tool too; `instructions`: the operator's,
    served before those of the upstream MCP servers unless `upstream_instructions` is False (all
    as in `RouterMCPServer`).
    """
    if sock is None:
        sock = _listen(host, port, path)
    else:
        host = sock.getsockname()[0]
    reach = RouterMCPServer(
        router,
        name=name,
        instructions=instructions,
        consensus_tool=consensus_tool,
        upstream_instructions=upstream_instructions,
    )
    return await _serve(reach, sock, host, path, routes, shutdown_timeout_s, limits)


def _listen(host: str, port: int, path: str) -> socket.socket:
    """The listening socket for `host`:`port`, after checking what a caller may have got wrong."""
    if not isinstance(host, str) or not host:
        msg = f"host must be a non-empty string such as '127.0.0.1', got {host!r}"
        raise InvalidDeclarationError(msg)
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
        msg = f"port must be an integer from 0 (any free port) to 65535, got {port!r}"
        raise InvalidDeclarationError(msg)
    if not isinstance(path, str) or not path.startswith("/"):
        msg = f"path must start with '/', e.g. '/mcp', got {path!r}"
        raise InvalidDeclarationError(msg)
    try:
        # Bound here, not by uvicorn, so the caller learns the port the OS picked.
        return socket.create_server((host, port))
    except OSError as exc:
        msg = f"cannot listen on {host}:{port}: {exc}; pick another host or port"
        raise MCPConnectionError(msg) from None


async def _serve(
    reach: RouterMCPServer,
    sock: socket.socket,
    host: str,
    path: str,
    routes: Sequence[Route],
    shutdown_timeout_s: float,
    limits: HTTPLimits | None,
) -> MCPEndpoint:
    app: ASGIApp = reach.server.streamable_http_app(
        streamable_http_path=path,
        host=host,
        custom_starlette_routes=list(routes) or None,
        max_request_body_size=DEFAULT_MAX_REQUEST_BODY_SIZE if limits is None else limits.max_body_bytes,
    )
    if limits is not None:
        app = limits.wrap(app)
    # log_config=None: a library must not reconfigure the application's logging.
    config = uvicorn.Config(
        app,
        log_config=None,
        lifespan="on",
        timeout_graceful_shutdown=math.ceil(shutdown_timeout_s),
        **(limits.uvicorn_options() if limits is not None else {}),
    )
    server = _Server(config)
    task = asyncio.get_running_loop().create_task(server.serve(sockets=[sock]), name=f"mcp http {host}")
    endpoint = MCPEndpoint(reach, server, task, sock, path)
    await endpoint.started()
    logger.info("serving the router over MCP at %s", endpoint.url)
    return endpoint


class _Server(uvicorn.Server):
    """A uvicorn server that says when it has started, instead of being polled for it."""

    def __init__(self, config: uvicorn.Config) -> None:
        super().__init__(config)
        self.ready = asyncio.Event()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        await super().startup(sockets)
        if self.started:
            self.ready.set()


def socket_url(sock: socket.socket, path: str = "") -> str:
    """The ``http://`` URL of `path` on the listening `sock` (an IPv6 host in brackets)."""
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}{path}"


class MCPEndpoint:
    """A router served over streamable HTTP: where it listens, and how to stop it.

    Made before `task` first runs, so that every connection `sock` accepts inherits TCP_NODELAY:
    sockets bound outside asyncio lack it, and small responses then wait out delayed ACKs (~40 ms).
    """

    def __init__(
        self,
        reach: RouterMCPServer,
        server: _Server,
        task: asyncio.Task[None],
        sock: socket.socket,
        path: str,
    ) -> None:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self._reach = reach
        self._server = server
        self._task = task
        self._sock = sock
        host, port = sock.getsockname()[:2]
        self.host: str = host
        self.port: int = port
        self.url = socket_url(sock, path)

    async def started(self) -> None:
        """Wait until the server accepts connections; raise `MCPConnectionError` if it cannot."""
        ready = asyncio.ensure_future(self._server.ready.wait())
        try:
            await asyncio.wait(
                {ready, self._task}, timeout=_STARTUP_TIMEOUT_S, return_when=asyncio.FIRST_COMPLETED
            )
        finally:
            ready.cancel()
        if not self._server.ready.is_set():
            await self.aclose()
            msg = f"the MCP server on {self.host}:{self.port} did not start; see the log for why"
            raise MCPConnectionError(msg)

    async def wait_closed(self) -> None:
        """Return when the server has stopped (after `aclose`, or a signal in the main thread)."""
        await asyncio.wait({self._task})

    async def aclose(self) -> None:
        self._reach.close()
        self._server.should_exit = True
        await asyncio.wait({self._task})
        if not self._task.cancelled():
            self._task.exception()
        self._sock.close()

    async def __aenter__(self) -> MCPEndpoint:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()
