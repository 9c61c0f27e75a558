"""`MCPServerAgent`: every tool of one MCP server as a capability, over one persistent session."""

from __future__ import annotations

import asyncio
import logging
import warnings
from collections.abc import Awaitable, Callable, Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Never, TypeVar

import httpx2
from mcp import Client
from mcp.shared.subscriptions import ServerEvent
from mcp.types import ServerCapabilities

from middleware import ReachMessage, ReachResult
from reach_adapters.errors import InvalidDeclarationError, InvalidMessageError, ReachError
from reach_adapters.mcp import sync_loop
from reach_adapters.mcp.calls import TOOL_GONE, ToolRoute, call_tool, tool_gone
from reach_adapters.mcp.connection import Connection
from reach_adapters.mcp.converter import MCPConverter
from reach_adapters.mcp.endings import FORGOTTEN
from reach_adapters.mcp.errors import (
    MCPOfflineError,
    MCPSessionExpiredError,
)
from reach_adapters.mcp.legacy import MCPServerConfig
from reach_adapters.mcp.notices import upstream_changed
from reach_adapters.mcp.options import MCPOptions
from reach_adapters.mcp.spec import ServerParameters, ServerSpec, moved_keywords, server_spec
from reach_adapters.mcp.tools import Declared
from reach_adapters.mcp.upstream import Relays
from reach_adapters.router import (
    AgentHandle,
    AgentState,
    Capability,
    on_loop,
    reconnect_until,
)

__all__ = ["ConnectReport", "MCPServerAgent"]

logger = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class ConnectReport:
    """What the deprecated `MCPServerAgent.connect_all` managed: the agents and, per id, why not."""

    agents: list[MCPServerAgent]
    failures: dict[str, ReachError]


class MCPServerAgent:
    """One MCP server as one agent (``mcp:<name>:<instance>``); each of its tools is a capability.

    All calls share one session opened at connect. A server that dies is OFFLINE at once and
    reconnected in the background; ``tools/list_changed`` re-declares the capabilities. Calls may
    come from any event loop or thread: they hop onto the loop that owns the session. Build one
    with `connect` (or `connect_sync`).
    """

    def __init__(self, spec: ServerSpec) -> None:
        if not isinstance(spec, ServerSpec):
            msg = f"build an MCPServerAgent with MCPServerAgent.connect(), not from a {type(spec).__name__}"
            raise InvalidDeclarationError(msg)
        self._spec = spec
        self._agent_id = spec.agent_id
        self._relays = Relays(self._agent_id)
        self._connection = Connection(spec, self, self._relays)
        self._converter = MCPConverter(self._agent_id)
        self._capabilities: tuple[Capability, ...] = ()
        self._routes: dict[str, ToolRoute] = {}
        # Capabilities the server's tools no longer serve, which calls routed earlier may name.
        self._withdrawn: set[str] = set()
        self._handles: list[AgentHandle] = []
        self._offline: str | None = "not connected yet"
        self._supervisor: asyncio.Task[None] | None = None

    # -- connecting --------------------------------------------------------------------------

    @classmethod
    async def connect(
        cls,
        name: str,
        server: ServerParameters | None = None,
        *,
        command: str | None = None,
        args: Sequence[str] = (),
        headers: Mapping[str, str] | None = None,
        auth: httpx2.Auth | None = None,
        options: MCPOptions | Mapping[str, Any] | None = None,
        **moved: Never,
    ) -> MCPServerAgent:
        """Connect the server `server` as agent ``mcp:<name>:<instance>``; return once its tools
        are listed.

        `server` is what the SDK's `mcp.Client` takes: `mcp.StdioServerParameters` (a subprocess
        over stdio), a URL string (streamable HTTP; ``headers=`` and ``auth=`` go with every
        request), or an `MCPServer` / low-level `Server` object in this process. ``command=`` and
        ``args=`` are short for ``StdioServerParameters(command=..., args=...)``. A stdio command
        ``python`` is the interpreter running Agent Reach, as in config files.

        Raises `InvalidDeclarationError` for bad arguments or options, `MCPConnectionError`
        naming the server and the cause when it cannot start or be reached, and `MCPTimeoutError`
        when it does not finish initialize within ``options.connect_timeout_s``. A keyword it
        took before (``timeout_ms=``, ``env=``, ...) is an `InvalidDeclarationError` saying where
        it went (`moved`: typed so that type checkers reject them too).
        """
        moved_keywords(name, moved)
        spec = server_spec(
            name, server, command=command, args=args, headers=headers, auth=auth, options=options
        )
        return await cls._open(spec)

    @classmethod
    def connect_sync(
        cls,
        name: str,
        server: ServerParameters | None = None,
        *,
        command: str | None = None,
        args: Sequence[str] = (),
        headers: Mapping[str, str] | None = None,
        auth: httpx2.Auth | None = None,
        options: MCPOptions | Mapping[str, Any] | None = None,
        **moved: Never,
    ) -> MCPServerAgent:
        """`connect` for synchronous programs: the session lives on a background event loop,
        closed (with the session) at interpreter exit if `close_sync` was not called."""
        moved_keywords(name, moved)
        spec = server_spec(
            name, server, command=command, args=args, headers=headers, auth=auth, options=options
        )
        agent = sync_loop.call(
            cls._open(spec), method="MCPServerAgent.connect_sync", instead="await MCPServerAgent.connect(...)"
        )
        sync_loop.close_at_exit(agent)
        return agent

    @classmethod
    async def start(cls, config: MCPServerConfig) -> MCPServerAgent:
        """Deprecated: use ``connect(name, server, options=...)``."""
        _deprecated("MCPServerAgent.start(config)")
        return await cls._open(_legacy_spec(config))

    @classmethod
    async def connect_all(cls, configs: Iterable[MCPServerConfig]) -> ConnectReport:
        """Deprecated: gather `connect` calls with ``return_exceptions=True`` (see docs/mcp.md)."""
        _deprecated("MCPServerAgent.connect_all(configs)")
        specs = [_legacy_spec(config) for config in configs]
        ids = [spec.agent_id for spec in specs]
        twice = sorted({agent_id for agent_id in ids if ids.count(agent_id) > 1})
        if twice:
            msg = f"connect_all(): {', '.join(twice)} is given twice; give replicas distinct instances"
            raise InvalidDeclarationError(msg)
        outcomes = await asyncio.gather(*(cls._open(spec) for spec in specs), return_exceptions=True)
        agents: list[MCPServerAgent] = []
        failures: dict[str, ReachError] = {}
        for spec, outcome in zip(specs, outcomes, strict=True):
            if isinstance(outcome, MCPServerAgent):
                agents.append(outcome)
            elif isinstance(outcome, ReachError):
                logger.warning("MCP server %s not connected: %s", spec.agent_id, outcome)
                failures[spec.agent_id] = outcome
            else:
                raise outcome
        return ConnectReport(agents, failures)

    @classmethod
    async def _open(cls, spec: ServerSpec) -> MCPServerAgent:
        agent = cls(spec)
        agent.tools_listed(await agent._connection.open())
        agent._supervisor = asyncio.get_running_loop().create_task(
            agent._supervise(), name=f"{agent._agent_id} supervisor"
        )
        return agent

    # -- the agent protocol ------------------------------------------------------------------

    @property
    def agent_id(self) -> str:
        return self._agent_id

    @property
    def name(self) -> str:
        """The name the server is connected under (``mcp:<name>:<instance>``): its replicas
        share it."""
        return self._spec.name

    @property
    def options(self) -> MCPOptions:
        return self._spec.options

    @property
    def capabilities(self) -> Sequence[Capability]:
        return self._capabilities

    @property
    def connected(self) -> bool:
        return self._offline is None

    @property
    def server_name(self) -> str | None:
        """The name the server gives itself (its ``serverInfo.name``) while connected."""
        client = self._connection.client
        info = client.server_info if client is not None else None
        return info.name if info is not None else None

    @property
    def instructions(self) -> str | None:
        """The instructions the server gives its clients (``instructions`` of its
        ``InitializeResult`` or ``DiscoverResult``), from its last session: kept while it is
        offline; None when it gives none."""
        return self._connection.instructions

    @property
    def server_capabilities(self) -> ServerCapabilities | None:
        """What the server says it serves (``resources``, ``prompts``, ...), from its last
        session: kept while it is offline; None before it first connects."""
        return self._connection.capabilities

    async def request(self, send: Callable[[Client], Awaitable[T]]) -> T:
        """Await ``send(client)``, a request of its own (a resource read, a prompt), on the
        agent's session and its loop, within the server's ``timeout_ms``: `MCPOfflineError`
        while it has no session (`MCPSessionExpiredError` when the server forgot it),
        `MCPConnectionError` when it is lost meanwhile, `MCPTimeoutError` past the timeout; the
        server's own errors are raised as it gave them."""
        return await self._on_session_loop(self._connection.request(send, self._offline_error))

    def __repr__(self) -> str:
        state = "online" if self._offline is None else f"offline: {self._offline}"
        return f"MCPServerAgent({self._agent_id!r}, {self._spec.describe()!r}, {state})"

    def attach(self, handle: AgentHandle) -> None:
        """Called by the router on registration: state and tool changes are reported through it."""
        self._handles.append(handle)
        if self._offline is not None:
            handle.set_state(AgentState.OFFLINE, self._offline)

    async def invoke(self, message: ReachMessage) -> ReachResult:
        if self._connection.loop is asyncio.get_running_loop():
            # The usual case, called on the session's own loop: no hop, and one frame fewer for
            # every step of the call to pass through.
            return await self._call(message)
        return await self._on_session_loop(self._call(message))

    async def probe(self) -> bool:
        """The router's health probe: one tools/list round trip, so a dead HTTP server is
        noticed even when no calls are made."""
        return await self._on_session_loop(self._connection.probe())

    async def aclose(self) -> None:
        """Close the session; a stdio server's process is stopped. Safe to call twice."""
        await self._on_session_loop(self._close())

    def close_sync(self) -> None:
        sync_loop.call(self.aclose(), method="close_sync", instead="await agent.aclose()")

    async def __aenter__(self) -> MCPServerAgent:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- calls -------------------------------------------------------------------------------

    def _on_session_loop(self, coro: Coroutine[Any, Any, T]) -> Coroutine[Any, Any, T]:
        """`coro` to run on the loop that owns the session: the SDK's streams belong to it.
        Not a coroutine itself: a call's chain of awaits is one frame shorter."""
        return on_loop(self._connection.loop, coro, self._no_session_loop)

    def _no_session_loop(self) -> MCPOfflineError:
        msg = (
            f"MCP server {self._agent_id}: no running event loop holds its session; connect "
            "inside the loop that serves the router, or use connect_sync()"
        )
        return MCPOfflineError(msg)

    def _offline_error(self) -> MCPOfflineError:
        """Why a call finds no session, and whether one is coming."""
        if self._connection.closing:
            msg = f"MCP server {self._agent_id} is offline: the agent is closed; connect a new one"
            return MCPOfflineError(msg)
        # A session that has just ended is reported (with its cause) a moment later.
        reason = self._offline or "its session has just ended"
        back = self._spec.options.reconnect.enabled
        then = "it is being reconnected" if back else "it stays offline: reconnect is disabled"
        msg = f"MCP server {self._agent_id} is offline ({reason}); {then}"
        return MCPOfflineError(msg)

    async def _close(self) -> None:
        self._connection.closing = True
        supervisor = self._supervisor
        if supervisor is not None:
            supervisor.cancel()
            await asyncio.wait({supervisor})
        await self._connection.close()
        self._set_state(AgentState.OFFLINE, "closed")

    async def _call(self, message: ReachMessage) -> ReachResult:
        client = self._connection.client
        if client is None:
            raise self._offline_error()
        capability = message.meta_info.capability
        route = self._routes.get(capability or "")
        if route is None:
            tools = sorted(self._routes)
            if capability in self._withdrawn:
                # Routed before the agent re-declared its tools without it: nothing ran, and
                # another replica may take the call.
                error = (
                    f"MCP server {self._agent_id} no longer has a tool for capability {capability!r} "
                    f"(it has {tools}): its tools changed after the call was routed"
                )
                return tool_gone(message, self._agent_id, error)
            msg = f"agent {self._agent_id} has no tool for capability {capability!r}; it has {tools}"
            raise InvalidMessageError(msg)
        options = self._spec.options
        try:
            result = await call_tool(
                client,
                route,
                message,
                self._converter,
                self._relays,
                carry_task=options.task_meta == "always" or options.hop_tokens or self._connection.reads_task,
                signed=options.hop_tokens,
                relaying=options.relay_requests,
            )
        except MCPSessionExpiredError:
            # No stream of the session ended to say so: the call's answer is the only word.
            self._connection.drop(client, FORGOTTEN)
            raise
        if result.error_type == TOOL_GONE:
            # The server dropped a tool it listed without a tools/list_changed to say so.
            logger.warning("MCP server %s: %s", self._agent_id, result.error)
            self._connection.rescan()
        return result

    # -- lifecycle: `ConnectionEvents` --------------------------------------------------------

    def tools_listed(self, declared: Declared) -> None:
        """Take a (re-)scanned tool list. An empty one leaves the agent connected and online
        with no capabilities: a later ``tools/list_changed`` may bring some."""
        capabilities = tuple(declared.capabilities)
        changed = capabilities != self._capabilities
        self._withdrawn = (self._withdrawn | self._routes.keys()) - declared.routes.keys()
        self._routes = declared.routes
        self._capabilities = capabilities
        if changed:
            for handle in self._handles:
                handle.set_capabilities(capabilities)
        if self._offline is not None:
            # Only what this agent took down it brings back; health probes judge the rest.
            self._set_state(AgentState.ONLINE, "connected")

    def upstream_event(self, event: ServerEvent) -> None:
        """The server's resources or prompts changed, or a watched resource was updated: the
        router's MCP servers tell their clients."""
        upstream_changed(self._agent_id, event)

    async def watch(self, uri: str, *, stop: bool = False) -> None:
        """Hear when the server updates resource `uri` (`upstream_event`), in this session and
        the next ones; `stop`: one watcher of it fewer."""
        await self._on_session_loop(self._connection.watched.change(uri, -1 if stop else 1))

    def connection_lost(self, reason: str) -> None:
        logger.warning("MCP server %s is offline: %s", self._agent_id, reason)
        # Reconnecting, calls may wait for it within their deadline; otherwise it stays down.
        back = self._spec.options.reconnect.enabled and not self._connection.closing
        self._set_state(AgentState.RECONNECTING if back else AgentState.OFFLINE, reason)

    def _set_state(self, state: AgentState, reason: str) -> None:
        self._offline = None if state is AgentState.ONLINE else reason
        for handle in self._handles:
            handle.set_state(state, reason)

    async def _supervise(self) -> None:
        """Wait for the session to end, then reconnect with backoff until it is back or closed."""
        policy = self._spec.options.reconnect
        while True:
            await self._connection.wait_lost()
            if not policy.enabled:
                logger.warning("MCP server %s stays offline: reconnect is disabled", self._agent_id)
                return
            await reconnect_until(self._reconnect, policy)

    async def _reconnect(self) -> bool:
        """One attempt to open the session again: True once it is back."""
        try:
            declared = await self._connection.open()
        except ReachError as exc:
            logger.info("MCP server %s: reconnect failed: %s", self._agent_id, exc)
            return False
        logger.info("MCP server %s reconnected", self._agent_id)
        self.tools_listed(declared)
        return True


def _legacy_spec(config: MCPServerConfig) -> ServerSpec:
    if not isinstance(config, MCPServerConfig):
        msg = f"takes MCPServerConfig items, got {type(config).__name__}; use MCPServerAgent.connect()"
        raise InvalidDeclarationError(msg)
    return config.spec()


def _deprecated(call: str) -> None:
    msg = (
        f"{call} is deprecated; use MCPServerAgent.connect(name, server, options=MCPOptions(...)), "
        "see docs/mcp.md"
    )
    warnings.warn(msg, DeprecationWarning, stacklevel=3)
