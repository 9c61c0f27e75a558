"""A delivery in progress, the same for unary calls and streams: counted on its slot, inside its
hop while the agent runs, and cancelled by the deadline watchdog when its time is up.

Plain methods called around each await of the agent (one for a call, one per chunk of a stream)
rather than a context manager: the unary path pays no extra frame.
"""

from __future__ import annotations

import asyncio
import time
from contextvars import Token

from middleware import MetaInfo
from reach_adapters.router.deadlines import Expiry, Watchdog, watchdog
from reach_adapters.router.hops import Hop, enter_hop, free_slot, leave_hop
from reach_adapters.router.state import Slot

__all__ = ["AgentCancelledError", "InFlight"]


class AgentCancelledError(Exception):
    """A `CancelledError` out of an agent whose call nobody cancelled: the agent's own failure."""


class InFlight:
    """One delivery to `slot`, from the moment it is counted until `close`.

    Around each await of the agent: `enter` before it, `cancelled` in its ``except CancelledError``,
    `exit` in its ``finally``. The agent may `Hop.linger` past `close`, keeping the slot taken.
    """

    __slots__ = ("_cancelling", "_expiry", "_task", "_token", "_watch", "hop", "slot", "start")

    _task: asyncio.Task[object]
    _watch: Watchdog
    _expiry: Expiry
    _token: Token[Hop | None]
    _cancelling: int

    def __init__(self, slot: Slot, meta: MetaInfo) -> None:
        runtime = slot.runtime
        slot.in_flight += 1
        runtime.in_flight += 1
        runtime.breaker.on_start()
        self.slot = slot
        self.hop = Hop(meta, runtime.agent_id, slot)
        self.start = time.perf_counter()

    def enter(self, budget_s: float) -> None:
        """The agent runs from here: nested calls inherit the hop; after `budget_s` it is cancelled."""
        task = asyncio.current_task()
        assert task is not None
        self._task = task
        self._cancelling = task.cancelling()
        watch = self._watch = watchdog(task.get_loop())
        hop = self.hop
        token = self._token = enter_hop(hop)
        # Nested in the delivery whose agent makes this call (the hop it runs inside until now):
        # that one's deadline cuts this one first.
        outer = token.old_value
        enclosing = outer.expiry if isinstance(outer, Hop) else None
        self._expiry = hop.expiry = watch.watch(task, budget_s, enclosing)

    def cancelled(self) -> None:
        """In ``except CancelledError``: returns when the call was cancelled (re-raise then); raises
        `TimeoutError` when the deadline, and nothing else, cancelled the agent (the cancellation
        taken back, as `asyncio.timeout` does), and `AgentCancelledError` when nothing cancelled
        the call: the agent's own code let a `CancelledError` out (a task of its own cancelled)."""
        task = self._task
        if self._expiry.consume() and task.uncancel() <= self._cancelling:
            raise TimeoutError from None
        if task.cancelling() <= self._cancelling:
            msg = (
                f"agent {self.slot.runtime.agent_id} raised CancelledError though its call was not "
                "cancelled: a task or future of its own was"
            )
            raise AgentCancelledError(msg) from None

    def agent_ms(self, elapsed_ms: float) -> float:
        """`elapsed_ms` less the time the agent waited on its caller (`CallerWait`): what its
        usual latency is made of, or a slow human's answer would excuse a later hang."""
        waited = self._expiry.waited
        return elapsed_ms - waited * 1000.0 if waited else elapsed_ms

    def on_caller(self) -> bool:
        """Whether the agent was waiting on its caller's answer when its time ran out (`CallerWait`)."""
        return self._expiry.asking > 0

    def exit(self) -> None:
        """The agent's step is over (``finally``): out of the hop, off the watchdog."""
        leave_hop(self._token)
        self._watch.release(self._expiry)
        # Nothing the agent left running (a task it spawned keeps the hop) holds this step's.
        self.hop.expiry = None
        if self._expiry.consume():
            # The agent swallowed our cancellation: take it back, as asyncio.timeout does.
            self._task.uncancel()

    def close(self) -> float:
        """The delivery is over: free the slot (unless the agent lingers); its time in ms."""
        elapsed_ms = (time.perf_counter() - self.start) * 1000.0
        hop = self.hop
        if not hop.lingering:
            free_slot(self.slot)
        # Over: a linger() from here on has no slot to keep.
        hop.slot = None
        return elapsed_ms

    def abandon(self) -> None:
        """The caller gave up: no outcome to count, but a half-open probe slot must not stay taken."""
        self.slot.runtime.breaker.release_probe()
