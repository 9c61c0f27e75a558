"""A call that finds no session says why, and whether the agent is coming back: never a bare
"None" for a session that has just ended and is not reported yet, nor "being reconnected" for an
agent that is not."""

from __future__ import annotations

import asyncio

import pytest
from mcp.server.mcpserver import MCPServer

from middleware import ReachMessage
from reach_adapters.mcp import MCPOfflineError, MCPOptions, MCPServerAgent, ReconnectPolicy
from tests.mcp_adapter.asgi import cutting, serve_asgi

pytestmark = pytest.mark.timeout(60)


def sleeper() -> MCPServer:
    server = MCPServer("svc")

    @server.tool()
    async def hang(seconds: float) -> str:
        """Sleep, so that the connection is cut while it runs."""
        await asyncio.sleep(seconds)
        return "woke"

    return server


@pytest.mark.parametrize(
    ("enabled", "then"),
    [(True, "it is being reconnected"), (False, "it stays offline: reconnect is disabled")],
)
async def test_a_call_after_the_connection_was_cut_says_why_it_was_not_sent(enabled: bool, then: str) -> None:
    message = ReachMessage.model_validate(
        {"raw_payload": {"seconds": 30}, "meta_info": {"capability": "hang"}}
    )
    reconnect = ReconnectPolicy(enabled=enabled, initial_delay_s=30.0)
    async with serve_asgi(sleeper().streamable_http_app()) as url, cutting(url, b'"hang"') as proxied:
        agent = await MCPServerAgent.connect("svc", proxied, options=MCPOptions(reconnect=reconnect))
        try:
            lost = await agent.invoke(message)
            assert lost.error_type == "MCPConnectionError"
            # At once, before the session's end is reported, and after.
            for _ in range(2):
                with pytest.raises(MCPOfflineError) as raised:
                    await agent.invoke(message)
                said = str(raised.value)
                assert said.startswith("MCP server mcp:svc:0 is offline ("), said
                assert said.endswith(f"); {then}"), said
                assert "(None)" not in said
                await asyncio.sleep(0.2)
        finally:
            await agent.aclose()
        with pytest.raises(
            MCPOfflineError,
            match=r"^MCP server mcp:svc:0 is offline: the agent is closed; connect a new one$",
        ):
            await agent.invoke(message)
