"""`Outage`: how a node's background work meets a Redis that stopped answering.

One warning per outage (not one per failed attempt), a growing pause between attempts (no busy
loop against a dead server), one line when Redis answers again.
"""

from __future__ import annotations

import logging
import time

__all__ = ["Outage"]

logger = logging.getLogger(__name__)


class Outage:
    """The state of Redis as `what` of node `node_id` sees it; shared by that work's loops."""

    def __init__(self, node_id: str, what: str, *, first_s: float = 0.1, max_s: float = 5.0) -> None:
        self.node_id = node_id
        self.what = what
        self._first_s = first_s
        self._max_s = max_s
        self._pause_s = first_s
        self.down_since: float | None = None

    def failed(self, exc: BaseException) -> float:
        """Note a failed exchange; the seconds to wait before the next attempt."""
        if self.down_since is None:
            self.down_since = time.monotonic()
            logger.warning(
                "%s of node %s: the cluster's Redis is out of reach (%s); retrying with backoff",
                self.what,
                self.node_id,
                exc,
            )
            self._pause_s = self._first_s
        else:
            self._pause_s = min(self._pause_s * 2, self._max_s)
        return self._pause_s

    def ok(self) -> None:
        """Note a successful exchange, ending the outage if there was one."""
        if self.down_since is not None:
            logger.warning(
                "%s of node %s: the cluster's Redis is back after %.1f s",
                self.what,
                self.node_id,
                time.monotonic() - self.down_since,
            )
            self.down_since = None
