"""An MCP server's `instructions` (guidance a host puts in the model's context) survive the
router: `MCPServerAgent` keeps its server's, and the router's MCP server gives its clients the
operator's own followed by one section per upstream server that has some, headed by the server's
name and its tools as the router serves them."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import httpx2
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
from mcp.server.auth.provider import AccessToken
from mcp.server.mcpserver import MCPServer
from starlette.types import ASGIApp, Receive, Scope, Send

from reach_adapters import FunctionAgent, Router
from reach_adapters.mcp import MCPOptions, MCPServerAgent, RouterMCPServer, start_mcp_server
from reach_adapters.security.guard import SecurityGuard
from reach_adapters.security.spec import SecuritySpec

pytestmark = pytest.mark.timeout(60)

ROOT = Path(__file__).resolve().parents[2]

GUIDE = "Add with add: it never rounds. Double with double."
guide = MCPServer("guide", instructions=GUIDE)


@guide.tool()
def add(a: int, b: int) -> int:
    """Add two integers."""
    return a + b


@guide.tool()
def double(x: int) -> int:
    """Double an integer."""
    return 2 * x


plain = MCPServer("plain")


@plain.tool()
def echo(text: str) -> str:
    """Say the text back."""
    return text


LONG = "Read this first. " * 2000
verbose = MCPServer("verbose", instructions=LONG)


@verbose.tool()
def chatter() -> str:
    """Say little."""
    return "..."


def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


# How a client reaches the router: in process (the SDK server object) or over streamable HTTP.
Connect = Callable[[str], Client]


@asynccontextmanager
async def _gateway(router: Router, transport: str, instructions: str | None) -> AsyncIterator[Connect]:
    if transport == "http":
        async with await start_mcp_server(router, port=0, instructions=instructions) as endpoint:
            yield lambda mode: Client(endpoint.url, mode=mode)
    else:
        reach = RouterMCPServer(router, instructions=instructions)
        try:
            yield lambda mode: Client(reach.server, mode=mode)
        finally:
            reach.close()


async def _instructions(connect: Connect, mode: str) -> str | None:
    async with connect(mode) as client:
        return client.instructions


@pytest.mark.parametrize("protocol", ["auto", "2025-11-25"])
async def test_an_mcp_server_agent_keeps_its_servers_instructions(protocol: str) -> None:
    # From InitializeResult (2025-11-25) or DiscoverResult (2026-07-28).
    async with (
        await MCPServerAgent.connect("guide", guide, options=MCPOptions(protocol=protocol)) as agent,
        await MCPServerAgent.connect("plain", plain, options=MCPOptions(protocol=protocol)) as silent,
    ):
        assert agent.instructions == GUIDE
        assert silent.instructions is None


@pytest.mark.parametrize("transport", ["in-process", "http"])
@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_the_operators_and_each_upstreams_instructions_are_served(
    router: Router, transport: str, mode: str
) -> None:
    for instance in ("a", "b"):
        # Two replicas of one server: its section once, its tools under their names here.
        options = MCPOptions(instance=instance, prefix="g.")
        router.register(await MCPServerAgent.connect("guide", guide, options=options))
    router.register(await MCPServerAgent.connect("plain", plain))
    router.register(FunctionAgent(shout, agent_id="util:shout:0"))
    async with _gateway(router, transport, "Ask before deleting anything.") as connect:
        served = await _instructions(connect, mode)
    assert served == (
        "Ask before deleting anything.\n\n"
        '## Instructions of the MCP server "guide", for its tools g.add, g.double\n\n' + GUIDE
    )


async def test_without_any_instructions_none_are_served(router: Router) -> None:
    router.register(await MCPServerAgent.connect("plain", plain))
    async with _gateway(router, "in-process", None) as connect:
        assert await _instructions(connect, "legacy") is None
        assert await _instructions(connect, "auto") is None


@pytest.mark.parametrize("own", [None, "Ask before deleting anything."])
async def test_an_operator_may_leave_the_upstreams_out(router: Router, own: str | None) -> None:
    router.register(await MCPServerAgent.connect("guide", guide))
    reach = RouterMCPServer(router, instructions=own, upstream_instructions=False)
    async with await start_mcp_server(
        router, port=0, instructions=own, upstream_instructions=False
    ) as endpoint:
        for connect in (
            lambda mode: Client(reach.server, mode=mode),
            lambda mode: Client(endpoint.url, mode=mode),
        ):
            assert await _instructions(connect, "legacy") == own
            assert await _instructions(connect, "auto") == own
    reach.close()


async def test_the_upstreams_alone_and_a_server_that_comes_later(router: Router) -> None:
    router.register(await MCPServerAgent.connect("plain", plain))
    async with _gateway(router, "http", None) as connect:
        assert await _instructions(connect, "auto") is None
        # Clients see the instructions at initialize (2025) or server/discover (2026) time.
        router.register(await MCPServerAgent.connect("guide", guide))
        served = await _instructions(connect, "legacy")
        assert served == '## Instructions of the MCP server "guide", for its tools add, double\n\n' + GUIDE
        assert await _instructions(connect, "auto") == served


async def test_a_very_long_upstream_text_is_cut_saying_so(router: Router) -> None:
    router.register(await MCPServerAgent.connect("verbose", verbose))
    async with _gateway(router, "in-process", None) as connect:
        served = await _instructions(connect, "auto")
    assert served is not None
    assert served.startswith('## Instructions of the MCP server "verbose", for its tools chatter\n\n')
    assert len(served) < 8_500 < len(LONG)
    assert served.endswith(f"[cut by agent-reach at 8000 of its {len(LONG)} characters]")


class _Principals:
    """Authenticates each HTTP request as the principal its `x-principal` header names, as the
    gateway's security.yaml would (`HTTPLimits`)."""

    max_body_bytes = 1_000_000

    def wrap(self, app: ASGIApp) -> ASGIApp:
        async def authenticated(scope: Scope, receive: Receive, send: Send) -> None:
            name = dict(scope.get("headers", [])).get(b"x-principal")
            if scope["type"] == "http" and name is not None:
                token = AccessToken(token="t", client_id=name.decode(), scopes=[])
                scope = {**scope, "user": AuthenticatedUser(token)}
            await app(scope, receive, send)

        return authenticated

    def uvicorn_options(self) -> dict[str, object]:
        return {}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_a_principal_sees_the_sections_of_the_tools_it_may_reach(mode: str) -> None:
    guard = SecurityGuard(SecuritySpec.model_validate({"principals": {"alice": {"allow": ["echo"]}}}))
    async with Router(guard=guard) as router:
        router.register(await MCPServerAgent.connect("guide", guide))
        router.register(await MCPServerAgent.connect("plain", plain))
        endpoint = await start_mcp_server(router, port=0, instructions="Be brief.", limits=_Principals())
        async with (
            endpoint,
            httpx2.AsyncClient(headers={"x-principal": "alice"}, timeout=30) as http,
            Client(streamable_http_client(endpoint.url, http_client=http), mode=mode) as client,
        ):
            # Like the tool list: another server's guidance would name tools alice cannot reach.
            assert client.instructions == "Be brief."


async def test_served_over_stdio_with_instructions() -> None:
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "tests.mcp_adapter.servers.gateway", "--instructions", "Be brief."],
        cwd=ROOT,
    )
    async with Client(params) as client:
        assert client.instructions == "Be brief."
