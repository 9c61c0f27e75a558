"""Serve a gateway over HTTP: MCP (streamable HTTP) and the API in one app on one host:port."""

from __future__ import annotations

import ipaddress
import logging
import os
import socket
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.types import ASGIApp

from reach_adapters.extras import MissingExtraError, require_extra
from reach_adapters.gateway.api import API_PREFIX, GatewayAPI
from reach_adapters.gateway.auth import Authentication, metadata_routes
from reach_adapters.gateway.callbacks import MAX_DELIVERIES
from reach_adapters.gateway.errors import GatewayError
from reach_adapters.gateway.gateway import Gateway
from reach_adapters.gateway.limits import ServerLimits
from reach_adapters.mcp import MCPEndpoint, request_principal, start_mcp_server
from reach_adapters.mcp.serve import socket_url

if TYPE_CHECKING:
    from reach_adapters.a2a.serve import A2AService

__all__ = ["MCP_PATH", "GatewayEndpoint", "beyond_loopback", "listen", "serve_http", "unprotected_exposure"]

MCP_PATH = "/mcp"

logger = logging.getLogger(__name__)


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
    # The router as an A2A agent; None when the a2a extra is missing or it was turned off.
    a2a: A2AService | None = None

    @property
    def mcp_url(self) -> str:
        return self.endpoint.url

    @property
    def api_url(self) -> str:
        return self.url + API_PREFIX

    @property
    def a2a_url(self) -> str | None:
        """The A2A JSON-RPC endpoint (its agent card is at ``/.well-known/agent-card.json``)."""
        return None if self.a2a is None else self.a2a.url

    async def wait_closed(self) -> None:
        await self.endpoint.wait_closed()

    async def aclose(self) -> None:
        """Stop serving: open MCP sessions end, running A2A tasks stop, the socket closes. The
        gateway stays open."""
        await self.endpoint.aclose()
        if self.a2a is not None:
            await self.a2a.aclose()


async def serve_http(
    gateway: Gateway,
    sock: socket.socket,
    *,
    name: str = "agent-reach",
    shutdown_timeout_s: float = 3.0,
    limits: ServerLimits | None = None,
    insecure: bool = False,
    a2a: bool = True,
    public_url: str | None = None,
    a2a_private_push: bool = False,
    consensus_tool: bool = False,
    instructions: str | None = None,
    upstream_instructions: bool = True,
) -> GatewayEndpoint:
    """Start serving on the bound `sock` in the background: MCP at ``/mcp``, the API at ``/api``,
    Prometheus metrics at ``/metrics``, and with `a2a` (when the ``a2a`` extra is installed) the
    router as an A2A agent (``/.well-known/agent-card.json``, ``/a2a``); `limits` bound every
    request (the defaults if None). `public_url`: the base URL clients reach the server at, which
    the agent card names (default: the listening address, or on 0.0.0.0/:: the URL each request
    was sent to). `a2a_private_push`: A2A push receivers on loopback and private networks are
    allowed (by default only public addresses are, so callers cannot aim the server at internal
    services). `consensus_tool`: MCP clients get the router's consensus as a tool too;
    `instructions`: the operator's, which MCP clients get before those of the MCP servers served
    (unless `upstream_instructions` is False).

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
    agent = _a2a_service(gateway, sock, name, public_url, private_push=a2a_private_push) if a2a else None
    # The API's guard (Origin, Host) in front of A2A too: a web page must not run agents through it.
    a2a_routes = [] if agent is None else agent.routes(api.guarded)
    try:
        endpoint = await start_mcp_server(
            gateway.router,
            path=MCP_PATH,
            name=name,
            sock=sock,
            routes=[*api.routes(), *metadata_routes(gateway, MCP_PATH), *a2a_routes],
            shutdown_timeout_s=shutdown_timeout_s,
            limits=_Authenticated(limits, gateway),
            consensus_tool=consensus_tool,
            instructions=instructions,
            upstream_instructions=upstream_instructions,
        )
    except BaseException:
        if agent is not None:
            await agent.aclose()
        raise
    return GatewayEndpoint(endpoint, endpoint.url.removesuffix(MCP_PATH), agent)


def _a2a_service(
    gateway: Gateway, sock: socket.socket, name: str, public_url: str | None, *, private_push: bool
) -> A2AService | None:
    """The router as an A2A agent at the socket's address (or `public_url`); None, saying why,
    without the extra.

    A cluster node keeps its A2A tasks in the cluster's Redis, so every node answers for them.
    """
    try:
        require_extra("a2a", "serving the router as an A2A agent")
    except MissingExtraError as exc:
        logger.info("A2A is off: %s", exc)
        return None
    from reach_adapters.a2a.serve import A2AService

    host = sock.getsockname()[0]
    base_url = public_url or socket_url(sock)
    # Listening on every interface, no one address is the clients': the card names the URL each
    # request came to (its Host, which the guard checks on a loopback server).
    everywhere = public_url is None and ipaddress.ip_address(host.split("%", 1)[0]).is_unspecified
    node = gateway.node
    logger.info(
        "serving the router as an A2A agent at %s/a2a (--no-a2a turns it off)%s",
        "http://<request host>" if everywhere else base_url.rstrip("/"),
        "" if node is None else f"; its tasks are kept in the cluster's Redis under {node.keys.prefix}a2a:",
    )
    return A2AService(
        gateway.router,
        base_url,
        name=name,
        principal_of=request_principal,
        secured=lambda: gateway.security is not None,
        client=None if node is None else node.client,
        prefix="reach:" if node is None else node.keys.prefix,
        url_from_request=everywhere,
        private_push=private_push,
        max_pushes=MAX_DELIVERIES,
    )


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
