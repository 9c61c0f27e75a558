"""Prometheus metrics for a router (the ``metrics`` extra: ``pip install agent-reach[metrics]``).

Per-reach figures (routing latency, match failures, retries, task dwell time) are counted as
reaches finish; per-agent figures (in flight, idle, breaker and state) are read from the catalog
when Prometheus scrapes, so they cost the hot path nothing.

Label values stay bounded: a capability no registered agent declares (a caller's typo, or a
flood of made-up names) is counted under one `UNKNOWN_CAPABILITY` label, never as a new series.
"""

from __future__ import annotations

from collections.abc import Iterator

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from middleware import ReachResult, ResultStatus
from reach_adapters.router.breaker import BreakerState
from reach_adapters.router.decisions import DecisionRecord
from reach_adapters.router.observe import Access
from reach_adapters.router.router import Router
from reach_adapters.router.state import UNUSABLE_STATES

__all__ = ["UNKNOWN_CAPABILITY", "ReachMetrics"]

UNKNOWN_CAPABILITY = "<unknown>"

_LATENCY_BUCKETS = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0)
_DWELL_BUCKETS = (0.0, 0.001, 0.01, 0.1, 0.5, 1.0, 5.0, 30.0)
_BREAKER_VALUE = {BreakerState.CLOSED: 0.0, BreakerState.HALF_OPEN: 1.0, BreakerState.OPEN: 2.0}


class ReachMetrics(Collector):
    """Registers itself as an observer of `router` and as a collector of `registry`."""

    def __init__(self, router: Router, registry: CollectorRegistry | None = None) -> None:
        self.router = router
        self.registry = registry or CollectorRegistry()
        self.routing_latency = Histogram(
            "reach_routing_latency_seconds",
            "Time from dispatch to the first delivery: selection and queueing.",
            ["mode"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.dwell = Histogram(
            "reach_task_dwell_seconds",
            "Time a task waited for a free agent before delivery.",
            buckets=_DWELL_BUCKETS,
            registry=self.registry,
        )
        self.reaches = Counter(
            "reach_reaches_total",
            "Finished reaches, with whose fault a failure was (caller, task, agent, router; '' when ok).",
            ["capability", "status", "served_by", "fault"],
            registry=self.registry,
        )
        # Each label set's child, looked up once: `labels()` validates and locks on every call,
        # about 2 % of a gateway's MCP call. Label sets are never removed, so none goes stale.
        self._latency: dict[str, Histogram] = {}
        self._reached: dict[tuple[str, str, str, str], Counter] = {}
        self.match_failures = Counter(
            "reach_match_failures_total",
            "Reaches for which no candidate could serve.",
            ["capability"],
            registry=self.registry,
        )
        self.retries = Counter(
            "reach_retries_total",
            "Deliveries after the first, per capability.",
            ["capability"],
            registry=self.registry,
        )
        self.accesses = Counter(
            "reach_accesses_total",
            "Resource reads, prompts and completions asked of upstream MCP servers for clients of "
            "the router's MCP server, by method, status (ok, error, rejected) and whose fault a "
            "failure was (caller, agent, router; '' when ok).",
            ["request", "status", "fault"],
            registry=self.registry,
        )
        self._declared: frozenset[str] = frozenset()
        self._refresh_declared()
        router.on_catalog_change(self._refresh_declared)
        self.registry.register(self)
        router.add_observer(self)

    def _refresh_declared(self) -> None:
        # On registration changes, not per reach: on_reach only looks the name up.
        self._declared = frozenset(self.router.declarations())

    def on_reach(self, record: DecisionRecord, result: ReachResult) -> None:
        capability = record.capability or ""
        if capability and capability not in self._declared:
            capability = UNKNOWN_CAPABILITY
        timings = result.timings
        mode = record.mode
        latency = self._latency.get(mode)
        if latency is None:
            latency = self._latency[mode] = self.routing_latency.labels(mode)
        latency.observe((timings.routing_ms + timings.queueing_ms) / 1000.0)
        self.dwell.observe(timings.queueing_ms / 1000.0)
        key = (capability, str(result.status), result.served_by, str(result.fault or ""))
        reached = self._reached.get(key)
        if reached is None:
            reached = self._reached[key] = self.reaches.labels(*key)
        reached.inc()
        if result.status is ResultStatus.NO_CANDIDATE:
            self.match_failures.labels(capability).inc()
        extra = len(record.attempts) - 1
        if extra > 0 and record.mode != "broadcast":
            self.retries.labels(capability).inc(extra)

    def on_access(self, access: Access) -> None:
        fault = "" if access.fault is None else access.fault.value
        self.accesses.labels(access.request, access.status, fault).inc()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        in_flight = GaugeMetricFamily(
            "reach_agent_in_flight", "Calls running on the agent.", labels=["agent_id"]
        )
        idle = GaugeMetricFamily(
            "reach_agent_idle", "1 when the agent is usable and has nothing in flight.", labels=["agent_id"]
        )
        breaker = GaugeMetricFamily(
            "reach_agent_breaker_state",
            "Circuit breaker: 0 closed, 1 half-open, 2 open.",
            labels=["agent_id"],
        )
        state = GaugeMetricFamily(
            "reach_agent_state", "1 for the agent's current state.", labels=["agent_id", "state"]
        )
        idle_rate = GaugeMetricFamily(
            "reach_agent_idle_rate", "Share of usable agents with nothing in flight."
        )
        usable = idle_count = 0
        for info in self.router.catalog():
            in_flight.add_metric([info.agent_id], info.in_flight)
            is_usable = info.state not in UNUSABLE_STATES
            is_idle = is_usable and info.in_flight == 0
            usable += is_usable
            idle_count += is_idle
            idle.add_metric([info.agent_id], float(is_idle))
            breaker.add_metric([info.agent_id], _BREAKER_VALUE[info.breaker])
            state.add_metric([info.agent_id, str(info.state)], 1.0)
        idle_rate.add_metric([], idle_count / usable if usable else 0.0)
        yield from (in_flight, idle, breaker, state, idle_rate)
