"""When to retry: backoff with jitter, and a budget so an outage cannot multiply load."""

from __future__ import annotations

import random

from middleware import ResultStatus

__all__ = ["RetryBudget", "backoff_s", "may_resend"]


def backoff_s(retry: int, base_ms: float, multiplier: float, jitter_ms: float) -> float:
    """Delay before retry number `retry` (1-based): ``base·multiplier^(retry-1)`` plus jitter.

    Jitter keeps agents that failed together from retrying in the same instant.
    """
    return (base_ms * multiplier ** (retry - 1) + random.uniform(0.0, jitter_ms)) / 1000.0


def may_resend(status: ResultStatus, error_type: str | None, safe: bool) -> bool:
    """Whether a failed, retryable delivery can be sent again without risking double work.

    A timeout or a rejected output comes after the agent may have done the work; only capabilities
    that are `safe` to repeat (idempotent or read-only) may see that task twice. Busy agents and
    refused connections never started it.
    """
    if safe:
        return True
    return status is not ResultStatus.TIMEOUT and error_type not in _MAYBE_STARTED


# Failures raised after the request may have reached the agent.
_MAYBE_STARTED = frozenset({"ReachTimeoutError", "OutputValidationError", "TimeoutError"})


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
