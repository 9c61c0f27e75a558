"""Two `reach serve --registry` processes on one real redis-server: each lists the other's agents
with their node over HTTP, the CLI and MCP; a node frozen past its lease is dropped and comes back
(drill c)."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path
from typing import Any

from mcp import Client

from tests.gateway.conftest import ECHO, SHOUT, ReachServer, run_reach, write
from tests.redis_server import RedisServer
from tests.waiting import wait_until

Serve = Callable[..., ReachServer]


def catalog(server: ReachServer) -> dict[str, dict[str, Any]]:
    return {agent["agent_id"]: agent for agent in server.api("GET", "/catalog").json()}


def node_dir(tmp_path: Path, name: str, agent_id: str, text: str) -> Path:
    directory = tmp_path / name
    directory.mkdir()
    write(directory, f"{agent_id}.yaml", text)
    return directory


def start_pair(
    serve: Serve, tmp_path: Path, redis_server: RedisServer, ttl: str
) -> tuple[ReachServer, ReachServer]:
    flags = ("--registry", redis_server.url, "--lease-ttl", ttl)
    a = serve(node_dir(tmp_path, "a", "util:echo:01", ECHO), *flags, "--node-id", "node-a")
    b = serve(node_dir(tmp_path, "b", "util:shout:01", SHOUT), *flags, "--node-id", "node-b")
    wait_until(lambda: "util:shout:01" in catalog(a), timeout=20, what="node B's agent listed on node A")
    return a, b


async def test_each_node_lists_every_agent_with_its_node(
    serve: Serve, tmp_path: Path, redis_server: RedisServer
) -> None:
    a, b = start_pair(serve, tmp_path, redis_server, "15")
    shown = catalog(a)
    assert shown["util:shout:01"]["node"] == "node-b"
    assert shown["util:echo:01"]["node"] == "node-a"
    assert catalog(b)["util:echo:01"]["node"] == "node-a"
    listed = run_reach("catalog", "--url", a.url)
    assert listed.returncode == 0, listed.stderr
    assert "node-b" in listed.stdout
    async with Client(a.mcp_url) as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == {"echo", "shout"}
    assert "node node-a joined the cluster" in a.log.read_text()
    # Stopping B deletes its leases: A drops its agent long before a 15 s lease would end.
    assert b.terminate() == 0
    wait_until(lambda: "util:shout:01" not in catalog(a), timeout=10, what="node B's agent unlisted")


def test_a_node_frozen_past_its_lease_goes_suspicious_then_offline_and_comes_back(
    serve: Serve, tmp_path: Path, redis_server: RedisServer
) -> None:
    a, b = start_pair(serve, tmp_path, redis_server, "1.5")
    os.kill(b.process.pid, signal.SIGSTOP)
    try:
        wait_until(
            lambda: catalog(a).get("util:shout:01", {}).get("state") == "suspicious",
            timeout=20,
            what="node B's agent SUSPICIOUS on node A",
        )
        wait_until(lambda: "util:shout:01" not in catalog(a), timeout=20, what="node B's agent dropped")
    finally:
        os.kill(b.process.pid, signal.SIGCONT)
    wait_until(
        lambda: catalog(a).get("util:shout:01", {}).get("state") == "online",
        timeout=20,
        what="node B's agent back on node A after SIGCONT",
    )
    assert catalog(a)["util:shout:01"]["node"] == "node-b"


def test_a_node_calls_over_its_http_api_a_capability_hosted_only_on_another(
    serve: Serve, tmp_path: Path, redis_server: RedisServer
) -> None:
    a, _ = start_pair(serve, tmp_path, redis_server, "15")
    routed = a.api("POST", "/route", json={"capability": "shout", "payload": {"text": "hi"}}).json()
    assert (routed["status"], routed["payload"], routed["agent_id"]) == ("ok", "HI", "util:shout:01")
    served_there = catalog(a)["util:shout:01"]
    assert served_there["node"] == "node-b"
