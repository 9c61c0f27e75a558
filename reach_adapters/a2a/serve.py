"""The router served as an A2A agent: the agent card and the JSON-RPC endpoint as Starlette routes,
to mount beside the gateway's MCP endpoint and API (`reach serve` does).

Requests are authenticated in front of these routes (the gateway's `Authentication`); what they
know of the caller is `principal_of(scope)`. Every reach runs as that principal, so its
permissions, quotas and visibility hold; tasks and push configs belong to it. With a Redis client
(a cluster node's), tasks and push configs live there, so every node answers for every task;
without, in this process, for ``task_result_ttl_s`` and `MAX_TASKS` at most.

The routes take the gateway's `guard` (its API's: no cross-site Origin, no rebound Host), since a
web page could otherwise POST a ``message/send`` as ``text/plain`` and run agents.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine, Mapping
from typing import TYPE_CHECKING, Any

import httpx
from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.server.routes import DefaultServerCallContextBuilder, create_jsonrpc_routes
from a2a.server.tasks import (
    BasePushNotificationSender,
    InMemoryPushNotificationConfigStore,
    PushNotificationConfigStore,
)
from a2a.types.a2a_pb2 import AgentCard
from a2a.utils.constants import AGENT_CARD_WELL_KNOWN_PATH
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from reach_adapters.a2a.executor import RouterExecutor
from reach_adapters.a2a.handler import ReachRequestHandler
from reach_adapters.a2a.memory_store import MemoryA2ATaskStore
from reach_adapters.a2a.push import BackgroundPushSender, push_url_validator
from reach_adapters.a2a.router_card import RouterCard
from reach_adapters.a2a.taskstore import Owners, RedisA2ATaskStore, RedisPushConfigStore
from reach_adapters.router import Router

if TYPE_CHECKING:
    # Only the client's type: a cluster node hands its own (redis-py comes with the cluster extra).
    import redis.asyncio as redis

__all__ = ["A2A_PATH", "A2AService", "call_principal"]

logger = logging.getLogger(__name__)

A2A_PATH = "/a2a"
_PUSH_TIMEOUT_S = 10.0
# Pushes sent at once when the gateway names no bound of its own.
_MAX_PUSHES = 64
# Where the call's state keeps the base URL its request was sent to.
_BASE_URL = "agent-reach/base_url"

ScopePrincipal = Callable[[Mapping[str, Any]], str | None]
Endpoint = Callable[[Request], Coroutine[Any, Any, Response]]


class _Caller(User):
    """The principal a request was authenticated as; None (anonymous) without security."""

    def __init__(self, principal: str | None) -> None:
        self.principal = principal

    @property
    def is_authenticated(self) -> bool:
        return self.principal is not None

    @property
    def user_name(self) -> str:
        return self.principal or ""


class _Calls(DefaultServerCallContextBuilder):
    def __init__(self, principal_of: ScopePrincipal) -> None:
        self._principal_of = principal_of

    def build(self, request: Request) -> ServerCallContext:
        context = super().build(request)
        context.state[_BASE_URL] = str(request.base_url)
        return context

    def build_user(self, request: Request) -> User:
        return _Caller(self._principal_of(request.scope))


def call_principal(context: ServerCallContext) -> str | None:
    """The principal an A2A call is made for, as the gateway authenticated it."""
    user = context.user
    return user.principal if isinstance(user, _Caller) else None


class A2AService:
    """`router` as an A2A agent whose JSON-RPC endpoint is ``{base_url}/a2a``.

    `secured()` says whether the server authenticates requests now (a security.yaml is in force).
    `client` and `prefix`: a cluster's Redis and key prefix, to keep tasks where every node reads
    them for ``policy.task_result_ttl_s``; without them tasks live in this process as long.
    `url_from_request`: the card names the URL each request was sent to (its Host) instead of
    `base_url`, for a server listening on every interface. `private_push`: push receivers on
    loopback and private networks are allowed (else only public addresses). `max_pushes`: pushes
    sent at once.
    """

    def __init__(
        self,
        router: Router,
        base_url: str,
        *,
        name: str = "agent-reach",
        principal_of: ScopePrincipal = lambda scope: None,
        secured: Callable[[], bool] = lambda: False,
        client: redis.Redis | None = None,
        prefix: str = "reach:",
        url_from_request: bool = False,
        private_push: bool = False,
        max_pushes: int = _MAX_PUSHES,
    ) -> None:
        self.router = router
        self.url = base_url.rstrip("/") + A2A_PATH
        self._url_from_request = url_from_request
        self.card = RouterCard(router, self.url, name=name, secured=secured)
        owners = Owners(owner=lambda context: call_principal(context) or "", scope=self._scope)
        ttl_s = router.policy.task_result_ttl_s
        tasks: MemoryA2ATaskStore | RedisA2ATaskStore
        pushes: PushNotificationConfigStore
        if client is None:
            tasks = MemoryA2ATaskStore(owners, ttl_s=ttl_s)
            pushes = InMemoryPushNotificationConfigStore(owner_resolver=owners.owner)
        else:
            tasks = RedisA2ATaskStore(client, prefix, owners, ttl_s=ttl_s)
            pushes = RedisPushConfigStore(client, prefix, owners, ttl_s=ttl_s)
        check = push_url_validator(private=private_push)
        self._push_client = httpx.AsyncClient(timeout=_PUSH_TIMEOUT_S)
        self._pushes = BackgroundPushSender(
            BasePushNotificationSender(self._push_client, pushes, push_url_validator=check),
            max_running=max_pushes,
        )
        self.handler = ReachRequestHandler(
            agent_executor=RouterExecutor(router, call_principal),
            task_store=tasks,
            claims=tasks,
            # The handler checks its card for what it supports: everything, whatever the card shows.
            agent_card=self._handled(),
            push_config_store=pushes,
            push_sender=self._pushes,
            push_url_validator=check,
            extended_card=self._extended,
            # An input-required task nobody answers is released from memory when it expires.
            interrupted_task_timeout=ttl_s,
        )
        self._calls = _Calls(principal_of)

    def routes(self, guard: Callable[[Endpoint], Endpoint] = lambda endpoint: endpoint) -> list[Route]:
        """The agent card at ``/.well-known/agent-card.json`` and JSON-RPC (1.0 and 0.3) at
        ``/a2a``, each behind `guard` (the gateway's check of Origin and Host)."""
        [rpc] = create_jsonrpc_routes(
            self.handler, rpc_url=A2A_PATH, context_builder=self._calls, enable_v0_3_compat=True
        )
        return [
            Route(AGENT_CARD_WELL_KNOWN_PATH, guard(self._public), methods=["GET"]),
            Route(A2A_PATH, guard(rpc.endpoint), methods=["POST"]),
        ]

    async def aclose(self) -> None:
        """Stop running tasks and pushes, stop following the catalog, close the push client."""
        self.card.close()
        await self.handler.aclose()
        await self._pushes.aclose()
        await self._push_client.aclose()

    def _scope(self, context: ServerCallContext) -> str | None:
        """Whose tasks a caller sees: its own, or all (`Router.owner_scope`)."""
        return self.router.owner_scope(call_principal(context))

    def _url(self, base_url: object) -> str:
        if self._url_from_request and isinstance(base_url, str):
            return base_url.rstrip("/") + A2A_PATH
        return self.url

    async def _public(self, request: Request) -> Response:
        body, etag = self.card.public(self._url(str(request.base_url))).http()
        headers = {"ETag": etag}
        if _matches(request.headers.get("if-none-match"), etag):
            return Response(status_code=304, headers=headers)
        return Response(body, media_type="application/json", headers=headers)

    def _extended(self, context: ServerCallContext) -> AgentCard:
        return self.card.extended(call_principal(context), self._url(context.state.get(_BASE_URL)))

    def _handled(self) -> AgentCard:
        card = AgentCard()
        card.CopyFrom(self.card.extended(None))
        card.capabilities.extended_agent_card = True
        return card


def _matches(header: str | None, etag: str) -> bool:
    """Whether If-None-Match names `etag` (RFC 9110: weak comparison, or ``*``)."""
    if not header:
        return False
    tags = {tag.strip().removeprefix("W/") for tag in header.split(",")}
    return "*" in tags or etag.removeprefix("W/") in tags
