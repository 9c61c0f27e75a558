"""Serve a gateway over HTTP: MCP (streamable HTTP) and the API in one app on one host:port."""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass

from reach_adapters.gateway.api import API_PREFIX, GatewayAPI
from reach_adapters.gateway.errors import GatewayError
from reach_adapters.gateway.gateway import Gateway
from reach_adapters.gateway.limits import ServerLimits
from reach_adapters.mcp import MCPEndpoint, start_mcp_server

__all__ = ["MCP_PATH", "GatewayEndpoint", "listen", "serve_http"]

MCP_PATH = "/mcp"


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
) -> GatewayEndpoint:
    """Start serving on the bound `sock` in the background: MCP at ``/mcp``, the API at ``/api``,
    Prometheus metrics at ``/metrics``; `limits` bound every request (the defaults if None)."""
    limits = ServerLimits() if limits is None else limits
    loopback_only = sock.getsockname()[0] in ("127.0.0.1", "::1")
    endpoint = await start_mcp_server(
        gateway.router,
        path=MCP_PATH,
        name=name,
        sock=sock,
        routes=GatewayAPI(gateway, loopback_only=loopback_only, limits=limits).routes(),
        shutdown_timeout_s=shutdown_timeout_s,
        limits=limits,
    )
    return GatewayEndpoint(endpoint, endpoint.url.removesuffix(MCP_PATH))
