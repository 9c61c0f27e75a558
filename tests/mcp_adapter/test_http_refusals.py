"""Over streamable HTTP, a tool call the server (or a rate limiter in front of it) turns away with
HTTP 429 or 503 never ran: another replica takes it, even when it is not safe to repeat, the
error names the status and its Retry-After, and it counts against the replica's breaker as any
429 or 5xx does (DESIGN §6)."""

from __future__ import annotations

import pytest
from mcp.server.mcpserver import MCPServer

from middleware import Fault, ResultStatus
from reach_adapters import BreakerState, Router
from reach_adapters.mcp import MCPOptions, MCPServerAgent
from tests.mcp_adapter.asgi import refusing, serve_asgi

pytestmark = pytest.mark.timeout(60)


def charging(runs: list[str], instance: str) -> MCPServer:
    server = MCPServer("svc")

    @server.tool()
    def charge(amount: int) -> str:
        """Charge a card: not safe to repeat."""
        runs.append(instance)
        return "charged"

    return server


@pytest.mark.parametrize("protocol", ["auto", "2025-11-25"])
@pytest.mark.parametrize(
    ("status", "headers", "said"),
    [
        (429, {"retry-after": "7"}, "HTTP 429 (Too Many Requests, Retry-After: 7)"),
        (503, {}, "HTTP 503 (Service Unavailable)"),
    ],
)
async def test_a_call_turned_away_goes_to_a_replica(
    protocol: str, status: int, headers: dict[str, str], said: str
) -> None:
    runs: list[str] = []
    busy = refusing(charging(runs, "a").streamable_http_app(), {"charge": (status, headers)})
    async with (
        serve_asgi(busy) as url_a,
        serve_asgi(charging(runs, "b").streamable_http_app()) as url_b,
        Router() as router,
    ):
        for instance, weight, url in (("a", 100.0, url_a), ("b", 1.0, url_b)):
            options = MCPOptions(instance=instance, weight=weight, protocol=protocol)
            router.register(await MCPServerAgent.connect("svc", url, options=options))
        result = await router.route("charge", {"amount": 5})
        assert (result.ok, result.agent_id, result.attempts) == (True, "mcp:svc:b", 2), result.error
        assert runs == ["b"]
        turned = router.explain(result.task_id or "").attempts[0]
        assert (turned.agent_id, turned.status, turned.fault, turned.delivered) == (
            "mcp:svc:a",
            ResultStatus.ERROR,
            Fault.AGENT,
            False,
        )
        assert turned.error_type == "MCPUnavailableError"
        assert turned.error == (
            f"MCP server mcp:svc:a turned the call to 'charge' away with {said} and did not run it; "
            "another replica may take it"
        )
        info = next(info for info in router.catalog() if info.agent_id == "mcp:svc:a")
        assert (info.breaker, info.failures) == (BreakerState.CLOSED, 1)
