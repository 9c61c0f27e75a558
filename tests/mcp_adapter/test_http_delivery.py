"""Over streamable HTTP, a call whose connection was refused never reached the server: another
replica takes it, even when it is not safe to repeat; one that was sent keeps its unknown outcome."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from middleware import ResultStatus
from reach_adapters import Router
from reach_adapters.mcp import MCPOptions, MCPServerAgent, ReconnectPolicy
from tests.mcp_adapter.conftest import NOTES, HttpCalc

pytestmark = pytest.mark.timeout(60)

PROTOCOLS = ["auto", "2025-11-25"]


@pytest.fixture
def replicas() -> Iterator[tuple[HttpCalc, HttpCalc]]:
    """Two notes servers: no change stream, so only a request finds one gone."""
    pair = HttpCalc(NOTES), HttpCalc(NOTES)
    try:
        yield pair
    finally:
        for server in pair:
            server.stop()


async def _register(router: Router, replicas: tuple[HttpCalc, HttpCalc], protocol: str) -> None:
    """Replica a first (the heavier weight), b the spare; reconnecting slowly, so a stays down."""
    slow = ReconnectPolicy(initial_delay_s=30.0)
    for (instance, weight), server in zip((("a", 100.0), ("b", 1.0)), replicas, strict=True):
        options = MCPOptions(instance=instance, weight=weight, protocol=protocol, reconnect=slow)
        router.register(await MCPServerAgent.connect("notes", server.url, options=options))


@pytest.mark.parametrize("protocol", PROTOCOLS)
async def test_a_refused_connection_is_never_delivered_and_a_replica_takes_the_call(
    protocol: str, replicas: tuple[HttpCalc, HttpCalc], router: Router
) -> None:
    await _register(router, replicas, protocol)
    replicas[0].kill()
    moved = await router.route("append_note", {"text": "hello"})
    assert (moved.ok, moved.agent_id, moved.attempts) == (True, "mcp:notes:b", 2)
    refused = router.explain(moved.task_id or "").attempts[0]
    assert (refused.agent_id, refused.delivered) == ("mcp:notes:a", False)
    assert refused.error_type == "MCPOfflineError"


async def test_a_call_sent_before_the_server_died_keeps_its_unknown_outcome(
    replicas: tuple[HttpCalc, HttpCalc], router: Router
) -> None:
    # On 2025-11-25 each call fails on its own stream. (On 2026-07-28 the one sent fails the whole
    # transport while it waits for its response headers, and a call still connecting is cut off
    # with it: it may have been sent, so it keeps the unknown outcome too.)
    await _register(router, replicas, "2025-11-25")
    sent = asyncio.create_task(router.route("slow", {"seconds": 30}, timeout_ms=40_000))
    await asyncio.sleep(0.5)
    replicas[0].kill()
    moved = await router.route("append_note", {"text": "hello"})
    lost = await sent
    assert (lost.status, lost.agent_id, lost.delivered) == (ResultStatus.ERROR, "mcp:notes:a", True)
    assert lost.error_type == "MCPConnectionError"
    assert (moved.ok, moved.agent_id) == (True, "mcp:notes:b")
