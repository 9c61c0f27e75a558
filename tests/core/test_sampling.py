"""Selection among many replicas of one capability: a random sample is screened and scored
(`RoutingPolicy.sample_above`, `sample_size`), with the exclusions, failover, refusals and
records of the exact path; sets up to `sample_above` are ranked whole, as before."""

from __future__ import annotations

import asyncio
from collections import Counter

import pytest

from middleware import ResultStatus
from reach_adapters import AgentBusyError, AgentState, InvalidPolicyError, Router, RoutingPolicy
from reach_adapters.router import ExclusionKind
from reach_adapters.security.guard import SecurityGuard
from reach_adapters.security.spec import SecuritySpec
from tests.core.conftest import FAST, Gate, Handled, echo_agent, failing_agent

pytestmark = pytest.mark.timeout(60)

# Directed calls that open a breaker at once: one attempt each, no waiting between.
ONE_TRY = FAST.model_copy(update={"max_retries": 0})


def spread(kind: str, i: int, prefix: str = "ns") -> str:
    """A replica's id: namespaces of 100 replicas each keep registering a thousand quick (each
    newcomer's schemas are compared with those of its namespace's replicas)."""
    return f"{prefix}{i // 100}:{kind}:{i}"


def replicas(router: Router, count: int, prefix: str = "ns", start: int = 0) -> list[str]:
    ids = [spread("work", i, prefix) for i in range(start, start + count)]
    for agent_id in ids:
        router.register(echo_agent(agent_id, "work"))
    return ids


async def quarantine(router: Router, count: int, start: int = 0) -> list[str]:
    """`count` replicas whose circuits are open: each failed twice in a row on a directed call."""
    ids = [spread("flaky", i) for i in range(start, start + count)]
    for agent_id in ids:
        router.register(failing_agent(agent_id, ConnectionError("down"), "work"))
        for _ in range(2):
            await router.send(agent_id, {}, capability="work")
    open_for = {info.agent_id: info.quarantined_for_s for info in router.catalog()}
    assert all(open_for[agent_id] > 0 for agent_id in ids)
    return ids


async def test_among_a_thousand_replicas_only_usable_ones_serve_and_the_record_says_it_sampled() -> None:
    router = Router(ONE_TRY)
    usable = set(replicas(router, 100))
    offline = [Handled(spread("gone", i), "work") for i in range(100, 600)]
    for agent in offline:
        router.register(agent)
        agent.handle.set_state(AgentState.OFFLINE, "stopped")
    quarantined = set(await quarantine(router, 200, start=600))
    gates = [Gate(spread("full", i), max_concurrency=1, timeout_ms=20_000) for i in range(800, 1000)]
    for gate in gates:
        router.register(gate.agent)
    holds = [asyncio.create_task(router.send(gate.agent.agent_id, "hold")) for gate in gates]
    while sum(gate.running for gate in gates) < len(gates):
        await asyncio.sleep(0.01)
    assert len(router.catalog()) == 1000

    sampled = 0
    for _ in range(200):
        result = await router.route("work", {})
        assert result.ok, result.error
        assert result.agent_id in usable
        record = router.explain(result.task_id)
        assert {c.agent_id for c in record.candidates} <= usable
        if record.sampled_from is not None:
            sampled += 1
            assert record.sampled_from == 1000
            assert 1 <= len(record.candidates) <= 8
            kinds = {e.kind for e in record.exclusions}
            assert kinds <= {ExclusionKind.STATE, ExclusionKind.CIRCUIT, ExclusionKind.SATURATED}
            # Only the agents drawn are recorded, not the 900 that could not serve.
            assert len(record.exclusions) < 32
    # A draw of 32 misses every usable replica about 3 % of the time; those calls screen all.
    assert sampled > 150
    # No call went to a quarantined replica: each has only the two that opened its circuit.
    calls = {info.agent_id: info.calls for info in router.catalog()}
    assert all(calls[agent_id] == 2 for agent_id in quarantined)
    for gate in gates:
        gate.release.set()
    await asyncio.gather(*holds)


async def test_retries_go_to_distinct_candidates_of_the_sample() -> None:
    router = Router(FAST.model_copy(update={"max_retries": 3}))
    for i in range(1000):
        router.register(failing_agent(spread("work", i), AgentBusyError("full"), "work"))
    result = await router.route("work", {})
    assert result.status is not ResultStatus.OK
    record = router.explain(result.task_id)
    assert record.sampled_from == 1000
    tried = [attempt.agent_id for attempt in record.attempts]
    assert len(tried) == 4
    assert len(set(tried)) == 4
    assert set(tried) <= {c.agent_id for c in record.candidates}


async def test_calls_spread_across_all_the_replicas() -> None:
    router = Router()
    replicas(router, 1000)
    served: Counter[str | None] = Counter()
    for _ in range(3000):
        result = await router.route("work", {})
        assert result.ok
        served[result.agent_id] += 1
    # Uniform over 1,000 idle replicas: about 950 are reached in 3,000 calls, none often.
    assert len(served) > 800
    assert max(served.values()) < 20


async def test_up_to_sample_above_every_candidate_is_ranked_and_above_it_a_sample() -> None:
    router = Router()
    replicas(router, 32)
    whole = router.explain((await router.route("work", {})).task_id)
    assert whole.sampled_from is None
    assert len(whole.candidates) == 32
    replicas(router, 1, start=32)
    drawn = router.explain((await router.route("work", {})).task_id)
    assert drawn.sampled_from == 33
    assert len(drawn.candidates) == 8

    router.update_policy(RoutingPolicy(sample_above=2000, sample_size=4))
    replicas(router, 967, start=33)
    everyone = router.explain((await router.route("work", {})).task_id)
    assert (everyone.sampled_from, len(everyone.candidates)) == (None, 1000)
    router.update_policy(RoutingPolicy(sample_above=100, sample_size=4))
    few = router.explain((await router.route("work", {})).task_id)
    assert (few.sampled_from, len(few.candidates)) == (1000, 4)


async def test_sample_size_above_sample_above_is_refused() -> None:
    with pytest.raises(InvalidPolicyError, match="sample_size 40 is above sample_above 32"):
        RoutingPolicy(sample_size=40)


async def test_why_not_says_an_agent_was_not_drawn() -> None:
    router = Router()
    ids = replicas(router, 1000)
    result = await router.route("work", {})
    record = router.explain(result.task_id)
    seen = {c.agent_id for c in record.candidates}
    absent = next(agent_id for agent_id in ids if agent_id not in seen)
    answer = record.why_not(absent)
    assert answer.startswith(f"{absent} was not drawn: the task had 1000 candidates")
    assert "8 usable ones it drew at random" in answer
    assert record.why_not(result.agent_id or "").endswith("was chosen")
    assert record.to_dict()["sampled_from"] == 1000


async def test_when_the_draw_finds_none_usable_all_are_screened_as_before() -> None:
    router = Router(ONE_TRY)
    await quarantine(router, 40)
    result = await router.route("work", {})
    # Only open circuits stand in the way: the last candidates serve anyway (and fail here).
    assert result.error_type == "ConnectionError"
    record = router.explain(result.task_id)
    assert record.sampled_from is None
    assert [e.kind for e in record.exclusions].count(ExclusionKind.LAST_CANDIDATE) == 40

    full = Router(ONE_TRY)
    gates = [Gate(spread("full", i), max_concurrency=1, timeout_ms=20_000) for i in range(40)]
    for gate in gates:
        full.register(gate.agent)
    holds = [asyncio.create_task(full.send(gate.agent.agent_id, "hold")) for gate in gates]
    while sum(gate.running for gate in gates) < len(gates):
        await asyncio.sleep(0.01)
    late = await full.route("work", "late", timeout_ms=100)
    # Every replica saturated: the call waited for capacity, exactly as with a few.
    assert late.status is ResultStatus.TIMEOUT
    assert "waited" in (late.error or "")
    gates[0].release.set()
    served = await full.route("work", "next", timeout_ms=5000)
    assert served.ok
    for gate in gates:
        gate.release.set()
    await asyncio.gather(*holds)


async def test_broadcast_reaches_every_replica() -> None:
    router = Router()
    ids = replicas(router, 40)
    result = await router.broadcast("work", {})
    assert result.ok
    assert {r.agent_id for r in result.results or []} == set(ids)


async def test_a_principal_gets_only_the_replicas_it_may_reach() -> None:
    spec = SecuritySpec.model_validate({"principals": {"outside": {"allow": {"namespaces": ["public0"]}}}})
    router = Router(guard=SecurityGuard(spec))
    public = set(replicas(router, 100, prefix="public"))
    replicas(router, 900, prefix="internal", start=100)
    for _ in range(100):
        result = await router.route("work", {}, principal="outside")
        assert result.agent_id in public
        record = router.explain(result.task_id)
        assert {c.agent_id for c in record.candidates} <= public
        assert "internal" not in str(record.to_dict())


async def test_rating_turns_over_samples_follow_the_ratings() -> None:
    router = Router()
    ids = replicas(router, 200)
    served: Counter[str | None] = Counter()
    for _ in range(2000):
        result = await router.route("work", {}, strategy="rating")
        assert result.ok
        served[result.agent_id] += 1
    # Equal ratings: turns spread over every replica, none taking many more than its share of 10.
    assert len(served) > 180
    assert max(served.values()) < 30
    assert set(served) <= set(ids)
