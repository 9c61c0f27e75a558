"""`MCPServerAgent`: every tool of one MCP server as a capability, over one persistent session."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Coroutine, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import httpx2
from mcp.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from middleware import ReachMessage, ReachResult
from reach_adapters.errors import InvalidDeclarationError, InvalidMessageError, ReachError
from reach_adapters.mcp.calls import ToolRoute, call_tool
from reach_adapters.mcp.config import (
    HttpTarget,
    InProcessTarget,
    MCPServerConfig,
    ReconnectPolicy,
    ServerTarget,
    StdioTarget,
)
from reach_adapters.mcp.connection import Connection
from reach_adapters.mcp.converter import MCPConverter
from reach_adapters.mcp.errors import MCPOfflineError
from reach_adapters.mcp.relay import Relays
from reach_adapters.mcp.tools import Declared
from reach_adapters.router.capability import Capability
from reach_adapters.router.handle import AgentHandle
from reach_adapters.router.portal import Portal
from reach_adapters.router.state import AgentState

__all__ = ["ConnectReport", "MCPServerAgent"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

# Sessions opened from synchronous code live on this loop, in a daemon thread started on first use.
_SYNC_LOOP = Portal()


@dataclass(frozen=True, slots=True)
class ConnectReport:
    """What `MCPServerAgent.connect_all` managed: the connected agents and, per agent id, why not."""

    agents: list[MCPServerAgent]
    failures: dict[str, ReachError]


class MCPServerAgent:
    """One MCP server as one agent (``mcp:<name>:<instance>``); each of its tools is a capability.

    All calls share one session opened at connect. A server that dies is OFFLINE at once and
    reconnected in the background; ``tools/list_changed`` re-declares the capabilities. Calls may
    come from any event loop or thread: they hop onto the loop that owns the session.
    """

    def __init__(self, config: MCPServerConfig) -> None:
        if not isinstance(config, MCPServerConfig):
            msg = f"MCPServerAgent takes an MCPServerConfig, got {type(config).__name__}; or use connect()"
            raise InvalidDeclarationError(msg)
        self.config = config
        self._agent_id = config.agent_id
        self._relays = Relays(self._agent_id)
        self._connection = Connection(config, self, self._relays)
        self._converter = MCPConverter(self._agent_id)
        self._capabilities: tuple[Capability, ...] = ()
        self._routes: dict[str, ToolRoute] = {}
        self._handles: list[AgentHandle] = []
        self._offline: str | None = "not connected yet"
        self._supervisor: asyncio.Task[None] | None = None

    # -- connecting --------------------------------------------------------------------------

    @classmethod
    async def connect(
        cls,
        name: str,
        *,
        command: str | None = None,
        args: Sequence[str] = (),
        env: Mapping[str, str] | None = None,
        cwd: str | Path | None = None,
        url: str | None = None,
        headers: Mapping[str, str] | None = None,
        auth: httpx2.Auth | None = None,
        http_timeout_s: float = 30.0,
        sse_read_timeout_s: float = 300.0,
        server: MCPServer[Any] | Server[Any] | None = None,
        instance: str = "0",
        prefix: str = "",
        timeout_ms: int = 30_000,
        max_concurrency: int = 16,
        weight: float = 50.0,
        connect_timeout_s: float = 10.0,
        reconnect: ReconnectPolicy | None = None,
    ) -> MCPServerAgent:
        """Connect one server: ``command=`` (stdio), ``url=`` (streamable HTTP) or ``server=``
        (an SDK server object in this process). Returns once its tools are listed.

        Raises `MCPConnectionError` naming the server and the cause when it cannot start or be
        reached, and `MCPTimeoutError` when it does not finish initialize within the timeout.
        """
        target = _target(
            name,
            command=command,
            args=args,
            env=env,
            cwd=cwd,
            url=url,
            headers=headers,
            auth=auth,
            http_timeout_s=http_timeout_s,
            sse_read_timeout_s=sse_read_timeout_s,
            server=server,
        )
        config = MCPServerConfig(
            name=name,
            target=target,
            instance=instance,
            prefix=prefix,
            timeout_ms=timeout_ms,
            max_concurrency=max_concurrency,
            weight=weight,
            connect_timeout_s=connect_timeout_s,
            reconnect=reconnect or ReconnectPolicy(),
        )
        return await cls.start(config)

    @classmethod
    async def start(cls, config: MCPServerConfig) -> MCPServerAgent:
        """Connect the server `config` describes; see `connect`."""
        agent = cls(config)
        agent.tools_listed(await agent._connection.open())
        agent._supervisor = asyncio.get_running_loop().create_task(
            agent._supervise(), name=f"{agent._agent_id} supervisor"
        )
        return agent

    @classmethod
    async def connect_all(cls, configs: Iterable[MCPServerConfig]) -> ConnectReport:
        """Connect several servers at once; one that fails is reported, never fatal to the others."""
        configs = list(configs)
        seen: set[str] = set()
        for config in configs:
            if not isinstance(config, MCPServerConfig):
                msg = f"connect_all() takes MCPServerConfig items, got {type(config).__name__}"
                raise InvalidDeclarationError(msg)
            if config.agent_id in seen:
                msg = f"connect_all(): {config.agent_id} is given twice; give replicas distinct instances"
                raise InvalidDeclarationError(msg)
            seen.add(config.agent_id)
        outcomes = await asyncio.gather(*(cls.start(c) for c in configs), return_exceptions=True)
        agents: list[MCPServerAgent] = []
        failures: dict[str, ReachError] = {}
        for config, outcome in zip(configs, outcomes, strict=True):
            if isinstance(outcome, MCPServerAgent):
                agents.append(outcome)
            elif isinstance(outcome, ReachError):
                logger.warning("MCP server %s not connected: %s", config.agent_id, outcome)
                failures[config.agent_id] = outcome
            else:
                raise outcome
        return ConnectReport(agents, failures)

    @classmethod
    def connect_sync(cls, name: str, **options: Any) -> MCPServerAgent:
        """`connect` for synchronous programs: the session lives on a background event loop."""
        return _SYNC_LOOP.call(
            cls.connect(name, **options),
            method="MCPServerAgent.connect_sync",
            instead="await MCPServerAgent.connect(...)",
        )

    # -- the agent protocol ------------------------------------------------------------------

    @property
    def agent_id(self) -> str:
        return self._agent_id

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

    def __repr__(self) -> str:
        state = "online" if self._offline is None else f"offline: {self._offline}"
        return f"MCPServerAgent({self._agent_id!r}, {self.config.target.describe()!r}, {state})"

    def attach(self, handle: AgentHandle) -> None:
        """Called by the router on registration: state and tool changes are reported through it."""
        self._handles.append(handle)
        if self._offline is not None:
            handle.set_state(AgentState.OFFLINE, self._offline)

    async def invoke(self, message: ReachMessage) -> ReachResult:
        return await self._on_session_loop(self._call(message))

    async def probe(self) -> bool:
        """The router's health probe: one tools/list round trip, so a dead HTTP server is
        noticed even when no calls are made."""
        return await self._on_session_loop(self._probe())

    async def aclose(self) -> None:
        """Close the session; a stdio server's process is stopped. Safe to call twice."""
        await self._on_session_loop(self._close())

    def close_sync(self) -> None:
        _SYNC_LOOP.call(self.aclose(), method="close_sync", instead="await agent.aclose()")

    async def __aenter__(self) -> MCPServerAgent:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    # -- calls -------------------------------------------------------------------------------

    async def _on_session_loop(self, coro: Coroutine[Any, Any, T]) -> T:
        """Run `coro` on the loop that owns the session: the SDK's streams belong to it."""
        loop = self._connection.loop
        if loop is asyncio.get_running_loop():
            return await coro
        if loop is None or loop.is_closed() or not loop.is_running():
            coro.close()
            msg = (
                f"MCP server {self._agent_id}: no running event loop holds its session; connect "
                "inside the loop that serves the router, or use connect_sync()"
            )
            raise MCPOfflineError(msg)
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))

    async def _close(self) -> None:
        self._connection.closing = True
        supervisor = self._supervisor
        if supervisor is not None:
            supervisor.cancel()
            await asyncio.wait({supervisor})
        await self._connection.close()
        self._set_state(AgentState.OFFLINE, "closed")

    async def _probe(self) -> bool:
        client = self._connection.client
        if client is None:
            return False
        try:
            await client.list_tools()
        except (MCPError, ValidationError):
            return False
        return True

    async def _call(self, message: ReachMessage) -> ReachResult:
        client = self._connection.client
        if client is None:
            msg = f"MCP server {self._agent_id} is offline ({self._offline}); it is being reconnected"
            raise MCPOfflineError(msg)
        capability = message.meta_info.capability
        route = self._routes.get(capability or "")
        if route is None:
            tools = sorted(self._routes)
            msg = f"agent {self._agent_id} has no tool for capability {capability!r}; it has {tools}"
            raise InvalidMessageError(msg)
        timeout_s = self.config.timeout_ms / 1000.0
        return await call_tool(client, route, message, self._converter, timeout_s, self._relays)

    # -- lifecycle: `ConnectionEvents` --------------------------------------------------------

    def tools_listed(self, declared: Declared) -> None:
        """Take a (re-)scanned tool list. An empty one leaves the agent connected and online
        with no capabilities: a later ``tools/list_changed`` may bring some."""
        capabilities = tuple(declared.capabilities)
        changed = capabilities != self._capabilities
        self._routes = declared.routes
        self._capabilities = capabilities
        if changed:
            for handle in self._handles:
                handle.set_capabilities(capabilities)
        if self._offline is not None:
            # Only what this agent took down it brings back; health probes judge the rest.
            self._set_state(AgentState.ONLINE, "connected")

    def connection_lost(self, reason: str) -> None:
        logger.warning("MCP server %s is offline: %s", self._agent_id, reason)
        # Reconnecting, calls may wait for it within their deadline; otherwise it stays down.
        back = self.config.reconnect.enabled and not self._connection.closing
        self._set_state(AgentState.RECONNECTING if back else AgentState.OFFLINE, reason)

    def _set_state(self, state: AgentState, reason: str) -> None:
        self._offline = None if state is AgentState.ONLINE else reason
        for handle in self._handles:
            handle.set_state(state, reason)

    async def _supervise(self) -> None:
        """Wait for the session to end, then reconnect with backoff until it is back or closed."""
        policy = self.config.reconnect
        while True:
            await self._connection.wait_lost()
            if not policy.enabled:
                logger.warning("MCP server %s stays offline: reconnect is disabled", self._agent_id)
                return
            delays = policy.delays()
            while True:
                await asyncio.sleep(next(delays))
                try:
                    declared = await self._connection.open()
                except ReachError as exc:
                    logger.info("MCP server %s: reconnect failed: %s", self._agent_id, exc)
                    continue
                logger.info("MCP server %s reconnected", self._agent_id)
                self.tools_listed(declared)
                break


def _target(
    name: str,
    *,
    command: str | None,
    args: Sequence[str],
    env: Mapping[str, str] | None,
    cwd: str | Path | None,
    url: str | None,
    headers: Mapping[str, str] | None,
    auth: httpx2.Auth | None,
    http_timeout_s: float,
    sse_read_timeout_s: float,
    server: MCPServer[Any] | Server[Any] | None,
) -> ServerTarget:
    given = [
        key for key, value in (("command", command), ("url", url), ("server", server)) if value is not None
    ]
    if len(given) != 1:
        msg = (
            f"MCP server {name!r}: give exactly one of command= (stdio), url= (streamable HTTP) or "
            f"server= (in-process), got {given or 'none'}"
        )
        raise InvalidDeclarationError(msg)
    if command is not None:
        if headers is not None or auth is not None:
            msg = f"MCP server {name!r}: headers= and auth= apply to url= servers, not command="
            raise InvalidDeclarationError(msg)
        return StdioTarget(command=command, args=list(args), env=dict(env) if env else None, cwd=cwd)
    if args or env is not None or cwd is not None:
        msg = f"MCP server {name!r}: args=, env= and cwd= apply to command= servers only"
        raise InvalidDeclarationError(msg)
    if url is not None:
        return HttpTarget(
            url=url,
            headers=dict(headers or {}),
            auth=auth,
            timeout_s=http_timeout_s,
            sse_read_timeout_s=sse_read_timeout_s,
        )
    return InProcessTarget(server=server)
