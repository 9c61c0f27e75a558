"""Serve a gateway over HTTP: MCP (streamable HTTP) and the API in one app on one host:port."""

from __future__ import annotations

import ipaddress
import os
import socket
from dataclasses import dataclass
from typing import Any

from starlette.types import ASGIApp

from reach_adapters.gateway.api import API_PREFIX, GatewayAPI
from reach_adapters.gateway.auth import Authentication, metadata_routes
from reach_adapters.gateway.errors import GatewayError
from reach_adapters.gateway.gateway import Gateway
from reach_adapters.gateway.limits import ServerLimits
from reach_adapters.mcp import MCPEndpoint, start_mcp_server

__all__ = ["MCP_PATH", "GatewayEndpoint", "beyond_loopback", "listen", "serve_http", "unprotected_exposure"]

MCP_PATH = "/mcp"


def beyond_loopback(sock: socket.socket) -> str | None:
    """``host:port`` of `sock` when that is not a loopback address; None when it is."""
    host, port = sock.getsockname()[:2]
    return None if ipaddress.ip_address(host.split("%", 1)[0]).is_loopback else f"{host}:{port}"


def unprotected_exposure(sock: socket.socket, *, secured: bool) -> str | None:
    """Why serving on `sock` would answer anyone: a non-loopback address and no ``security.yaml``
    (`secured` False). None when it would not."""
    address = None if secured else beyond_loopback(sock)
    if address is None:
        return None
    return (
        f"{address} is beyond loopback and the config directory has no security.yaml, so anyone "
        "reaching the port could call every agent; add a security.yaml (docs/security.md), or pass "
        "--insecure if something in front of the server authenticates"
    )


def listen(host: str, port: int) -> socket.socket:
    """Bind the listening socket first, so a port in use is reported before anything starts."""
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port <= 65535:
        msg = f"port must be a whole number from 0 (any free port) to 65535, got {port!r}"
        raise GatewayError(msg)
    try:
        return socket.create_server((host, port))
    except OSError as exc:
        if exc.errno is not None and exc.errno < 0:
            # getaddrinfo's codes are negative: the host is unknown, not the port taken.
            msg = (
                f"cannot listen on {host}:{port}: unknown host {host!r}; give an IP address such as 127.0.0.1"
            )
            raise GatewayError(msg) from None
        # create_server's own text repeats the address; the errno's is the short reason.
        reason = os.strerror(exc.errno) if exc.errno else str(exc)
        msg = f"cannot listen on {host}:{port}: {reason}; pick another port, or stop what is using it"
        raise GatewayError(msg) from None


@dataclass(frozen=True, slots=True)
class GatewayEndpoint:
    """A gateway being served: where, and how to stop it."""

    endpoint: MCPEndpoint
    url: str

    @property
    def mcp_url(self) -> str:
        return self.endpoint.url

    @property
    def api_url(self) -> str:
        return self.url + API_PREFIX

    async def wait_closed(self) -> None:
        await self.endpoint.wait_closed()

    async def aclose(self) -> None:
        """Stop serving: open MCP sessions end, the socket closes. The gateway stays open."""
        await self.endpoint.aclose()


async def serve_http(
    gateway: Gateway,
    sock: socket.socket,
    *,
    name: str = "agent-reach",
    shutdown_timeout_s: float = 3.0,
    limits: ServerLimits | None = None,
    insecure: bool = False,
) -> GatewayEndpoint:
    """Start serving on the bound `sock` in the background: MCP at ``/mcp``, the API at ``/api``,
    Prometheus metrics at ``/metrics``; `limits` bound every request (the defaults if None).

    Requests are authenticated as the gateway's ``security.yaml`` says. Without one, a `sock`
    beyond loopback is refused (`GatewayError`) unless `insecure`; with one, it may then not be
    removed while serving (`Gateway.exposed_at`).
    """
    limits = ServerLimits() if limits is None else limits
    if not insecure:
        problem = unprotected_exposure(sock, secured=gateway.security is not None)
        if problem is not None:
            raise GatewayError(problem)
        gateway.exposed_at = beyond_loopback(sock)
    loopback_only = sock.getsockname()[0] in ("127.0.0.1", "::1")
    api = GatewayAPI(gateway, loopback_only=loopback_only, limits=limits)
    endpoint = await start_mcp_server(
        gateway.router,
        path=MCP_PATH,
        name=name,
        sock=sock,
        routes=[*api.routes(), *metadata_routes(gateway, MCP_PATH)],
        shutdown_timeout_s=shutdown_timeout_s,
        limits=_Authenticated(limits, gateway),
    )
    return GatewayEndpoint(endpoint, endpoint.url.removesuffix(MCP_PATH))


@dataclass(frozen=True, slots=True)
class _Authenticated:
    """`limits` with `Authentication` outside them: a refused request's body is never read."""

    limits: ServerLimits
    gateway: Gateway

    @property
    def max_body_bytes(self) -> int:
        return self.limits.max_body_bytes

    def wrap(self, app: ASGIApp) -> ASGIApp:
        return Authentication(self.limits.wrap(app), self.gateway, mcp_path=MCP_PATH)

    def uvicorn_options(self) -> dict[str, Any]:
        return self.limits.uvicorn_options()
