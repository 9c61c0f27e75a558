"""Resource subscriptions of the router's MCP clients, held at the upstream servers that have the
resources: a 2025-11-25 client's ``resources/subscribe``, a 2026-07-28 client's
``subscriptions/listen`` stream naming resources. An upstream's ``notifications/resources/updated``
reaches every client that watches that URI."""

from __future__ import annotations

import logging
from typing import Any

from mcp.server.connection import Connection
from mcp.server.context import ServerRequestContext
from mcp.server.session import ServerSession
from mcp.server.subscriptions import ListenHandler, ResourceUpdated
from mcp.shared.exceptions import MCPError
from mcp.types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    EmptyResult,
    SubscribeRequestParams,
    SubscriptionsListenRequestParams,
    SubscriptionsListenResult,
    UnsubscribeRequestParams,
)

from reach_adapters.errors import ReachError
from reach_adapters.mcp.agent import MCPServerAgent
from reach_adapters.mcp.contents import Contents
from reach_adapters.mcp.notices import Notices
from reach_adapters.mcp.peers import connection_of

__all__ = ["Watches"]

logger = logging.getLogger(__name__)

# Per URI watched for a client: the servers holding it.
_Held = dict[str, list[MCPServerAgent]]


class Watches:
    """The request handlers of ``resources/subscribe``, ``resources/unsubscribe`` and
    ``subscriptions/listen`` (`listen` serves the stream), and the delivery of updates."""

    def __init__(self, contents: Contents, notices: Notices, listen: ListenHandler) -> None:
        self._contents = contents
        self._notices = notices
        self._listen = listen
        # Each 2025 connection's subscriptions, until it closes.
        self._legacy: dict[Connection, tuple[ServerSession, _Held]] = {}

    async def subscribe(
        self, ctx: ServerRequestContext[Any, Any], params: SubscribeRequestParams
    ) -> EmptyResult:
        connection = connection_of(ctx.session)
        if connection is None or not connection.has_standalone_channel:
            msg = "resources/subscribe needs a lasting connection (a session) to send updates on"
            raise MCPError(INVALID_REQUEST, msg)
        uri = params.uri
        self._notices.seen(ctx)
        entry = self._legacy.get(connection)
        if entry is not None and uri in entry[1]:
            return EmptyResult()
        owners = await self._owners(ctx, uri)
        if not owners:
            msg = f"Unknown resource: {uri!r}; no MCP server you may reach here has it and sends its updates"
            raise MCPError(INVALID_PARAMS, msg)
        if entry is None:
            entry = self._legacy[connection] = (ctx.session, {})
            connection.exit_stack.callback(self._forget, connection)
        entry[1][uri] = owners
        await _watch(owners, uri)
        return EmptyResult()

    async def unsubscribe(
        self, ctx: ServerRequestContext[Any, Any], params: UnsubscribeRequestParams
    ) -> EmptyResult:
        connection = connection_of(ctx.session)
        entry = None if connection is None else self._legacy.get(connection)
        owners = None if entry is None else entry[1].pop(params.uri, None)
        if owners:
            await _watch(owners, params.uri, stop=True)
        return EmptyResult()

    async def listen(
        self, ctx: ServerRequestContext[Any, Any], params: SubscriptionsListenRequestParams
    ) -> SubscriptionsListenResult:
        """Serve the stream; the resources it names are watched while it is open (one no server
        the client may reach has is accepted, and never updated, as the SDK's servers do)."""
        self._notices.seen(ctx)
        held: _Held = {}
        try:
            for uri in dict.fromkeys(params.notifications.resource_subscriptions or ()):
                owners = await self._owners(ctx, uri)
                if owners:
                    held[uri] = owners
                    await _watch(owners, uri)
            return await self._listen(ctx, params)
        finally:
            if held:
                # The stream may end by cancellation, which an await here would not outlive.
                self._notices.soon(_release(held))

    def updated(self, uri: str) -> None:
        """An upstream updated `uri`: tell its watchers (from any thread)."""
        self._notices.soon(self._deliver(uri))

    async def _deliver(self, uri: str) -> None:
        await self._notices.bus.publish(ResourceUpdated(uri=uri))
        for connection, (session, held) in list(self._legacy.items()):
            if uri in held:
                try:
                    await session.send_resource_updated(uri)
                except Exception as exc:  # noqa: BLE001 - one broken peer must not keep others uninformed
                    logger.debug("could not tell a client %s was updated, forgetting it: %r", uri, exc)
                    self._forget(connection)

    async def _owners(self, ctx: ServerRequestContext[Any, Any], uri: str) -> list[MCPServerAgent]:
        try:
            owners = await self._contents.owners(ctx, uri)
        except MCPError:
            return []
        return [agent for agent in owners if _sends_updates(agent)]

    def _forget(self, connection: Connection) -> None:
        entry = self._legacy.pop(connection, None)
        if entry is not None and entry[1]:
            self._notices.soon(_release(entry[1]))


def _sends_updates(agent: MCPServerAgent) -> bool:
    capabilities = agent.server_capabilities
    resources = None if capabilities is None else capabilities.resources
    return resources is not None and bool(resources.subscribe)


async def _watch(owners: list[MCPServerAgent], uri: str, *, stop: bool = False) -> None:
    for agent in owners:
        try:
            await agent.watch(uri, stop=stop)
        except ReachError as exc:
            logger.warning("MCP server %s: cannot watch %s: %s", agent.agent_id, uri, exc)


async def _release(held: _Held) -> None:
    for uri, owners in held.items():
        await _watch(owners, uri, stop=True)
