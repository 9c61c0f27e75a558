"""What `Router` tells of its deferred queue (see `deferral`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reach_adapters.router.dispatcher import Dispatcher

__all__ = ["DeferredCalls"]


class DeferredCalls:
    """Mixed into `Router`, which holds the dispatcher whose queue this reads."""

    _dispatcher: Dispatcher

    @property
    def deferred_waiting(self) -> int:
        """Calls (and async tasks) waiting now in the deferred queue for a capable agent
        (``defer=True``); the ``reach_deferred_waiting`` gauge of ``/metrics``."""
        return len(self._dispatcher.deferred)

    async def close_deferred(self) -> None:
        """End the calls waiting deferred now, as closing the router does (``cancelled``, the
        router's fault, never delivered), and defer no new ones: a server stopping does this
        first, so the calls it still answers end with a result rather than a broken connection.
        Async tasks waiting deferred are left to their runner."""
        await self._dispatcher.deferred.close()
