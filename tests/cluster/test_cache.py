"""The cluster cache's judgement of leases, on a clock the test sets (no Redis needed)."""

from __future__ import annotations

from reach_adapters.cluster import ClusterCache, LeaseRecord, lease_state
from reach_adapters.router import AgentState


def record(agent_id: str = "util:echo:01", node: str = "b", state: AgentState = AgentState.ONLINE) -> bytes:
    cap = {"name": "echo", "description": "", "input_schema": {"type": "object"}}
    return LeaseRecord(agent_id, node, state, "", 3000, (cap,)).dumps()


def test_a_lease_is_suspicious_once_its_renewal_is_a_period_late_then_it_ends() -> None:
    cache = ClusterCache("a")
    cache.observe(record(), 3000, now=100.0)  # just renewed: 3 s left, renewals every 1 s
    lease = cache.leases[("b", "util:echo:01")]
    assert lease_state(lease, 101.9)[0] is AgentState.ONLINE  # 1.1 s left: > TTL/3
    state, reason = lease_state(lease, 102.1)
    assert state is AgentState.SUSPICIOUS
    assert "node b" in reason
    cache.expire(102.9)
    assert ("b", "util:echo:01") in cache.leases
    cache.expire(103.0)
    assert cache.leases == {}
    assert cache.gone == {("b", "util:echo:01"): "lease of node b expired"}


def test_what_another_node_cannot_serve_for_us_shows_offline_here() -> None:
    cache = ClusterCache("a")
    cache.observe(record(state=AgentState.DRAINING), 3000, now=0.0)
    assert lease_state(cache.leases[("b", "util:echo:01")], 0.0) == (AgentState.OFFLINE, "draining on node b")


def test_own_records_and_malformed_ones_are_left_out() -> None:
    cache = ClusterCache("a")
    cache.observe(record(node="a"), 3000, now=0.0)
    cache.observe(b'{"agent_id": 1}', 3000, now=0.0)
    assert cache.leases == {}


def test_a_resync_drops_only_leases_it_should_have_seen() -> None:
    cache = ClusterCache("a")
    cache.observe(record("util:echo:old"), 3000, now=0.0)
    cache.observe(record("util:echo:new"), 3000, now=5.0)  # announced while the resync ran
    cache.resynced(set(), started=4.0)
    assert set(cache.leases) == {("b", "util:echo:new")}
    assert set(cache.gone) == {("b", "util:echo:old")}


def test_two_nodes_hosting_one_agent_id_hold_two_leases_and_one_ending_leaves_the_other() -> None:
    cache = ClusterCache("a")
    cache.observe(record(node="b"), 3000, now=0.0)
    cache.observe(record(node="c"), 3000, now=0.0)
    assert set(cache.leases) == {("b", "util:echo:01"), ("c", "util:echo:01")}
    cache.forget("util:echo:01", "b", "deregistered on node b")
    assert set(cache.leases) == {("c", "util:echo:01")}
    assert cache.gone == {("b", "util:echo:01"): "deregistered on node b"}
