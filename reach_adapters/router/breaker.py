"""Per-agent circuit breaker: quarantine an agent that keeps failing, probe it back in."""

from __future__ import annotations

from collections import deque
from enum import StrEnum

from reach_adapters.router.policy import BreakerSettings

__all__ = ["Breaker", "BreakerState"]


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


class Breaker:
    """Counts outcomes in one-second buckets; opens on error rate or a run of failures.

    Each ejection doubles the quarantine up to the cap; a success through half-open closes it and
    forgives one ejection. Buckets exist only for seconds with calls, so idle agents cost nothing.
    """

    __slots__ = ("_buckets", "consecutive", "ejections", "open_until", "probing", "settings", "state")

    def __init__(self, settings: BreakerSettings) -> None:
        self.settings = settings
        self._buckets: deque[list[int]] | None = None
        self.state = BreakerState.CLOSED
        self.consecutive = 0
        self.ejections = 0
        self.open_until = 0.0
        self.probing = False

    def _bucket(self, now: float) -> list[int]:
        second = int(now)
        buckets = self._buckets
        if buckets is None:
            buckets = self._buckets = deque()
        if buckets and buckets[-1][0] == second:
            return buckets[-1]
        horizon = second - self.settings.window_s
        while buckets and buckets[0][0] <= horizon:
            buckets.popleft()
        bucket = [second, 0, 0]
        buckets.append(bucket)
        return bucket

    def window(self, now: float) -> tuple[int, int]:
        """(calls, failures) in the rolling window."""
        if not self._buckets:
            return 0, 0
        horizon = int(now) - self.settings.window_s
        calls = failures = 0
        for second, c, f in self._buckets:
            if second > horizon:
                calls += c
                failures += f
        return calls, failures

    def state_at(self, now: float) -> BreakerState:
        """The state a call at `now` would find: a quarantine that is over is half-open already."""
        if self.state is BreakerState.OPEN and now >= self.open_until:
            return BreakerState.HALF_OPEN
        return self.state

    def blocks(self, now: float) -> str | None:
        """Why a new call may not go to this agent now, or None. Moves OPEN to HALF_OPEN on time."""
        state = self.state
        if state is BreakerState.CLOSED:
            return None
        if state is BreakerState.OPEN:
            if now < self.open_until:
                return f"circuit open, quarantined {self.open_until - now:.1f} s more"
            self.state = BreakerState.HALF_OPEN
            self.probing = False
        if self.probing:
            return "circuit half-open, a probe call is in flight"
        return None

    def recovered(self) -> None:
        """The agent says it is back (reconnected): let the next call probe it now, instead of
        serving out a quarantine earned while it was down."""
        if self.state is BreakerState.OPEN:
            self.state = BreakerState.HALF_OPEN
            self.probing = False

    def reconfigure(self, settings: BreakerSettings) -> None:
        """Judge from now on by `settings`; the counts so far and an open circuit stay."""
        self.settings = settings

    def on_start(self) -> None:
        if self.state is BreakerState.HALF_OPEN:
            self.probing = True

    def release_probe(self) -> None:
        """A call ended with no outcome that says anything about the agent (the caller gave up,
        or the fault was someone else's): a half-open probe slot it held is free again."""
        self.probing = False

    def record(self, success: bool, now: float) -> bool:
        """Count one outcome; return True when this outcome opened the circuit."""
        bucket = self._bucket(now)
        bucket[1] += 1
        if success:
            self.consecutive = 0
            if self.state is BreakerState.HALF_OPEN:
                self.state = BreakerState.CLOSED
                self.probing = False
                self.ejections = max(0, self.ejections - 1)
            return False
        bucket[2] += 1
        self.consecutive += 1
        if self.state is BreakerState.HALF_OPEN:
            self._open(now)
            return True
        if self.state is BreakerState.OPEN:
            return False
        settings = self.settings
        if self.consecutive >= settings.consecutive_failures:
            self._open(now)
            return True
        calls, failures = self.window(now)
        if calls >= settings.min_calls and failures / calls > settings.error_rate:
            self._open(now)
            return True
        return False

    def _open(self, now: float) -> None:
        settings = self.settings
        self.ejections += 1
        quarantine = min(settings.quarantine_s * 2 ** (self.ejections - 1), settings.max_quarantine_s)
        self.state = BreakerState.OPEN
        self.open_until = now + quarantine
        self.probing = False
