"""Authentication of the gateway's HTTP surfaces, as the ``security.yaml`` in force says.

With no ``security.yaml`` nothing here acts. With one, every request to ``/mcp``, ``/api``, ``/a2a`` and
``/metrics`` carries ``Authorization: Bearer <token>`` unless its surface is listed in ``open``;
the authenticator is read from the gateway on each request, so a reload applies at once. A
refusal is a 401 sent before the request body is read. See docs/security.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from mcp.server.auth.json_response import PydanticJSONResponse
from mcp.server.auth.middleware.auth_context import auth_context_var
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.routes import build_resource_metadata_url
from mcp.shared.auth import ProtectedResourceMetadata
from pydantic import AnyHttpUrl, ValidationError
from starlette.authentication import AuthCredentials
from starlette.datastructures import URL, Headers
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from reach_adapters.gateway.api import API_PREFIX
from reach_adapters.security.credentials import ANONYMOUS
from reach_adapters.security.errors import AuthenticationError
from reach_adapters.security.spec import SecuritySpec, Surface

if TYPE_CHECKING:
    from reach_adapters.gateway.gateway import Gateway

__all__ = [
    "AGENT_CARD_PATH",
    "METADATA_PATH",
    "REALM",
    "Authentication",
    "metadata_routes",
    "resource_url",
    "surface_of",
]

REALM = "agent-reach"
# RFC 9728 §3: the protected-resource metadata, at this path plus the resource's own path.
METADATA_PATH = "/.well-known/oauth-protected-resource"
# A2A's well-known agent card: public by the protocol (it names the security schemes to use);
# a principal's skills are on its extended card, which the JSON-RPC endpoint serves authenticated.
AGENT_CARD_PATH = "/.well-known/agent-card.json"
_BEARER = "bearer "
_SEND = "send 'Authorization: Bearer <token>'"


def surface_of(path: str, mcp_path: str) -> Surface:
    """Which surface a request path belongs to; a path of none is protected like the API."""
    if path == mcp_path or path.startswith(mcp_path + "/"):
        return "mcp"
    if path == "/metrics":
        return "metrics"
    if path == f"{API_PREFIX}/health":
        return "health"
    return "api"


def resource_url(spec: SecuritySpec, scope: Scope, mcp_path: str) -> AnyHttpUrl | None:
    """This server's MCP URL as OAuth names it: ``resource_url``, else the URL the request was
    sent to; None when the request's Host makes no URL."""
    if spec.resource_url is not None:
        return AnyHttpUrl(spec.resource_url)
    try:
        return AnyHttpUrl(str(URL(scope=scope).replace(path=mcp_path, query="", fragment="")))
    except (ValidationError, ValueError):
        return None


# RFC 6455's close code for a refused connection; uvicorn answers it with HTTP 403 before accepting.
_POLICY_VIOLATION = 1008


class Authentication:
    """ASGI middleware: authenticate each request with the gateway's current `Authenticator`.

    A request that passes gets ``scope["user"]`` (the MCP SDK's `AuthenticatedUser`, whose
    ``access_token.client_id`` is the principal), ``scope["auth"]`` and the SDK's
    ``auth_context_var``, so MCP sessions stay bound to the principal that opened them.
    """

    def __init__(self, app: ASGIApp, gateway: Gateway, *, mcp_path: str = "/mcp") -> None:
        self.app = app
        self.gateway = gateway
        self.mcp_path = mcp_path

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        security = self.gateway.security
        if security is None:
            await self.app(scope, receive, send)
            return
        if scope["type"] == "websocket":
            # Nothing is served over WebSocket; none may open past authentication unchecked.
            await send({"type": "websocket.close", "code": _POLICY_VIOLATION})
            return
        public = scope["type"] == "http" and (
            scope["path"].startswith(METADATA_PATH) or scope["path"] == AGENT_CARD_PATH
        )
        if scope["type"] != "http" or public:
            await self.app(scope, receive, send)
            return
        spec = security.spec
        surface = surface_of(scope["path"], self.mcp_path)
        header = Headers(scope=scope).get("authorization")
        if header is None:
            if surface not in spec.open:
                problem = f"this server needs credentials on {surface}: {_SEND}"
                await self._refuse(spec, None, problem, scope, receive, send)
                return
            access = ANONYMOUS
        else:
            token = header[len(_BEARER) :].strip() if header[: len(_BEARER)].lower() == _BEARER else ""
            if not token:
                problem = f"the Authorization header is not a bearer token; {_SEND}"
                await self._refuse(spec, "invalid_request", problem, scope, receive, send)
                return
            verified = await security.authenticator.verify_token(token)
            if verified is None:
                problem = (
                    "the bearer token was not accepted: it is no principal's token, or a JWT that is "
                    f"expired, not yet valid or not issued for this server; {_SEND} with a valid one"
                )
                await self._refuse(spec, "invalid_token", problem, scope, receive, send)
                return
            access = verified
        user = AuthenticatedUser(access)
        scope["user"] = user
        scope["auth"] = AuthCredentials(access.scopes)
        reset = auth_context_var.set(user)
        try:
            await self.app(scope, receive, send)
        finally:
            auth_context_var.reset(reset)

    async def _refuse(
        self, spec: SecuritySpec, error: str | None, problem: str, scope: Scope, receive: Receive, send: Send
    ) -> None:
        params = [f'realm="{REALM}"']
        if error is not None:
            params.append(f'error="{error}"')
        resource = None if spec.jwt is None else resource_url(spec, scope, self.mcp_path)
        if resource is not None:
            # Where an OAuth client finds the authorization server (the MCP authorization spec).
            params.append(f'resource_metadata="{build_resource_metadata_url(resource)}"')
        body = {"error": problem, "error_type": AuthenticationError.__name__}
        headers = {"WWW-Authenticate": "Bearer " + ", ".join(params)}
        await JSONResponse(body, 401, headers=headers)(scope, receive, send)


def metadata_routes(gateway: Gateway, mcp_path: str) -> list[Route]:
    """RFC 9728 protected-resource metadata, while ``security.yaml`` configures ``jwt``: it names
    the issuer as the authorization server. 404 otherwise."""

    async def metadata(request: Request) -> Response:
        security = gateway.security
        jwt = None if security is None else security.spec.jwt
        resource = None if security is None else resource_url(security.spec, request.scope, mcp_path)
        if jwt is None or resource is None:
            return PlainTextResponse("Not Found", 404)
        document = ProtectedResourceMetadata(
            resource=resource,
            authorization_servers=[AnyHttpUrl(jwt.issuer)],
            bearer_methods_supported=["header"],
        )
        return PydanticJSONResponse(document)

    metadata_url = METADATA_PATH + mcp_path
    return [Route(metadata_url, metadata, methods=["GET"]), Route(METADATA_PATH, metadata, methods=["GET"])]
