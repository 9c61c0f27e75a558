"""When to retry: backoff with jitter, and a budget so an outage cannot multiply load."""

from __future__ import annotations

import random

from middleware import ReachResult

__all__ = ["RetryBudget", "RetryBudgets", "backoff_s", "may_resend"]


def backoff_s(retry: int, base_ms: float, multiplier: float, jitter_ms: float) -> float:
    """Delay before retry number `retry` (1-based): ``base·multiplier^(retry-1)`` plus jitter.

    Jitter keeps agents that failed together from retrying in the same instant.
    """
    return (base_ms * multiplier ** (retry - 1) + random.uniform(0.0, jitter_ms)) / 1000.0


def may_resend(result: ReachResult, safe: bool) -> bool:
    """Whether a failed task can be sent again without risking double work.

    Once an agent received it (``result.delivered``: a timeout, a reset connection, a rejected
    output) it may have done the work, and only capabilities `safe` to repeat (idempotent or
    read-only) may see it twice. Busy agents and refused connections never started it.
    """
    return safe or not result.delivered


class RetryBudget:
    """Token bucket: each first attempt earns `ratio` of a retry, each retry spends one.

    It starts with `floor` tokens so a router that has just started can retry at all.
    """

    __slots__ = ("_cap", "_ratio", "tokens")

    def __init__(self, ratio: float, floor: float, cap: float = 100.0) -> None:
        self._ratio = ratio
        self._cap = max(cap, floor)
        self.tokens = floor

    def reconfigure(self, ratio: float, floor: float) -> None:
        self._ratio = ratio
        self._cap = max(self._cap, floor)

    def earn(self) -> None:
        tokens = self.tokens + self._ratio
        self.tokens = tokens if tokens < self._cap else self._cap

    def spend(self) -> bool:
        if self.tokens >= 1.0:
            self.tokens -= 1.0
            return True
        return False


class RetryBudgets:
    """A `RetryBudget` per capability: an outage of one capability's agents spends its own, and
    a healthy capability can still fail over from a replica that refused it."""

    __slots__ = ("_budgets", "_floor", "_ratio")

    def __init__(self, ratio: float, floor: float) -> None:
        self._ratio = ratio
        self._floor = floor
        self._budgets: dict[str, RetryBudget] = {}

    def reconfigure(self, ratio: float, floor: float) -> None:
        self._ratio, self._floor = ratio, floor
        for budget in self._budgets.values():
            budget.reconfigure(ratio, floor)

    def of(self, capability: str) -> RetryBudget:
        budget = self._budgets.get(capability)
        if budget is None:
            budget = self._budgets[capability] = RetryBudget(self._ratio, self._floor)
        return budget
