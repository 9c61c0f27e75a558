"""Changing the config directory of a running `reach serve`: applied when valid, refused when not."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest
from mcp import Client

from tests.gateway.conftest import ECHO, PROBE, SHOUT, ReachServer, write
from tests.waiting import alive, eventually, wait_until

pytestmark = pytest.mark.timeout(90)

Serve = Callable[..., ReachServer]

HOLD = "kind: function\nagent_id: util:hold:01\nfunction: tests.gateway.agents:hold\n"


def generation(server: ReachServer) -> int:
    value: int = server.health()["generation"]
    return value


def catalog(server: ReachServer) -> dict[str, dict[str, object]]:
    return {info["agent_id"]: info for info in server.api("GET", "/catalog").json()}


async def test_a_policy_change_applies_to_the_next_call(serve: Serve, config_dir: Path) -> None:
    write(config_dir, "routing_policy.yaml", "strategy: weighted\n")
    write(config_dir, "util:echo:01.yaml", ECHO)
    server = serve(config_dir)
    before = server.api("POST", "/route", json={"capability": "echo", "payload": {}}).json()
    assert server.api("GET", f"/explain/{before['task_id']}").json()["strategy"] == "weighted"

    write(config_dir, "routing_policy.yaml", "strategy: least_wait\n")
    wait_until(lambda: generation(server) == 2, what="the policy change to be applied")
    after = server.api("POST", "/route", json={"capability": "echo", "payload": {}}).json()
    assert server.api("GET", f"/explain/{after['task_id']}").json()["strategy"] == "least_wait"
    assert server.health()["reloads_applied"] == 1
    assert "config generation 2 in force: policy changed" in server.log.read_text()


async def test_agents_come_and_go_and_mcp_clients_see_it(serve: Serve, config_dir: Path) -> None:
    write(config_dir, "util:echo:01.yaml", ECHO)
    server = serve(config_dir)
    async with Client(server.mcp_url) as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == {"echo"}
        write(config_dir, "util:shout:01.yaml", SHOUT)
        wait_until(lambda: "util:shout:01" in catalog(server), what="the new agent to be registered")
        assert {tool.name for tool in (await client.list_tools()).tools} == {"echo", "shout"}
        shouted = server.api(
            "POST", "/route", json={"capability": "shout", "payload": {"text": "new"}}
        ).json()
        assert shouted["payload"] == "NEW"

        (config_dir / "util:echo:01.yaml").unlink()
        wait_until(lambda: "util:echo:01" not in catalog(server), what="the removed agent to go")
        assert {tool.name for tool in (await client.list_tools()).tools} == {"shout"}
    assert generation(server) == 3


async def test_an_invalid_change_is_refused_and_the_running_config_stays(
    serve: Serve, config_dir: Path
) -> None:
    write(config_dir, "util:echo:01.yaml", ECHO)
    server = serve(config_dir)
    path = write(config_dir, "util:echo:01.yaml", ECHO + "overrides:\n  echo:\n    weight: -1\n")
    wait_until(lambda: server.health()["reloads_rejected"] == 1, what="the invalid change to be refused")
    health = server.health()
    assert health["generation"] == 1
    assert health["last_error"] == (
        f"{path}:6: field 'overrides.echo.weight': Input should be greater than or equal to 0"
    )
    assert "config change rejected, generation 1 stays in force" in server.log.read_text()
    metrics = httpx.get(f"{server.url}/metrics", timeout=30).text
    assert 'reach_config_reloads_total{outcome="rejected"} 1.0' in metrics
    still = server.api("POST", "/route", json={"capability": "echo", "payload": {"kept": True}}).json()
    assert (still["status"], still["payload"]) == ("ok", {"kept": True})
    assert catalog(server)["util:echo:01"]["capabilities"][0]["weight"] == 50.0  # type: ignore[index]

    write(config_dir, "util:echo:01.yaml", ECHO + "overrides:\n  echo:\n    weight: 75\n")
    wait_until(lambda: generation(server) == 2, what="the fixed change to be applied")
    assert server.health()["last_error"] is None
    assert catalog(server)["util:echo:01"]["capabilities"][0]["weight"] == 75.0  # type: ignore[index]


async def test_a_change_to_a_busy_agent_takes_over_at_once_and_its_calls_finish(
    serve: Serve, config_dir: Path, tmp_path: Path
) -> None:
    write(config_dir, "util:hold:01.yaml", HOLD)
    server = serve(config_dir)
    release = tmp_path / "release"
    async with httpx.AsyncClient(timeout=60) as http:
        call = asyncio.ensure_future(
            http.post(
                f"{server.api_url}/route", json={"capability": "hold", "payload": {"release": str(release)}}
            )
        )
        await eventually(lambda: catalog(server)["util:hold:01"]["in_flight"] == 1, what="the call to start")
        write(config_dir, "util:hold:01.yaml", HOLD + "overrides:\n  hold:\n    weight: 60\n")
        # The new declaration serves while the old agent still runs the first call.
        await eventually(lambda: generation(server) == 2, what="the change to be applied")
        info = catalog(server)["util:hold:01"]
        assert info["state"] == "online"
        assert info["capabilities"][0]["weight"] == 60.0  # type: ignore[index]
        assert not call.done()
        release.touch()
        answer = (await call).json()
    assert answer["status"] == "ok"
    assert answer["payload"] == {"released": str(release)}


async def test_a_changed_mcp_server_is_restarted_and_the_old_process_stopped(
    serve: Serve, config_dir: Path
) -> None:
    write(config_dir, "mcp:probe:0.yaml", PROBE)
    server = serve(config_dir)
    first = server.api("POST", "/route", json={"capability": "pid", "payload": {}}).json()["payload"]
    write(config_dir, "mcp:probe:0.yaml", PROBE + "env:\n  GENERATION: '2'\n")
    wait_until(lambda: generation(server) == 2, what="the MCP server change to be applied")
    second = server.api("POST", "/route", json={"capability": "pid", "payload": {}}).json()["payload"]
    assert second != first
    wait_until(lambda: not alive(first), what="the old server process to stop")
    assert alive(second)


async def test_a_new_server_that_cannot_start_leaves_everything_as_it_was(
    serve: Serve, config_dir: Path
) -> None:
    write(config_dir, "util:echo:01.yaml", ECHO)
    server = serve(config_dir)
    path = write(
        config_dir, "mcp:dead:0.yaml", "kind: mcp\nname: dead\ncommand: python\nargs: [-c, 'pass']\n"
    )
    wait_until(lambda: server.health()["reloads_rejected"] == 1, what="the change to be refused")
    # A valid policy change beside it is not applied either: a change is taken whole or not at all.
    write(config_dir, "routing_policy.yaml", "strategy: rating\n")
    wait_until(lambda: server.health()["reloads_rejected"] == 2, what="the second change to be refused")
    health = server.health()
    assert health["generation"] == 1
    assert health["last_error"].startswith(f"{path}:3: field 'command': MCP server 'dead'")
    routed = server.api("POST", "/route", json={"capability": "echo", "payload": {}}).json()
    assert server.api("GET", f"/explain/{routed['task_id']}").json()["strategy"] == "weighted"
