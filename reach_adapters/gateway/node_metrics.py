"""``reach_cluster_*`` metrics of a gateway that is a node of a cluster: what the node counts
(`NodeStats`) and the agents it lists, by node and state; every series labelled with a node id."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from typing import TYPE_CHECKING, Literal

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

from reach_adapters.router.router import Router

if TYPE_CHECKING:
    from reach_adapters.cluster import ClusterNode

__all__ = ["STATS_METRICS", "node_metrics"]

# NodeStats field -> (metric kind, help). Counters gain `_total` in the exposition.
STATS_METRICS: dict[str, tuple[Literal["counter", "gauge"], str]] = {
    "lease_renewals": ("counter", "Renewals of this node's leases written to Redis."),
    "lease_renewal_failures": ("counter", "Renewals of this node's leases Redis did not take."),
    "remote_calls_sent": ("counter", "Calls this node sent to agents on other nodes."),
    "remote_calls_served": ("counter", "Calls from other nodes this node's agents served."),
    "remote_calls_failed": ("counter", "Calls to other nodes that ended without their answer."),
    "remote_calls_cancelled": (
        "counter",
        "Calls to other nodes given up (cancelled or past their deadline).",
    ),
    "tasks_run": ("counter", "Async tasks of the cluster's queue this node ran."),
    "tasks_reclaimed": ("counter", "Async tasks this node took over from a node that went silent."),
    "tasks_redelivered": ("counter", "Reclaimed async tasks run again (safe to repeat)."),
    "tasks_outcome_unknown": (
        "counter",
        "Reclaimed async tasks ended as outcome unknown (not safe to repeat).",
    ),
    "tasks_dead_lettered": ("counter", "Async tasks this node gave up on after too many deliveries."),
    "queue_depth": ("gauge", "Entries in the cluster's async task stream, as last seen by this node."),
    "dead_letters_kept": ("gauge", "Entries in the cluster's dead-letter stream, as last seen by this node."),
}


def node_metrics(node: ClusterNode, router: Router) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    """The families of `node`, read when scraped."""
    labels = [node.node_id]
    for field, (kind, help_text) in STATS_METRICS.items():
        family = CounterMetricFamily if kind == "counter" else GaugeMetricFamily
        metric = family(f"reach_cluster_{field}", help_text, labels=["node"])
        metric.add_metric(labels, getattr(node.stats, field))
        yield metric
    listed = Counter((info.node or node.node_id, info.state.value) for info in router.catalog())
    agents = GaugeMetricFamily(
        "reach_cluster_agents",
        "Agents this node lists, by the node hosting them and state.",
        labels=["node", "state"],
    )
    for (host, state), count in sorted(listed.items()):
        agents.add_metric([host, state], count)
    yield agents
