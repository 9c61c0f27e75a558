"""Ratings from feedback: feedback moves them, time decays them back, routing follows them."""

from __future__ import annotations

import math
from collections import Counter
from typing import Any

import pytest

from reach_adapters import (
    Capability,
    FunctionAgent,
    InvalidFeedbackError,
    Router,
    RoutingPolicy,
    TaskAlreadyRatedError,
    UnknownAgentError,
    UnknownTaskError,
)
from reach_adapters.security.guard import SecurityGuard
from reach_adapters.security.spec import SecuritySpec
from tests.consensus.voters import CAPITAL, chat_voter, lambda_voter

pytestmark = pytest.mark.timeout(60)

WORK = Capability(name="work")
FRANCE = {"country": "France"}


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def worker(agent_id: str) -> FunctionAgent:
    return FunctionAgent(lambda: agent_id, agent_id=agent_id, capabilities=[WORK])


def rating(router: Router, agent_id: str, capability: str = "work") -> float:
    info = next(entry for entry in router.catalog() if entry.agent_id == agent_id)
    return info.ratings[capability]


async def test_feedback_moves_the_serving_agents_rating_for_that_capability_only() -> None:
    async with Router() as router:
        router.register(
            FunctionAgent(lambda: "done", agent_id="team:a:01", capabilities=[WORK, Capability(name="other")])
        )
        result = await router.route("work")

        feedback = await router.feedback(result.task_id, 0.0, reason="the work was wrong")

        alpha = router.policy.ratings.alpha
        assert feedback.capability == "work"
        assert feedback.reason == "the work was wrong"
        assert [(r.agent_id, r.before, r.after) for r in feedback.rated] == [("team:a:01", 1.0, 1.0 - alpha)]
        assert rating(router, "team:a:01") == pytest.approx(1.0 - alpha)
        assert rating(router, "team:a:01", "other") == 1.0
        # The next decision record shows the rating in the score breakdown.
        again = await router.route("work")
        (scored,) = router.explain(again.task_id).candidates
        assert scored.breakdown["rating"] == pytest.approx(1.0 - alpha)
        weights = router.policy.weights
        assert scored.breakdown["health"] == pytest.approx(weights.health * (1.0 - alpha))


async def test_a_rating_decays_back_to_the_declared_weight_with_its_half_life() -> None:
    async with Router(RoutingPolicy(ratings={"alpha": 0.5, "half_life_s": 60.0})) as router:
        clock = Clock()
        router.ratings.clock = clock
        router.register(worker("team:a:01"))
        first = await router.route("work")
        await router.feedback(first.task_id, 0.0)
        assert rating(router, "team:a:01") == pytest.approx(0.5)

        clock.now += 60.0
        assert rating(router, "team:a:01") == pytest.approx(0.75)
        clock.now += 120.0
        assert rating(router, "team:a:01") == pytest.approx(1.0 - 0.5 / 8)
        # Feedback starts from the decayed rating.
        second = await router.route("work")
        (change,) = (await router.feedback(second.task_id, 0.0)).rated
        assert change.before == pytest.approx(1.0 - 0.5 / 8, abs=1e-4)
        assert change.after == pytest.approx((1.0 - 0.5 / 8) / 2, abs=1e-4)
        clock.now += 60.0 * 40
        assert rating(router, "team:a:01") == 1.0
        assert len(router.ratings) == 0
        assert router.ratings.rated is False


async def test_a_router_that_never_rated_anyone_says_so_with_a_flag() -> None:
    # The strategies read the flag on every rank, instead of counting the table.
    async with Router() as router:
        router.register(worker("team:a:01"))
        done = await router.route("work")
        assert router.ratings.rated is False
        await router.feedback(done.task_id, 0.5)
        assert router.ratings.rated is True


async def test_feedback_shifts_the_share_of_traffic_under_the_rating_strategy() -> None:
    async with Router(RoutingPolicy(strategy="rating")) as router:
        router.register(worker("team:good:01"))
        router.register(worker("team:bad:01"))
        first = [await router.route("work") for _ in range(100)]
        before = Counter(result.agent_id for result in first)
        for result in first:
            # The callers are unhappy with one agent's work and happy with the other's.
            await router.feedback(result.task_id, 0.0 if result.agent_id == "team:bad:01" else 1.0)
        after = Counter([(await router.route("work")).agent_id for _ in range(100)])

        # Smooth weighted round robin on equal ratings alternates: half each at first.
        assert before["team:bad:01"] == 50
        assert after["team:bad:01"] <= 10
        assert after["team:good:01"] >= 90
        bad = rating(router, "team:bad:01")
        assert bad < 0.2
        # The record explains the turn in terms of the ratings.
        record = router.explain(router.recent_decisions(1)[0].task_id)
        shown = {scored.agent_id: scored.breakdown["rating"] for scored in record.candidates}
        assert shown["team:bad:01"] == pytest.approx(bad, abs=1e-3)


async def test_bad_feedback_moves_the_weighted_strategys_traffic_to_the_other_replica() -> None:
    async with Router() as router:
        router.register(worker("team:a:01"))
        router.register(worker("team:b:01"))
        served: Counter[str] = Counter()
        for _ in range(100):
            result = await router.route("work")
            served[result.agent_id or ""] += 1
        # Equal scores break ties at random: both serve.
        assert served["team:a:01"] > 10
        assert served["team:b:01"] > 10
        await router.feedback(
            next(r.task_id for r in router.recent_decisions(100) if r.chosen == "team:b:01"), 0.0
        )
        later = Counter([(await router.route("work")).agent_id for _ in range(100)])
        assert later == Counter({"team:a:01": 100})


async def test_an_output_that_breaks_its_schema_rates_the_agent_down_at_once() -> None:
    counted = Capability(name="count", output_schema={"type": "integer"}, read_only=True)
    async with Router(RoutingPolicy(backoff_ms=0.0, jitter_ms=0.0)) as router:
        router.register(FunctionAgent(lambda: "seven", agent_id="team:sloppy:01", capabilities=[counted]))
        router.register(FunctionAgent(lambda: 7, agent_id="team:exact:01", capabilities=[counted]))
        for _ in range(20):
            result = await router.route("count")
            assert result.payload == 7
            if rating(router, "team:sloppy:01", "count") < 1.0:
                break
        assert rating(router, "team:sloppy:01", "count") == pytest.approx(1.0 - router.policy.ratings.alpha)
        assert rating(router, "team:exact:01", "count") == 1.0


async def test_feedback_on_a_consensus_rates_every_agreeing_voter() -> None:
    async with Router() as router:
        router.register(lambda_voter())
        router.register(chat_voter())
        router.register(lambda_voter("geo:wrong:01", answer="Lyon"))
        result = await router.consensus("capital", FRANCE, n=3, quorum=2)
        dissent = rating(router, "geo:wrong:01", "capital")
        assert dissent < 1.0

        feedback = await router.feedback(result.task_id, 0.5)

        assert sorted(change.agent_id for change in feedback.rated) == ["geo:chat:01", "geo:lambda:01"]
        assert rating(router, "geo:chat:01", "capital") < 1.0
        assert rating(router, "geo:wrong:01", "capital") == dissent


@pytest.mark.parametrize("score", [1.5, -0.1, "good", True, None, math.nan, math.inf])
async def test_a_score_that_is_not_a_number_from_0_to_1_is_refused(score: Any) -> None:
    async with Router() as router:
        router.register(worker("team:a:01"))
        result = await router.route("work")

        with pytest.raises(InvalidFeedbackError, match="from 0"):
            await router.feedback(result.task_id, score)
        assert rating(router, "team:a:01") == 1.0


async def test_feedback_it_cannot_take_says_why() -> None:
    async with Router() as router:
        router.register(worker("team:a:01"))
        with pytest.raises(UnknownTaskError, match="no decision record for task 'nope'"):
            await router.feedback("nope", 1.0)

        failed = await router.route("nothing_declares_this")
        with pytest.raises(InvalidFeedbackError, match="ended no_candidate, so no agent's answer was taken"):
            await router.feedback(failed.task_id, 1.0)

        done = await router.route("work")
        with pytest.raises(InvalidFeedbackError, match="at most 1000 characters"):
            router.feedback_sync(done.task_id, 1.0, reason="x" * 1001)
        router.feedback_sync(done.task_id, 1.0)
        with pytest.raises(TaskAlreadyRatedError, match="was given feedback already"):
            router.feedback_sync(done.task_id, 0.0)

        gone = await router.route("work")
        await router.deregister("team:a:01", drain_timeout=1.0)
        with pytest.raises(UnknownAgentError, match="no longer registered"):
            await router.feedback(gone.task_id, 0.0)


async def test_a_principal_may_rate_only_its_own_tasks() -> None:
    spec = SecuritySpec.model_validate(
        {
            "principals": {
                "alice": {"allow": {"capabilities": ["work"]}},
                "bob": {"allow": {"capabilities": ["work"]}},
            }
        }
    )
    async with Router(guard=SecurityGuard(spec)) as router:
        router.register(worker("team:a:01"))
        alices = await router.route("work", principal="alice")
        assert alices.ok, alices.error

        with pytest.raises(UnknownTaskError):
            await router.feedback(alices.task_id, 0.0, principal="bob")
        assert rating(router, "team:a:01") == 1.0
        await router.feedback(alices.task_id, 0.0, principal="alice")
        assert rating(router, "team:a:01") < 1.0


def test_capital_is_the_capability_the_voters_declare() -> None:
    assert CAPITAL.name == "capital"
