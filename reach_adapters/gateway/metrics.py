"""Prometheus metrics of a gateway: the router's (`ReachMetrics`) plus the config's generation,
the async tasks queued and running, and, on a node of a cluster, the node's (`node_metrics`)."""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from reach_adapters.gateway.gateway import Gateway
from reach_adapters.gateway.node_metrics import node_metrics
from reach_adapters.observability.metrics import ReachMetrics

__all__ = ["GatewayMetrics"]


class GatewayMetrics(Collector):
    """Needs the ``metrics`` extra; counts every reach from the moment it is made."""

    content_type = CONTENT_TYPE_LATEST

    def __init__(self, gateway: Gateway) -> None:
        self.gateway = gateway
        self.reach = ReachMetrics(gateway.router)
        self.reach.registry.register(self)

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        # Read when scraped, so reloading costs nothing extra.
        yield GaugeMetricFamily(
            "reach_config_generation",
            "Configs applied since start, the first included.",
            self.gateway.generation,
        )
        reloads = CounterMetricFamily(
            "reach_config_reloads", "Config changes seen, by outcome.", labels=["outcome"]
        )
        reloads.add_metric(["applied"], self.gateway.reloads_applied)
        reloads.add_metric(["rejected"], self.gateway.reloads_rejected)
        yield reloads
        tasks = GaugeMetricFamily("reach_tasks", "Async tasks of this process, by state.", labels=["state"])
        runner = self.gateway.router.async_tasks
        tasks.add_metric(["queued"], runner.queued)
        tasks.add_metric(["running"], runner.running)
        yield tasks
        yield GaugeMetricFamily(
            "reach_deferred_waiting",
            "Calls and async tasks waiting for a capable agent (defer=True) in this process.",
            self.gateway.router.deferred_waiting,
        )
        if self.gateway.node is not None:
            yield from node_metrics(self.gateway.node, self.gateway.router)

    def render(self) -> bytes:
        """The Prometheus text exposition of every metric."""
        return generate_latest(self.reach.registry)
