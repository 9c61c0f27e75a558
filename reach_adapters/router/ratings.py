"""Ratings from outcomes: how well each agent has done each capability lately, by feedback.

A rating belongs to a slot (agent × capability): an agent can be good at one thing and bad at
another. It starts at 1.0, the capability as declared, moves towards each score it is given by an
exponentially weighted average, and between scores decays back towards 1.0 with a half-life, so
an agent that was bad once is trusted again in time. The weighted strategy multiplies its health
term by it, the rating strategy its weight; catalog and decision records show it.

Kept per router process and keyed by agent id and capability name, so a rating outlives a
redeclaration of the agent's capabilities (an MCP server's tool list changing).
"""

from __future__ import annotations

import logging
import math
import time
from collections import OrderedDict
from collections.abc import Callable

from middleware import ReachResult, ResultStatus
from reach_adapters.router.decisions import DecisionRecord
from reach_adapters.router.outcomes import ErrorKind
from reach_adapters.router.policy import RatingPolicy
from reach_adapters.router.state import Slot

__all__ = ["Ratings"]

logger = logging.getLogger(__name__)

# Slots rated at most; the longest unrated go first (they have decayed furthest back to 1.0).
_MAX_RATED = 100_000
# Ratings this close to 1.0 are 1.0: the entry is dropped when read.
_SETTLED = 1e-4


class Ratings:
    """The ratings of one router. `clock` (monotonic seconds) can be replaced, e.g. in tests."""

    def __init__(self, policy: RatingPolicy, clock: Callable[[], float] = time.monotonic) -> None:
        self.policy = policy
        self.clock = clock
        # (agent id, capability) → (rating, clock time it was set).
        self._rated: OrderedDict[tuple[str, str], tuple[float, float]] = OrderedDict()
        # Whether any rating is held: strategies read it on every rank, so most routers, which
        # never rate anyone, pay one attribute read for ratings.
        self.rated = False
        # Tasks given feedback already: each takes one, so one good task cannot be counted twice.
        self._tasks: OrderedDict[str, None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._rated)

    def reconfigure(self, policy: RatingPolicy) -> None:
        self.policy = policy

    def of(self, agent_id: str, capability: str, now: float | None = None) -> float:
        """The rating now (or at clock time `now`): 1.0 unless feedback moved it lately."""
        if not self.rated:
            return 1.0
        key = (agent_id, capability)
        entry = self._rated.get(key)
        if entry is None:
            return 1.0
        rating, at = entry
        elapsed = max((self.clock() if now is None else now) - at, 0.0)
        current = 1.0 - (1.0 - rating) * math.exp2(-elapsed / self.policy.half_life_s)
        if current >= 1.0 - _SETTLED:
            del self._rated[key]
            self.rated = bool(self._rated)
            return 1.0
        return current

    def slot(self, slot: Slot, now: float | None = None) -> float:
        return self.of(slot.runtime.agent_id, slot.capability.name, now)

    def rate(self, agent_id: str, capability: str, score: float) -> tuple[float, float]:
        """Move the rating towards `score` (0..1); return it before and after."""
        now = self.clock()
        before = self.of(agent_id, capability, now)
        after = before + self.policy.alpha * (score - before)
        key = (agent_id, capability)
        self._rated[key] = (after, now)
        self._rated.move_to_end(key)
        self.rated = True
        while len(self._rated) > _MAX_RATED:
            self._rated.popitem(last=False)
        return before, after

    def first_feedback(self, task_id: str) -> bool:
        """Note that `task_id` was given feedback; False when it was already."""
        if task_id in self._tasks:
            return False
        self._tasks[task_id] = None
        while len(self._tasks) > _MAX_RATED:
            self._tasks.popitem(last=False)
        return True

    def on_reach(self, record: DecisionRecord, result: ReachResult) -> None:
        """Score 0 (``output_failure``) every attempt whose output broke the output schema: the
        agent answered, but not in the shape it declared."""
        capability = record.capability
        if capability is None or (result.status is ResultStatus.OK and len(record.attempts) == 1):
            # Answered at the first try, as most reaches are: no attempt broke its schema.
            return
        for attempt in record.attempts:
            if attempt.error_type == ErrorKind.OUTPUT_VALIDATION:
                self.rate(attempt.agent_id, capability, self.policy.output_failure)
                logger.info(
                    "agent %s rated down for %s: its output broke the output schema",
                    attempt.agent_id,
                    capability,
                )
