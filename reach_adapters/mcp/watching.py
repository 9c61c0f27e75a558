"""The resources of one MCP server that the router's clients want updates of, held subscribed on
each of its sessions: with ``resources/subscribe`` on a 2025-11-25 session, on a
``subscriptions/listen`` stream naming them on a 2026-07-28 one. Its
``notifications/resources/updated`` reach the connection's message handler either way."""

from __future__ import annotations

import asyncio
import logging
from collections import Counter
from functools import partial

import anyio
from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import (
    CONNECTION_CLOSED,
    EmptyResult,
    SubscribeRequest,
    SubscribeRequestParams,
    UnsubscribeRequest,
    UnsubscribeRequestParams,
)
from mcp.types.version import MODERN_PROTOCOL_VERSIONS

from reach_adapters.mcp.streams import hold

__all__ = ["Watched"]

logger = logging.getLogger(__name__)


class Watched:
    """How many of the router's subscribers watch each resource of one server."""

    def __init__(self, agent_id: str, ack_s: float) -> None:
        """`ack_s`: how long a stream's acknowledgement is waited for (`ack_timeout`)."""
        self._agent_id = agent_id
        self._ack_s = ack_s
        self._counts: Counter[str] = Counter()
        self._changed = asyncio.Event()

    async def change(self, uri: str, by: int) -> None:
        """One watcher more (`by` 1) or fewer (-1) of `uri`; async to be run on the session's loop."""
        before = uri in self._counts
        self._counts[uri] += by
        if self._counts[uri] <= 0:
            del self._counts[uri]
        if (uri in self._counts) != before:
            self._changed.set()

    async def hold(self, client: Client) -> None:
        """Keep `client`'s server subscribed to the watched resources while the session lasts."""
        resources = client.server_capabilities.resources
        if resources is None or not resources.subscribe:
            return
        try:
            if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
                await self._listen(client)
            else:
                await self._subscribe(client)
        except Exception as exc:  # noqa: BLE001 - updates are a courtesy: the session lives on without them
            if not (isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED):
                logger.warning("MCP server %s: resource updates stopped: %r", self._agent_id, exc)

    async def _subscribe(self, client: Client) -> None:
        held: set[str] = set()
        while True:
            self._changed.clear()
            wanted = set(self._counts)
            for uri in sorted(wanted - held):
                await self._ask(client, SubscribeRequest(params=SubscribeRequestParams(uri=uri)))
            for uri in sorted(held - wanted):
                await self._ask(client, UnsubscribeRequest(params=UnsubscribeRequestParams(uri=uri)))
            held = wanted
            await self._changed.wait()

    async def _ask(self, client: Client, request: SubscribeRequest | UnsubscribeRequest) -> None:
        # Sent as the session's own methods send it, without their warning that 2026-07-28
        # removed the method: this is a 2025-11-25 session.
        try:
            await client.session.send_request(request, EmptyResult)
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                raise
            logger.warning(
                "MCP server %s refused %s of %s: %s",
                self._agent_id,
                request.method,
                request.params.uri,
                exc.message,
            )

    async def _listen(self, client: Client) -> None:
        while True:
            self._changed.clear()
            wanted = sorted(self._counts)
            if not wanted:
                await self._changed.wait()
                continue
            async with anyio.create_task_group() as tasks:
                tasks.start_soon(self._stream, client, wanted)
                await self._changed.wait()
                tasks.cancel_scope.cancel()

    async def _stream(self, client: Client, uris: list[str]) -> None:
        listen = partial(client.listen, resource_subscriptions=uris)
        try:
            await hold(listen, self._ack_s, self._agent_id, "a stream of resource updates")
        except MCPError as exc:
            if exc.code != CONNECTION_CLOSED:
                logger.warning(
                    "MCP server %s refused a stream of resource updates (%s); they go unnoticed",
                    self._agent_id,
                    exc.message,
                )
