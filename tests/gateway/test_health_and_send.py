"""Health tells the truth; a directed call over HTTP names its capability (issue 10, items 5, 9)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette

from reach_adapters import AgentState
from reach_adapters.gateway import Gateway
from reach_adapters.gateway.api import GatewayAPI
from tests.core.conftest import Handled, failing_agent
from tests.core.test_directed import two_faced
from tests.gateway.conftest import ECHO, ReachServer, write

pytestmark = pytest.mark.timeout(30)


async def test_health_is_degraded_while_an_agent_is_quarantined_suspicious_or_reconnecting(
    config_dir: Path,
) -> None:
    write(config_dir, "util:echo:01.yaml", ECHO)
    async with await Gateway.start(config_dir) as gateway:
        router = gateway.router
        remote = Handled("svc:remote:01", "remote")
        router.register(remote)
        app = Starlette(routes=GatewayAPI(gateway).routes())
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            assert (await client.get("/api/health")).json()["status"] == "ok"

            remote.handle.set_state(AgentState.RECONNECTING, "session lost")
            health = (await client.get("/api/health")).json()
            assert health["status"] == "degraded"
            assert health["problems"] == {"svc:remote:01": "reconnecting (session lost)"}

            remote.handle.set_state(AgentState.SUSPICIOUS, "health probe failed once")
            health = (await client.get("/api/health")).json()
            assert health["problems"] == {"svc:remote:01": "suspicious (health probe failed once)"}

            remote.handle.set_state(AgentState.ONLINE, "back")
            router.register(failing_agent("svc:broken:01", ValueError("bug")))
            for _ in range(2):
                await router.route("work", {})
            health = (await client.get("/api/health")).json()
            assert health["status"] == "degraded"
            assert list(health["problems"]) == ["svc:broken:01"]
            assert "quarantined for" in health["problems"]["svc:broken:01"]
            catalog = (await client.get("/api/catalog")).json()
            problems = {agent["agent_id"]: agent["problem"] for agent in catalog}
            assert problems["util:echo:01"] is None
            assert "circuit open" in problems["svc:broken:01"]


async def test_send_names_the_capability_of_an_agent_with_several(config_dir: Path) -> None:
    async with await Gateway.start(config_dir) as gateway:
        gateway.router.register(two_faced())
        app = Starlette(routes=GatewayAPI(gateway).routes())
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            named = await client.post(
                "/api/send", json={"agent_id": "text:tools:01", "capability": "lower", "payload": {}}
            )
            assert named.json()["status"] == "ok"
            assert named.json()["payload"]["capability"] == "lower"
            unnamed = await client.post("/api/send", json={"agent_id": "text:tools:01", "payload": {}})
            assert unnamed.json()["status"] == "invalid"
            assert "declares several capabilities" in unnamed.json()["error"]
            clash = await client.post(
                "/api/send", json={"agent_id": "text:tools:01", "options": {"capability": "lower"}}
            )
            assert clash.status_code == 400


def test_a_server_with_no_tools_never_stops_reach_serve(
    serve: Callable[..., ReachServer], config_dir: Path
) -> None:
    empty = Path(__file__).resolve().parents[1] / "mcp_adapter" / "servers" / "empty.py"
    write(config_dir, "util:echo:01.yaml", ECHO)
    write(config_dir, "mcp:empty:0.yaml", f"kind: mcp\nname: empty\ncommand: python\nargs: [{empty}]\n")
    server = serve(config_dir)
    health = server.health()
    assert (health["status"], health["agents"], health["usable_agents"]) == ("ok", 2, 2)
