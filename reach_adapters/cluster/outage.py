"""`Outage`: how a node's (or a worker's) background loops meet a Redis that stopped answering.

One warning per outage (not one per failed attempt), a growing pause between attempts of each
loop (no busy loop against a dead server), one line when Redis answers again, and a hook for what
to do then. Each loop is followed on its own: the outage ends only once every loop that failed
has succeeded again. A Redis that answers reads but refuses writes (a replica: READONLY) thus
stays one outage, instead of ending at each successful read and starting at the next refused
write.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable

from redis.exceptions import RedisError

__all__ = ["MAX_BACKOFF_S", "Outage"]

logger = logging.getLogger(__name__)

# Longest wait between two attempts to reach a Redis that is down.
MAX_BACKOFF_S = 5.0


class Outage:
    """The state of the cluster's Redis as `who` (``node a``, ``worker w``, ``async tasks of node
    a``) sees it, shared by its loops; each names itself (``leases``, ``inbox``...) when it
    reports an exchange.

    `meanwhile` says in the warning what `who` does during the outage, `recovery` what it does
    when Redis is back (`on_back` does it). A loop's pause starts at `first_s` and doubles per
    failure, up to `max_s`.
    """

    def __init__(
        self,
        who: str,
        *,
        first_s: float = 0.1,
        max_s: float = MAX_BACKOFF_S,
        meanwhile: str = "retrying with backoff",
        recovery: str | None = None,
        on_back: Callable[[], None] | None = None,
    ) -> None:
        self.who = who
        self._first_s = first_s
        self._max_s = max_s
        self._meanwhile = meanwhile
        self._recovery = recovery
        self._on_back = on_back
        # The loops whose last exchange failed, with their current pause.
        self._failing: dict[str, float] = {}
        self.down_since: float | None = None

    def failed(self, loop: str, exc: BaseException) -> float:
        """Note a failed exchange of `loop`; the seconds it waits before its next attempt."""
        pause = self._failing.get(loop)
        pause = self._first_s if pause is None else min(pause * 2, self._max_s)
        self._failing[loop] = pause
        if self.down_since is None:
            self.down_since = time.monotonic()
            logger.warning("%s: the cluster's Redis is out of reach (%s); %s", self.who, exc, self._meanwhile)
        return pause

    def ok(self, loop: str) -> None:
        """Note a successful exchange of `loop`; the outage ends when no loop is failing."""
        if self._failing.pop(loop, None) is None or self._failing or self.down_since is None:
            return
        then = "" if self._recovery is None else f"; {self._recovery}"
        logger.warning(
            "%s: the cluster's Redis is back after %.1f s%s",
            self.who,
            time.monotonic() - self.down_since,
            then,
        )
        self.down_since = None
        if self._on_back is not None:
            self._on_back()

    def pause(self, loop: str) -> float | None:
        """How long `loop` waits before its next attempt while it fails; None when it does not."""
        return self._failing.get(loop)

    async def guarded(self, loop: str, work: Awaitable[None]) -> bool:
        """Run one exchange of `loop` with Redis; False when it failed (see `pause`)."""
        try:
            await work
        except (RedisError, OSError) as exc:
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                # redis-py may turn a cancellation into a connection error: leaving wins.
                raise asyncio.CancelledError from exc
            self.failed(loop, exc)
            return False
        self.ok(loop)
        return True
