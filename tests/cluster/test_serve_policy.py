"""`reach serve` joins the cluster named by ``registry:`` in its policy file, with no flag; each
flag given wins over its field; its /metrics shows the node's ``reach_cluster_*`` series."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import httpx
import redis

from reach_adapters.cluster import LeaseRecord
from tests.cluster.test_serve import catalog, node_dir
from tests.gateway.conftest import ECHO, SHOUT, ReachServer, write
from tests.waiting import wait_until

Serve = Callable[..., ReachServer]


def registry(url: str, prefix: str, node_id: str) -> str:
    return f"registry:\n  url: {url}\n  node_id: {node_id}\n  lease_ttl_s: 1.2\n  prefix: '{prefix}'\n"


def leases(url: str, prefix: str) -> dict[str, LeaseRecord]:
    """Every lease under `prefix`, by agent id, read from Redis itself."""
    with redis.Redis.from_url(url) as client:
        records = [
            LeaseRecord.loads(raw) for key in client.scan_iter(f"{prefix}lease:*") if (raw := client.get(key))
        ]
    return {record.agent_id: record for record in records}


def lease(url: str, prefix: str, agent_id: str) -> LeaseRecord:
    """The lease of `agent_id`, waited for: with a 1.2 s time to live, a renewal a loaded machine
    runs late lets it lapse for a moment before the node writes it again."""
    wait_until(lambda: agent_id in leases(url, prefix), timeout=10, what=f"the lease of {agent_id}")
    return leases(url, prefix)[agent_id]


def test_a_node_joins_through_its_policy_file_and_flags_win(
    serve: Serve, tmp_path: Path, redis_url: str, prefix: str
) -> None:
    a_dir = node_dir(tmp_path, "a", "util:echo:01", ECHO)
    write(a_dir, "routing_policy.yaml", registry(redis_url, prefix, "from-file-a"))
    a = serve(a_dir)
    assert "node from-file-a joined the cluster" in a.log.read_text()
    echo = lease(redis_url, prefix, "util:echo:01")
    assert (echo.node, echo.ttl_ms) == ("from-file-a", 1200)
    b_dir = node_dir(tmp_path, "b", "util:shout:01", SHOUT)
    write(b_dir, "routing_policy.yaml", registry("redis://127.0.0.1:1/0", prefix, "from-file-b"))
    # The flags win over the file's url, node_id and lease_ttl_s; its prefix still applies.
    b = serve(b_dir, "--registry", redis_url, "--node-id", "flag-b", "--lease-ttl", "3")
    shout = lease(redis_url, prefix, "util:shout:01")
    assert (shout.node, shout.ttl_ms) == ("flag-b", 3000)
    wait_until(lambda: "util:shout:01" in catalog(a), timeout=10, what="node b's agent listed on node a")
    assert catalog(b)["util:echo:01"]["node"] == "from-file-a"

    metrics = httpx.get(f"{a.url}/metrics", timeout=30).text
    assert 'reach_cluster_agents{node="from-file-a",state="online"} 1.0' in metrics
    assert 'reach_cluster_agents{node="flag-b",state="online"} 1.0' in metrics
    renewals = re.search(r'reach_cluster_lease_renewals_total\{node="from-file-a"\} (\d+)', metrics)
    assert renewals is not None
    assert int(renewals.group(1)) >= 1
