"""The one live session to an MCP server: open it, watch it, re-scan its tools, close it.

Each session runs in a task of its own because the SDK's transports are anyio task groups that
must be entered and left by the same task; callers on other tasks only send requests through it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any, Protocol, TypeVar

import anyio
from mcp import Client
from mcp.client.session import IncomingMessage
from mcp.shared.exceptions import MCPError
from mcp.shared.subscriptions import PromptsListChanged, ResourcesListChanged, ResourceUpdated, ServerEvent
from mcp.types import (
    CONNECTION_CLOSED,
    ElicitCompleteNotification,
    ListToolsResult,
    PromptListChangedNotification,
    PromptsCapability,
    ResourceListChangedNotification,
    ResourcesCapability,
    ResourceUpdatedNotification,
    ServerCapabilities,
    Tool,
    ToolListChangedNotification,
    ToolsCapability,
)
from mcp.types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from reach_adapters.errors import ReachError
from reach_adapters.mcp import endings
from reach_adapters.mcp.calls import reads_task, session_gone
from reach_adapters.mcp.errors import (
    MCPConnectionError,
    MCPProtocolError,
    MCPSessionExpiredError,
    MCPTimeoutError,
)
from reach_adapters.mcp.spec import HttpServer, ServerSpec
from reach_adapters.mcp.streams import ACK_SHARE, ack_timeout, hold
from reach_adapters.mcp.tools import Declared, checked_by_router, declare, list_all_tools
from reach_adapters.mcp.transport import open_client
from reach_adapters.mcp.upstream import Relays
from reach_adapters.mcp.watching import Watched

__all__ = ["Connection", "ConnectionEvents"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


class ConnectionEvents(Protocol):
    """What the owner of a connection hears about."""

    def tools_listed(self, declared: Declared) -> None: ...

    def connection_lost(self, reason: str) -> None: ...

    def upstream_event(self, event: ServerEvent) -> None:
        """The server's resources or prompts changed, or a watched resource was updated."""
        ...


@dataclass(eq=False)
class _Link:
    """One session attempt: ready once the tools are listed, ended once it is lost or closed."""

    ready: asyncio.Future[Declared]
    ended: asyncio.Event = field(default_factory=asyncio.Event)

    def end(self) -> bool:
        if self.ended.is_set():
            return False
        self.ended.set()
        return True


class Connection:
    """One server's session; its owner opens it again after each loss."""

    def __init__(self, spec: ServerSpec, events: ConnectionEvents, relays: Relays) -> None:
        self.spec = spec
        self.relays = relays
        self.client: Client | None = None
        # Whether the server of `client` reads the task carried in `_meta` (`reads_task`), asked
        # once a session rather than on every call.
        self.reads_task = False
        # What the server's last session said of itself (`InitializeResult`, `DiscoverResult`).
        self.instructions: str | None = None
        self.capabilities: ServerCapabilities | None = None
        self.loop: asyncio.AbstractEventLoop | None = None
        self.closing = False
        self._events = events
        self._current: tuple[_Link, asyncio.Task[None]] | None = None
        self._rescan = asyncio.Event()
        # The resources the router's clients want updates of, subscribed on every session.
        self.watched = Watched(spec.agent_id, ack_timeout(spec))
        # The server's tools as last listed, for the health probe's listing to be compared with.
        self._listed: list[Tool] = []

    async def open(self) -> Declared:
        """Start a session and list its tools within ``connect_timeout_s``; raise a `ReachError` if not."""
        timeout_s = self.spec.options.connect_timeout_s
        loop = asyncio.get_running_loop()
        self.loop = loop
        link = _Link(loop.create_future())
        task = loop.create_task(self._run(link), name=f"{self.spec.agent_id} session")
        opened = False
        try:
            waiting: set[asyncio.Future[Any]] = {task, link.ready}
            await asyncio.wait(waiting, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
            if link.ready.done():
                opened = True
                self._current = (link, task)
                return link.ready.result()
            if task.done():
                raise self._failure(task)
            msg = (
                f"MCP server {self.spec.name!r} ({self.spec.describe()}) did not finish "
                f"initialize and tools/list within {timeout_s} s; check that it "
                "speaks MCP there, or raise connect_timeout_s"
            )
            raise MCPTimeoutError(msg)
        finally:
            if not opened:
                link.end()
                task.cancel()
                await endings.settle(task)

    async def request(self, send: Callable[[Client], Awaitable[T]], offline: Callable[[], ReachError]) -> T:
        """Await ``send(client)`` on the session within ``timeout_ms`` (see `MCPServerAgent.request`);
        `offline` says why there is no session."""
        client = self.client
        if client is None:
            raise offline()
        agent_id, timeout_ms = self.spec.agent_id, self.spec.options.timeout_ms
        scope = asyncio.timeout(timeout_ms / 1000)
        try:
            async with scope:
                return await send(client)
        except TimeoutError:
            if not scope.expired():
                raise
            msg = f"MCP server {agent_id} did not answer within its timeout_ms ({timeout_ms} ms)"
            raise MCPTimeoutError(msg) from None
        except MCPError as exc:
            # As for a call: a session the server forgot is replaced, and a lost one reported.
            if session_gone(client, exc):
                self.drop(client, endings.FORGOTTEN)
                msg = f"MCP server {agent_id} no longer knows this session ({exc.message}); opening a new one"
                raise MCPSessionExpiredError(msg) from None
            if exc.code == CONNECTION_CLOSED:
                msg = f"MCP server {agent_id} lost its connection during the request ({exc.message})"
                raise MCPConnectionError(msg) from None
            raise
        except ValidationError as exc:
            msg = f"MCP server {agent_id} sent a malformed result: {exc.errors()[0]['msg']}"
            raise MCPProtocolError(msg) from None

    async def wait_lost(self) -> None:
        """Return once the current session has ended, having reported why."""
        assert self._current is not None, "wait_lost() before a successful open()"
        link, task = self._current
        await asyncio.wait({task})
        self._lose(link, endings.ended(task))

    async def probe(self) -> bool:
        """One round trip on the session: `tools/list`, so a dead HTTP server is noticed even when
        no calls are made (for a server without the tools capability, the cheapest request it
        answers). A handshake-era HTTP session that fails it is ended, to be opened again: the
        server keeps such sessions and forgets them when it restarts, and no stream ends to say so
        (2026-07-28 sessions and stdio have a stream that does)."""
        client = self.client
        if client is None:
            return False
        try:
            if client.server_capabilities.tools is None:
                # No tools to list ("method not found"): a round trip it does answer instead.
                await _round_trip(client)
                return True
            listed = await client.list_tools()
        except MCPError as exc:
            if self._kept_by_server(client):
                self.drop(client, f"the health probe failed ({endings.cause(exc)}); opening a new session")
            return False
        except ValidationError:
            return False
        checked_by_router(client, listed.tools)
        if _changed(listed, self._listed):
            # A server may change its tools without a tools/list_changed (the Python SDK's
            # `remove_tool` sends none): declare what it lists now, rather than wait for a call
            # to find a tool gone.
            self.rescan()
        return True

    def rescan(self) -> None:
        """List the server's tools again and re-declare them, as on ``tools/list_changed``: its
        listing is known to have changed (a call found a listed tool gone)."""
        self._rescan.set()

    def _kept_by_server(self, client: Client) -> bool:
        """Whether the server holds `client`'s session for it: HTTP on a handshake-era version."""
        return (
            isinstance(self.spec.target, HttpServer)
            and client.protocol_version not in MODERN_PROTOCOL_VERSIONS
        )

    def drop(self, client: Client, reason: str) -> None:
        """End `client`'s session as lost, if it is still the current one, for the owner to open
        another: the server no longer serves it (an HTTP server that restarted forgets its
        sessions), though no stream of it ended to say so."""
        if self._current is not None and self.client is client:
            self._lose(self._current[0], reason)

    async def close(self) -> None:
        self.closing = True
        if self._current is not None:
            link, task = self._current
            link.end()
            await endings.settle(task)

    async def _run(self, link: _Link) -> None:
        client = open_client(
            self.spec.target,
            self.spec.options,
            on_eof=partial(self._lose, link, endings.EOF),
            on_message=self._on_message,
            relays=self.relays,
        )
        async with client, anyio.create_task_group() as tasks:
            if _announces_changes(client):
                # Listen before listing, so no change can fall between the list and the stream.
                opened = anyio.Event()
                tasks.start_soon(self._listen, client, link, opened)
                wait_s = self.spec.options.connect_timeout_s * ACK_SHARE
                with anyio.move_on_after(wait_s):
                    await opened.wait()
                if not opened.is_set():
                    # The stream is optional: its tools are listed all the same.
                    logger.warning(
                        "MCP server %s did not acknowledge its change stream (subscriptions/listen) "
                        "within %.1f s; its tools are listed without waiting for it",
                        self.spec.agent_id,
                        wait_s,
                    )
            self._listed = await list_all_tools(client, self.spec.name)
            declared = declare(self._listed, self.spec)
            if not declared.capabilities:
                # Connected all the same: a tools/list_changed may bring tools later.
                logger.info(
                    "MCP server %s lists no usable tools for now%s",
                    self.spec.agent_id,
                    f" (skipped: {declared.skipped})" if declared.skipped else "",
                )
            tasks.start_soon(self._rescans, client)
            tasks.start_soon(self.watched.hold, client)
            self.client = client
            self.reads_task = reads_task(client)
            self.instructions = client.instructions
            self.capabilities = client.server_capabilities
            link.ready.set_result(declared)
            try:
                await link.ended.wait()
            finally:
                if self.client is client:
                    self.client = None
            tasks.cancel_scope.cancel()

    def _lose(self, link: _Link, reason: str) -> None:
        # Only the adopted session speaks for the agent; a failed attempt is reported by open().
        current = self._current is not None and self._current[0] is link
        if link.end() and current and not self.closing:
            self._events.connection_lost(reason)

    async def _on_message(self, message: IncomingMessage) -> None:
        if isinstance(message, ToolListChangedNotification):
            self._rescan.set()
        elif isinstance(message, ResourceListChangedNotification):
            self._events.upstream_event(ResourcesListChanged())
        elif isinstance(message, PromptListChangedNotification):
            self._events.upstream_event(PromptsListChanged())
        elif isinstance(message, ResourceUpdatedNotification):
            self._events.upstream_event(ResourceUpdated(uri=message.params.uri))
        elif isinstance(message, ElicitCompleteNotification):
            await self.relays.completions.complete(message.params)
        elif isinstance(message, Exception):
            logger.warning("MCP server %s: transport error: %r", self.spec.agent_id, message)

    async def _rescans(self, client: Client) -> None:
        while True:
            await self._rescan.wait()
            self._rescan.clear()
            try:
                tools = await list_all_tools(client, self.spec.name)
            except (MCPError, MCPProtocolError, ValidationError) as exc:
                logger.warning("MCP server %s: re-scan of its tools failed: %s", self.spec.agent_id, exc)
                continue
            self._listed = tools
            self._events.tools_listed(declare(tools, self.spec))

    async def _listen(self, client: Client, link: _Link, opened: anyio.Event) -> None:
        """Hold a change stream open: 2026-07-28 servers send list changes only on one. A request
        for it that an HTTP server leaves unacknowledged (framing the ack wrongly) is withdrawn
        before the read timeout, which would end the whole session, and asked again later."""
        capabilities = client.server_capabilities
        listen = partial(
            client.listen,
            tools_list_changed=_announced(capabilities.tools),
            prompts_list_changed=_announced(capabilities.prompts),
            resources_list_changed=_announced(capabilities.resources),
        )

        def reopened() -> None:
            # Changes while no stream was open went unheard: the lists may differ now.
            self._rescan.set()
            if _announced(capabilities.resources):
                self._events.upstream_event(ResourcesListChanged())
            if _announced(capabilities.prompts):
                self._events.upstream_event(PromptsListChanged())

        try:
            # Each event also reaches _on_message, which schedules the re-scan.
            await hold(
                listen,
                ack_timeout(self.spec),
                self.spec.agent_id,
                "its change stream",
                opened=opened.set,
                reopened=reopened,
            )
        except MCPError as exc:
            if exc.code == CONNECTION_CLOSED:
                self._lose(link, endings.EOF)
                return
            logger.warning(
                "MCP server %s refused a change stream (%s); its list changes go unnoticed",
                self.spec.agent_id,
                exc.message,
            )
        finally:
            # However the stream fared, the session no longer waits for it to open.
            opened.set()

    def _failure(self, task: asyncio.Task[None]) -> ReachError:
        exc = None if task.cancelled() else task.exception()
        if exc is not None and isinstance(leaf := endings.leaf(exc), ReachError):
            return leaf
        cause = "the attempt was cancelled" if exc is None else endings.cause(exc)
        msg = f"MCP server {self.spec.name!r} ({self.spec.describe()}): cannot connect: {cause}"
        return MCPConnectionError(msg)


async def _round_trip(client: Client) -> None:
    """The cheapest request every server answers: 2026-07-28 removed ping for server/discover."""
    if client.protocol_version in MODERN_PROTOCOL_VERSIONS:
        await client.session.send_discover(client.protocol_version)
    else:
        await client.session.send_ping()


def _changed(page: ListToolsResult, listed: list[Tool]) -> bool:
    """Whether `page`, the first page of a listing, differs from the tools last `listed`: in its
    tools, or, for a listing that ends there, in how many there are."""
    tools = page.tools
    return tools != listed[: len(tools)] or (page.next_cursor is None and len(tools) != len(listed))


def _announces_changes(client: Client) -> bool:
    capabilities = client.server_capabilities
    modern = client.protocol_version in MODERN_PROTOCOL_VERSIONS
    return modern and any(map(_announced, (capabilities.tools, capabilities.prompts, capabilities.resources)))


def _announced(capability: ToolsCapability | PromptsCapability | ResourcesCapability | None) -> bool:
    """Whether the server says it announces changes to this list."""
    return capability is not None and bool(capability.list_changed)
