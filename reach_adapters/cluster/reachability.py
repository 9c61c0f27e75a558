"""Whether the registry's Redis answers a node or a worker: one warning per outage, not one per
failed exchange, a growing backoff between attempts, and a hook for when Redis answers again."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Coroutine
from typing import Any

from redis.exceptions import RedisError

__all__ = ["MAX_BACKOFF_S", "Reachability"]

logger = logging.getLogger(__name__)

# Longest wait between two attempts to reach a Redis that is down.
MAX_BACKOFF_S = 5.0


class Reachability:
    """Whether `who` (``node a``, ``worker w``) finds the cluster's Redis out of reach.

    `meanwhile` says in the warning what it does during the outage, `recovery` what it does when
    Redis is back (`on_back` does it). `backoff` starts at `base_s` and doubles per failure.
    """

    def __init__(
        self, who: str, base_s: float, *, meanwhile: str, recovery: str, on_back: Callable[[], None]
    ) -> None:
        self.who = who
        self._base_s = base_s
        self._meanwhile = meanwhile
        self._recovery = recovery
        self._on_back = on_back
        self.backoff = base_s
        self.down_since: float | None = None

    async def guarded(self, work: Coroutine[Any, Any, None]) -> bool:
        """Run one exchange with Redis; False when it failed (warned once per outage)."""
        try:
            await work
        except (RedisError, OSError) as exc:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                # redis-py may turn a cancellation into a connection error: leaving wins.
                raise asyncio.CancelledError from exc
            if self.down_since is None:
                self.down_since = time.monotonic()
                logger.warning(
                    "%s: the cluster registry is out of reach (%s); %s", self.who, exc, self._meanwhile
                )
            else:
                self.backoff = min(self.backoff * 2, MAX_BACKOFF_S)
            return False
        if self.down_since is not None:
            logger.warning(
                "%s: the cluster registry is back after %.1f s; %s",
                self.who,
                time.monotonic() - self.down_since,
                self._recovery,
            )
            self.down_since = None
            self.backoff = self._base_s
            self._on_back()
        return True
