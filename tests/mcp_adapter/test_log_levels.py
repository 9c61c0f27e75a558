"""The router's MCP server declares the `logging` capability (MCP: a server that sends
`notifications/message` must), in both protocol versions, and honours `logging/setLevel` per
2025-11-25 session: the relayed log messages of that session's calls are filtered by the level it
set (2026-07-28 clients opt in per request instead)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import get_args

import pytest
from mcp import Client
from mcp.server.mcpserver import Context, MCPServer
from mcp.shared.exceptions import MCPError
from mcp.types import LoggingLevel, LoggingMessageNotificationParams

from reach_adapters import Router
from reach_adapters.mcp import MCPOptions, MCPServerAgent, RouterMCPServer, start_mcp_server

pytestmark = pytest.mark.timeout(60)

LEVELS: tuple[LoggingLevel, ...] = get_args(LoggingLevel)

levels = MCPServer("levels")


@levels.tool()
async def log_each(ctx: Context) -> str:
    """Log one message at every level, lowest first."""
    for level in LEVELS:
        await ctx.log(level, f"at {level}")
    return "logged"


class Heard:
    """The levels of the log messages one client heard."""

    def __init__(self) -> None:
        self.levels: list[str] = []

    async def __call__(self, params: LoggingMessageNotificationParams) -> None:
        self.levels.append(params.level)


# How a client reaches the router: in process (the SDK server object) or over streamable HTTP.
Connect = Callable[..., Client]


@asynccontextmanager
async def _gateway(router: Router, transport: str) -> AsyncIterator[Connect]:
    if transport == "http":
        async with await start_mcp_server(router, port=0) as endpoint:
            yield lambda **options: Client(endpoint.url, **options)
    else:
        reach = RouterMCPServer(router)
        try:
            yield lambda **options: Client(reach.server, **options)
        finally:
            reach.close()


@pytest.fixture(params=["in-process", "http"])
def transport(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_logging_capability_is_declared_in_both_protocol_versions(
    router: Router, transport: str, mode: str
) -> None:
    router.register(await MCPServerAgent.connect("levels", levels))
    async with _gateway(router, transport) as connect, connect(mode=mode) as client:
        assert client.server_capabilities.logging is not None


@pytest.mark.parametrize("upstream", ["auto", "2025-11-25"])
async def test_a_handshake_era_sessions_level_filters_what_it_hears(
    router: Router, transport: str, upstream: str
) -> None:
    # Whichever protocol the upstream speaks: a 2026-07-28 one is asked for the session's level,
    # a 2025 one sends every level and the router drops what the session did not ask for.
    router.register(await MCPServerAgent.connect("levels", levels, options=MCPOptions(protocol=upstream)))
    quiet, chatty = Heard(), Heard()
    async with (
        _gateway(router, transport) as connect,
        connect(mode="legacy", logging_callback=quiet) as filtered,
        connect(mode="legacy", logging_callback=chatty) as unfiltered,
    ):
        await filtered.set_logging_level("error")
        results = await asyncio.gather(
            filtered.call_tool("log_each", {}), unfiltered.call_tool("log_each", {})
        )
        assert not any(result.is_error for result in results)
        # The level holds for the session, call after call, until it sets another.
        assert not (await filtered.call_tool("log_each", {})).is_error
        await filtered.set_logging_level("critical")
        assert not (await filtered.call_tool("log_each", {})).is_error
    error_and_up = ["error", "critical", "alert", "emergency"]
    assert quiet.levels == error_and_up * 2 + error_and_up[1:]
    # A session that set no level hears every one, as before; another's level is not its own.
    assert chatty.levels == list(LEVELS)


async def test_a_2026_client_keeps_its_per_request_level(router: Router, transport: str) -> None:
    router.register(await MCPServerAgent.connect("levels", levels))
    heard = Heard()
    async with (
        _gateway(router, transport) as connect,
        connect(mode="auto", logging_callback=heard, log_level="warning") as client,
    ):
        assert not (await client.call_tool("log_each", {})).is_error
        # logging/setLevel is no 2026-07-28 method: the per-request opt-in is the way.
        with pytest.raises(MCPError):
            await client.set_logging_level("error")
    assert heard.levels == ["warning", "error", "critical", "alert", "emergency"]
