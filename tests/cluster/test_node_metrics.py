"""/metrics of a gateway that is a node: every `NodeStats` counter labelled with the node id, and
the agents listed per hosting node and state (two routers joined to a real redis-server)."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

from reach_adapters import FunctionAgent, Router
from reach_adapters.cluster import ClusterNode, NodeStats
from reach_adapters.gateway import Gateway
from reach_adapters.gateway.metrics import GatewayMetrics
from reach_adapters.gateway.node_metrics import STATS_METRICS
from tests.gateway.conftest import ECHO, write
from tests.waiting import eventually


def shout(text: str) -> str:
    """Say it loudly."""
    return text.upper()


def test_every_node_stat_is_a_metric() -> None:
    assert set(STATS_METRICS) == {field.name for field in dataclasses.fields(NodeStats)}


async def test_metrics_of_a_node(tmp_path: Path, redis_url: str, prefix: str) -> None:
    write(tmp_path, "util:echo:01.yaml", ECHO)
    other = Router()
    other.register(FunctionAgent(shout, agent_id="util:shout:01"))
    async with await Gateway.start(tmp_path) as gateway:
        gateway.node = await ClusterNode.join(
            gateway.router, redis_url, node_id="n1", lease_ttl_s=1.2, prefix=prefix
        )
        node2 = await ClusterNode.join(other, redis_url, node_id="n2", lease_ttl_s=1.2, prefix=prefix)
        try:
            metrics = GatewayMetrics(gateway)
            stats = gateway.node.stats
            stats.tasks_reclaimed = 2
            stats.queue_depth, stats.dead_letters_kept = 5, 1
            await eventually(lambda: "util:shout:01" in gateway.router, timeout=10, what="n2's agent on n1")
            node = gateway.node
            await eventually(lambda: node.stats.lease_renewals >= 1, timeout=10, what="a lease renewal")
            text = metrics.render().decode()
        finally:
            await node2.aclose()
            await gateway.node.aclose()
            await other.aclose()
    renewals = re.search(r'reach_cluster_lease_renewals_total\{node="n1"\} (\d+)', text)
    assert renewals is not None
    assert int(renewals.group(1)) >= 1
    assert 'reach_cluster_tasks_reclaimed_total{node="n1"} 2.0' in text
    assert 'reach_cluster_tasks_dead_lettered_total{node="n1"} 0.0' in text
    assert 'reach_cluster_queue_depth{node="n1"} 5.0' in text
    assert 'reach_cluster_dead_letters_kept{node="n1"} 1.0' in text
    assert 'reach_cluster_agents{node="n1",state="online"} 1.0' in text
    assert 'reach_cluster_agents{node="n2",state="online"} 1.0' in text
