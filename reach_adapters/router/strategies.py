"""Selection strategies: rank eligible slots best first, with the score broken down."""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Protocol

from middleware import MetaInfo
from reach_adapters.router.decisions import Scored
from reach_adapters.router.policy import RoutingPolicy
from reach_adapters.router.ratings import Ratings
from reach_adapters.router.state import Slot

__all__ = [
    "LeastWaitStrategy",
    "Ranked",
    "RatingStrategy",
    "Strategy",
    "WeightedStrategy",
    "make_strategies",
]

Ranked = list[tuple[Slot, Scored]]


class Strategy(Protocol):
    """Orders candidates; the router tries them in that order."""

    name: str

    def rank(self, slots: Sequence[Slot], meta: MetaInfo) -> Ranked: ...


def _affinity(slot: Slot, source: str | None) -> float:
    """1 when the caller is a preferred source, 0.5 when it shares the agent's namespace."""
    if not source:
        return 0.0
    preferred = slot.capability.preferred_source
    if preferred:
        kind = source.rpartition(":")[0]
        if source in preferred or kind in preferred:
            return 1.0
    return 0.5 if source.partition(":")[0] == slot.runtime.ident.namespace else 0.0


def _sorted(scored: Ranked) -> Ranked:
    if len(scored) > 1:
        # Random tie-break: equal scores (an idle pool) must not always favour the first registered.
        scored.sort(key=lambda pair: (-pair[1].score, random.random()))
    return scored


class WeightedStrategy:
    """``0.4·weight/max_weight + 0.3·health·rating − 0.2·in_flight/max_concurrency + 0.1·affinity``.

    ``rating`` is the slot's rating from feedback (`Ratings`), 1.0 unless feedback moved it; the
    breakdown shows it when it is not 1.0.

    Above `busy_ratio` of max_concurrency the load term counts double, so a nearly full agent
    sheds new work before it saturates. An agent of another node of a cluster scores one affinity
    weight lower (``locality``): a local replica wins ties, a remote one takes the overflow.
    """

    name = "weighted"

    def __init__(self, policy: RoutingPolicy, ratings: Ratings) -> None:
        w = policy.weights
        self._w_weight, self._w_health, self._w_load, self._w_aff = w.weight, w.health, w.load, w.affinity
        self._busy_ratio = policy.busy_ratio
        self._ratings = ratings

    def rank(self, slots: Sequence[Slot], meta: MetaInfo) -> Ranked:
        max_weight = (
            max(slot.capability.weight for slot in slots) if len(slots) > 1 else slots[0].capability.weight
        ) or 1.0
        source = meta.source
        ratings = self._ratings if self._ratings.rated else None
        out: Ranked = []
        for slot in slots:
            cap = slot.capability
            load = slot.in_flight / cap.max_concurrency
            weight_part = self._w_weight * cap.weight / max_weight
            rating = 1.0 if ratings is None else ratings.slot(slot)
            health_part = self._w_health * slot.runtime.health * rating
            load_part = self._w_load * load * (2.0 if load >= self._busy_ratio else 1.0)
            affinity_part = self._w_aff * _affinity(slot, source) if source else 0.0
            score = weight_part + health_part - load_part + affinity_part
            breakdown = {
                "weight": weight_part,
                "health": health_part,
                "load": -load_part,
                "affinity": affinity_part,
            }
            if rating != 1.0:
                breakdown["rating"] = rating
            if slot.runtime.remote:
                score -= self._w_aff
                breakdown["locality"] = -self._w_aff
            out.append((slot, Scored(slot.runtime.agent_id, score, breakdown)))
        return _sorted(out)


class LeastWaitStrategy:
    """Smallest expected wait: ``queue_length × avg_process_time``, the time each agent's
    successful calls of the capability take (`Slot.usual_ms`).

    An agent with no finished call yet is assumed as fast as the average of the others, so a busy
    newcomer does not look free.
    """

    name = "least_wait"

    def rank(self, slots: Sequence[Slot], meta: MetaInfo) -> Ranked:
        known = [usual for slot in slots if (usual := slot.usual_ms) is not None]
        assumed = sum(known) / len(known) if known else 1.0
        out: Ranked = []
        for slot in slots:
            runtime = slot.runtime
            usual = slot.usual_ms
            avg_ms = assumed if usual is None else usual
            wait_ms = slot.in_flight * avg_ms
            breakdown = {"queue": float(slot.in_flight), "avg_ms": avg_ms, "wait_ms": wait_ms}
            out.append((slot, Scored(runtime.agent_id, -wait_ms, breakdown)))
        return _sorted(out)


class RatingStrategy:
    """Smooth weighted round robin (as in nginx) on each agent's rating: its recent success rate
    times its rating from feedback for the capability (`Ratings`).

    Traffic follows quality in proportion instead of all going to the single best agent.
    """

    name = "rating"

    def __init__(self, ratings: Ratings) -> None:
        self._ratings = ratings

    def rank(self, slots: Sequence[Slot], meta: MetaInfo) -> Ranked:
        total = 0.0
        best: Slot | None = None
        ratings = self._ratings if self._ratings.rated else None
        quality: list[float] = []
        for slot in slots:
            rated = slot.runtime.success_rate * (1.0 if ratings is None else ratings.slot(slot))
            quality.append(rated)
            effective = max(rated, 0.01) * 100.0
            slot.swrr_current += effective
            total += effective
            if best is None or slot.swrr_current > best.swrr_current:
                best = slot
        assert best is not None
        best.swrr_current -= total
        out: Ranked = [
            (
                slot,
                Scored(
                    slot.runtime.agent_id,
                    slot.swrr_current,
                    {"rating": rated, "current": slot.swrr_current},
                ),
            )
            for slot, rated in zip(slots, quality, strict=True)
        ]
        out.sort(key=lambda pair: (pair[0] is not best, -pair[1].score))
        return out


def make_strategies(policy: RoutingPolicy, ratings: Ratings) -> dict[str, Strategy]:
    return {
        "weighted": WeightedStrategy(policy, ratings),
        "least_wait": LeastWaitStrategy(),
        "rating": RatingStrategy(ratings),
    }
