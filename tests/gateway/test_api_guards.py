"""The HTTP API answers programs, not web pages: content type, Origin and Host are checked."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette

from middleware import ReachMessage, ReachResult, ResultStatus
from reach_adapters import Capability
from reach_adapters.gateway import Gateway
from reach_adapters.gateway.api import GatewayAPI
from tests.gateway.conftest import ECHO, write

pytestmark = pytest.mark.timeout(30)


@asynccontextmanager
async def api_client(gateway: Gateway, *, loopback_only: bool = False) -> AsyncIterator[httpx.AsyncClient]:
    """A client of `gateway`'s HTTP API, served in process, as a local page would call it."""
    app = Starlette(routes=GatewayAPI(gateway, loopback_only=loopback_only).routes())
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client:
        yield client


async def test_api_refuses_cross_site_and_rebound_requests(config_dir: Path) -> None:
    write(config_dir, "util:echo:01.yaml", ECHO)
    async with await Gateway.start(config_dir) as gateway, api_client(gateway, loopback_only=True) as client:
        body = {"capability": "echo", "payload": {"text": "hi"}}
        ok = await client.post("/api/route", json=body)
        assert ok.status_code == 200
        assert ok.json()["status"] == "ok"
        # A page's "simple" request: no preflight, so the server itself must refuse it.
        plain = await client.post(
            "/api/route", content=b'{"capability": "echo"}', headers={"Content-Type": "text/plain"}
        )
        assert plain.status_code == 415
        cross = await client.post("/api/route", json=body, headers={"Origin": "https://evil.example"})
        assert cross.status_code == 403
        assert "cross-site" in cross.json()["error"]
        rebound = await client.get("/api/catalog", headers={"Host": "evil.example:8000"})
        assert rebound.status_code == 421
        same_site = await client.get("/api/catalog", headers={"Origin": "http://127.0.0.1:8000"})
        assert same_site.status_code == 200


async def test_api_rejects_options_that_clash_with_the_request(config_dir: Path) -> None:
    write(config_dir, "util:echo:01.yaml", ECHO)
    async with await Gateway.start(config_dir) as gateway, api_client(gateway) as client:
        clash = await client.post("/api/route", json={"capability": "echo", "options": {"payload": 1}})
        assert clash.status_code == 400
        assert "options may not set ['payload']" in clash.json()["error"]
        odd = await client.get("/api/decisions", params={"limit": "²"})
        assert odd.status_code == 400


class Probed:
    """An agent whose health probe answers what the test says."""

    agent_id = "util:probed:01"
    capabilities = [Capability(name="probed")]

    def __init__(self) -> None:
        self.up = True

    async def invoke(self, message: ReachMessage) -> ReachResult:
        return ReachResult(status=ResultStatus.OK, task_id=message.meta_info.task_id, payload=None)

    async def probe(self) -> bool:
        return self.up


async def test_health_says_whether_calls_can_be_served(config_dir: Path) -> None:
    write(config_dir, "util:echo:01.yaml", ECHO)
    async with await Gateway.start(config_dir) as gateway:
        probed = Probed()
        gateway.router.register(probed)
        async with api_client(gateway) as client:
            healthy = await client.get("/api/health")
            assert (healthy.status_code, healthy.json()["status"]) == (200, "ok")

            probed.up = False
            for _ in range(2):  # two failed probes take an agent offline
                await gateway.router.probe_now()
            degraded = await client.get("/api/health")
            assert (degraded.status_code, degraded.json()["status"]) == (200, "degraded")
            assert (degraded.json()["agents"], degraded.json()["usable_agents"]) == (2, 1)

            await gateway.router.deregister("util:echo:01")
            down = await client.get("/api/health")
            assert (down.status_code, down.json()["status"]) == (503, "unavailable")


@pytest.mark.parametrize(
    ("host", "origin", "status"),
    [
        ("[::1]", None, 200),
        ("[::1]:8000", "http://[::1]:8000", 200),
        ("LOCALHOST:8000", None, 200),
        ("[::1", None, 421),
        ("127.0.0.1@evil.example", None, 421),
        ("", None, 421),
        ("127.0.0.1:8000", "null", 403),
        ("127.0.0.1:8000", "http://127.0.0.1:9999", 403),
    ],
)
async def test_loopback_guard_reads_host_and_origin_headers_strictly(
    config_dir: Path, host: str, origin: str | None, status: int
) -> None:
    write(config_dir, "util:echo:01.yaml", ECHO)
    async with await Gateway.start(config_dir) as gateway, api_client(gateway, loopback_only=True) as client:
        headers = {"Host": host} | ({"Origin": origin} if origin is not None else {})
        answer = await client.get("/api/catalog", headers=headers)
    assert answer.status_code == status, answer.text
    if status != 200:
        assert answer.json()["error_type"] == "InvalidMessageError"


async def test_api_option_errors_name_only_what_the_api_takes(config_dir: Path) -> None:
    write(config_dir, "util:echo:01.yaml", ECHO)
    async with await Gateway.start(config_dir) as gateway, api_client(gateway) as client:
        unknown = await client.post("/api/route", json={"capability": "echo", "options": {"colour": 1}})
        assert unknown.status_code == 400
        error = unknown.json()["error"]
        assert "unknown option(s) ['colour']; the options are " in error
        assert "timeout_ms" in error
        assert "principal" not in error
        assert "caller_token" not in error
        for path, body in (
            ("/api/route", {"capability": "echo"}),
            ("/api/send", {"agent_id": "util:echo:01"}),
            ("/api/tasks", {"capability": "echo"}),
        ):
            for name in ("principal", "caller_token"):
                who = await client.post(path, json={**body, "options": {name: "admin"}})
                assert who.status_code == 400, path
                error = who.json()["error"]
                assert f"options may not set ['{name}']" in error
                assert "authenticates" in error
                assert "docs/security.md" in error
                assert "request's own fields" not in error
