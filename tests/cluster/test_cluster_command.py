"""`reach cluster` reads a real redis-server: the nodes two joined routers lease their agents under
(and a lease written in the per-node key layout), the async task queue and its dead letters; and
it fails in one line for a malformed URL or a Redis that does not answer."""

from __future__ import annotations

import asyncio
import json
import sys
from collections.abc import AsyncIterator

import pytest
import redis.asyncio as redis

from reach_adapters import FunctionAgent, Router
from reach_adapters.cli.app import main
from reach_adapters.cli.codes import EXIT_OK, EXIT_UNAVAILABLE, EXIT_USAGE
from reach_adapters.cluster import ClusterNode, Keys, LeaseRecord
from reach_adapters.cluster.survey import survey
from reach_adapters.router import AgentState
from tests.gateway.conftest import ROOT
from tests.redis_server import free_port

TTL = 1.2


def echo(text: str) -> str:
    """Say it back."""
    return text


@pytest.fixture
async def two_nodes(redis_url: str, prefix: str) -> AsyncIterator[None]:
    routers = [Router(), Router()]
    routers[0].register(FunctionAgent(echo, agent_id="util:echo:01"))
    routers[0].register(FunctionAgent(echo, agent_id="util:echo:02"))
    routers[1].register(FunctionAgent(echo, agent_id="util:echo:03"))
    nodes = [
        # No task workers: the test writes the queue itself, and none may take its entries.
        await ClusterNode.join(
            router, redis_url, node_id=f"n{i}", lease_ttl_s=TTL, prefix=prefix, tasks=False
        )
        for i, router in enumerate(routers, 1)
    ]
    try:
        yield
    finally:
        for node in nodes:
            await node.aclose()
        for router in routers:
            await router.aclose()


async def test_the_nodes_their_leases_and_the_task_queue(
    two_nodes: None, redis_url: str, prefix: str
) -> None:
    keys = Keys(prefix)
    assert (await survey(redis_url, prefix=prefix)).queue is None
    client = redis.Redis.from_url(redis_url)
    try:
        # The per-node key layout ({prefix}lease:NODE:AGENT) reads the same: by the record's node.
        record = LeaseRecord("util:late:01", "n3", AgentState.BUSY, "", 60_000, ())
        await client.set(f"{prefix}lease:n3:util:late:01", record.dumps(), px=60_000)
        await client.xgroup_create(keys.task_queue, keys.task_group, id="0", mkstream=True)
        await client.xadd(keys.task_queue, {"task_id": "t1"})
        await client.xadd(keys.task_queue, {"task_id": "t2"})
        await client.xreadgroup(keys.task_group, "n1", {keys.task_queue: ">"}, count=1)
        await client.xadd(keys.dead_letters, {"task_id": "t0"})
    finally:
        await client.aclose()
    found = await survey(redis_url, prefix=prefix)
    nodes = {node.node_id: node for node in found.nodes}
    assert list(nodes) == ["n1", "n2", "n3"]
    assert [a.record.agent_id for a in nodes["n1"].agents] == ["util:echo:01", "util:echo:02"]
    assert nodes["n1"].states == {"online": 2}
    assert nodes["n3"].states == {"busy": 1}
    assert 0 < nodes["n2"].left_ms <= TTL * 1000
    assert 0 <= nodes["n2"].renewed_ms_ago < TTL * 1000
    assert found.queue is not None
    assert (found.queue.length, found.queue.pending, found.queue.lag, found.queue.dead_letters) == (
        2,
        1,
        1,
        1,
    )
    assert found.queue.consumers == 1


async def reach_cluster(*args: str) -> str:
    """``reach cluster ARGS`` as a subprocess, so that this loop keeps renewing the leases meanwhile."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "reach_adapters.cli", "cluster", *args,
        cwd=ROOT, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    async with asyncio.timeout(60):
        out, err = await process.communicate()
    assert process.returncode == EXIT_OK, err.decode()
    return out.decode()


async def test_the_command_prints_them(two_nodes: None, redis_url: str, prefix: str) -> None:
    text = await reach_cluster("--registry", redis_url, "--prefix", prefix)
    assert f"cluster at {redis_url} (prefix {prefix}): 2 node(s), 3 agent(s)" in text
    assert "n1    2       online 2" in text
    assert "util:echo:03  n2    online" in text
    assert "task queue" not in text
    report = json.loads(await reach_cluster("--registry", redis_url, "--prefix", prefix, "--json"))
    assert [node["node"] for node in report["nodes"]] == ["n1", "n2"]
    assert report["nodes"][1]["agents"][0]["agent_id"] == "util:echo:03"
    assert report["task_queue"] is None


def test_an_empty_cluster(redis_url: str, prefix: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cluster", "--registry", redis_url, "--prefix", prefix]) == EXIT_OK
    assert capsys.readouterr().out.strip() == f"no nodes in the cluster at {redis_url} (prefix {prefix})"


@pytest.mark.parametrize(
    ("url", "code", "says"),
    [
        (
            "http://127.0.0.1:6379/0",
            EXIT_USAGE,
            "--registry 'http://127.0.0.1:6379/0': Redis URL must specify",
        ),
        (
            "redis://127.0.0.1:{free_port}/0",
            EXIT_UNAVAILABLE,
            "cannot reach the cluster registry at redis://",
        ),
    ],
)
def test_a_bad_url_or_no_redis_is_one_line(
    url: str, code: int, says: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # A port nobody listens on, picked when the test runs (ids must match across xdist workers).
    url = url.format(free_port=free_port())
    assert main(["cluster", "--registry", url, "--timeout", "2"]) == code
    err = capsys.readouterr().err
    assert err.count("\n") == 1
    assert err.startswith("reach cluster: error: ")
    assert says in err
