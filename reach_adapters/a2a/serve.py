"""The router served as an A2A agent: the agent card and the JSON-RPC endpoint as Starlette routes,
to mount beside the gateway's MCP endpoint and API (`reach serve` does).

Requests are authenticated in front of these routes (the gateway's `Authentication`); what they
know of the caller is `principal_of(scope)`. Every reach runs as that principal, so its
permissions, quotas and visibility hold; tasks and push configs belong to it. With a Redis client
(a cluster node's), tasks and push configs live there, so every node answers for every task.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

import httpx
from a2a.auth.user import User
from a2a.server.context import ServerCallContext
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import DefaultServerCallContextBuilder, create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import (
    BasePushNotificationSender,
    InMemoryPushNotificationConfigStore,
    InMemoryTaskStore,
    PushNotificationConfigStore,
    TaskStore,
)
from a2a.types.a2a_pb2 import AgentCard
from starlette.requests import Request
from starlette.routing import Route

from reach_adapters.a2a.executor import RouterExecutor
from reach_adapters.a2a.router_card import RouterCard
from reach_adapters.a2a.taskstore import Owners
from reach_adapters.router import Router

if TYPE_CHECKING:
    import redis.asyncio as redis

__all__ = ["A2A_PATH", "AGENT_CARD_PATH", "A2AService", "call_principal"]

logger = logging.getLogger(__name__)

A2A_PATH = "/a2a"
AGENT_CARD_PATH = "/.well-known/agent-card.json"
_PUSH_TIMEOUT_S = 10.0
_PUSH_SCHEMES = ("http", "https")

ScopePrincipal = Callable[[Mapping[str, Any]], str | None]


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
    them for ``policy.task_result_ttl_s``; without them tasks live in this process.
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
    ) -> None:
        self.router = router
        self.url = base_url.rstrip("/") + A2A_PATH
        self.card = RouterCard(router, self.url, name=name, secured=secured)
        owners = Owners(owner=lambda context: call_principal(context) or "", scope=self._scope)
        tasks: TaskStore
        pushes: PushNotificationConfigStore
        if client is None:
            tasks = InMemoryTaskStore(owner_resolver=owners.owner)
            pushes = InMemoryPushNotificationConfigStore(owner_resolver=owners.owner)
        else:
            # Imported here: redis-py comes with the cluster extra, which only a node has.
            from reach_adapters.a2a.taskstore import RedisA2ATaskStore, RedisPushConfigStore

            ttl_s = router.policy.task_result_ttl_s
            tasks = RedisA2ATaskStore(client, prefix, owners, ttl_s=ttl_s)
            pushes = RedisPushConfigStore(client, prefix, owners, ttl_s=ttl_s)
        self._push_client = httpx.AsyncClient(timeout=_PUSH_TIMEOUT_S)
        self.handler = DefaultRequestHandler(
            agent_executor=RouterExecutor(router, call_principal),
            task_store=tasks,
            # The handler checks its card for what it supports: everything, whatever the card shows.
            agent_card=self._handled(),
            push_config_store=pushes,
            push_sender=BasePushNotificationSender(
                self._push_client, pushes, push_url_validator=_push_url_allowed
            ),
            push_url_validator=_push_url_allowed,
            extended_agent_card=self.card.public(),
            extended_card_modifier=self._extended,
        )
        self._calls = _Calls(principal_of)

    def routes(self) -> list[Route]:
        """The agent card at ``/.well-known/agent-card.json`` and JSON-RPC (1.0 and 0.3) at ``/a2a``."""
        return [
            *create_agent_card_routes(
                self.card.public(), card_modifier=self._public, card_url=AGENT_CARD_PATH
            ),
            *create_jsonrpc_routes(
                self.handler, rpc_url=A2A_PATH, context_builder=self._calls, enable_v0_3_compat=True
            ),
        ]

    async def aclose(self) -> None:
        """Stop running tasks, stop following the catalog, close the push client."""
        self.card.close()
        await self.handler.aclose()
        await self._push_client.aclose()

    def _scope(self, context: ServerCallContext) -> str | None:
        """Whose tasks a caller sees: its own, or all (no security, or a principal that sees all)."""
        principal = call_principal(context)
        guard = self.router.guard
        if principal is None or guard is None or guard.sees_all(principal):
            return None
        return principal

    async def _public(self, card: AgentCard) -> AgentCard:
        return self.card.public()

    async def _extended(self, card: AgentCard, context: ServerCallContext) -> AgentCard:
        return self.card.extended(call_principal(context))

    def _handled(self) -> AgentCard:
        card = AgentCard()
        card.CopyFrom(self.card.extended(None))
        card.capabilities.extended_agent_card = True
        return card


async def _push_url_allowed(url: str) -> bool:
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    return parts.scheme in _PUSH_SCHEMES and bool(parts.hostname)
