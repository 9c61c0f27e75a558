"""Where running code stands: the routed call it runs inside, for nested calls, logs and agents."""

from __future__ import annotations

import time
from collections.abc import Callable
from contextvars import ContextVar, Token
from dataclasses import dataclass
from typing import TYPE_CHECKING

from middleware import MetaInfo

if TYPE_CHECKING:
    from reach_adapters.router.deadlines import Expiry
    from reach_adapters.router.guard import Guard
    from reach_adapters.router.state import Slot

__all__ = [
    "CallerWait",
    "Hop",
    "current_guard",
    "current_hop",
    "current_reach",
    "enter_hop",
    "free_slot",
    "leave_hop",
    "reset_current_guard",
    "reset_current_reach",
    "set_current_guard",
    "set_current_reach",
]


@dataclass(slots=True)
class Hop:
    """The routed call the current code runs inside, for nested calls to inherit from.

    `slot` is set while a delivery runs (a unary call, or a stream until it ends); its agent may
    `linger` past it.
    """

    meta: MetaInfo
    agent_id: str
    slot: Slot | None = None
    lingering: bool = False
    # The deadline of the delivery's current step, which a nested delivery's is tied to.
    expiry: Expiry | None = None

    def linger(self) -> Callable[[], None]:
        """Keep this delivery's slot taken after the call returns, until the returned function runs.

        For work the router cannot stop: a sync function still running in its thread after its
        deadline. The slot counts it in flight (and the agent as stuck) until it really ends, so
        `max_concurrency` holds. Call the release function on the router's loop, once.
        """
        slot = self.slot
        if slot is None or self.lingering:
            return _nothing
        self.lingering = True
        runtime = slot.runtime
        runtime.stuck += 1
        released = False

        def release() -> None:
            nonlocal released
            if not released:
                released = True
                runtime.stuck -= 1
                free_slot(slot)

        return release


def _nothing() -> None:
    return None


def free_slot(slot: Slot) -> None:
    """One call fewer in flight on `slot`; a caller waiting for room there may go, and one
    waiting for the agent to go idle (`AgentRuntime.until_idle`) looks again."""
    slot.in_flight -= 1
    runtime = slot.runtime
    runtime.in_flight -= 1
    if slot.waitlist:
        slot.waitlist.wake_one()
    if runtime.idle is not None and not runtime.in_flight:
        runtime.idle.wake_all()


_current: ContextVar[Hop | None] = ContextVar("agent_reach_hop", default=None)


def current_hop() -> Hop | None:
    """The routed call the running code is inside (set while an agent is invoked)."""
    return _current.get()


def enter_hop(hop: Hop) -> Token[Hop | None]:
    """Mark the running code as inside `hop`; undo with `leave_hop` in the same context."""
    return _current.set(hop)


def leave_hop(token: Token[Hop | None]) -> None:
    _current.reset(token)


class CallerWait:
    """For an agent that, mid-call, waits on an answer from the caller of its call (an MCP
    server's elicitation or sampling, relayed to the MCP client that made the call): that time is
    the caller's, so a deadline that passes meanwhile is the caller's fault, never counted
    against the agent, and not retried.

    Made in the task running the delivery (it belongs to the delivery running there; outside one
    it does nothing); entered, from any task, for as long as a question waits on the caller.
    """

    __slots__ = ("_expiry",)

    def __init__(self) -> None:
        hop = _current.get()
        self._expiry = None if hop is None else hop.expiry

    def __enter__(self) -> None:
        expiry = self._expiry
        if expiry is not None:
            if not expiry.asking:
                expiry.asked_at = time.perf_counter()
            expiry.asking += 1

    def __exit__(self, *exc_info: object) -> None:
        expiry = self._expiry
        # A wait the deadline cut stays counted until the timeout is judged, which comes after
        # this when the wait runs in the delivery's own task.
        if expiry is not None and not expiry.fired:
            expiry.asking -= 1
            if not expiry.asking:
                # Not the agent's time: kept out of its usual latency (`InFlight.agent_ms`).
                expiry.waited += time.perf_counter() - expiry.asked_at


_reach: ContextVar[MetaInfo | None] = ContextVar("agent_reach_task", default=None)


def current_reach() -> MetaInfo | None:
    """The task being dispatched or served right now, for log records and hops."""
    hop = _current.get()
    return hop.meta if hop is not None else _reach.get()


def set_current_reach(meta: MetaInfo) -> Token[MetaInfo | None]:
    return _reach.set(meta)


def reset_current_reach(token: Token[MetaInfo | None]) -> None:
    _reach.reset(token)


_guard: ContextVar[Guard | None] = ContextVar("agent_reach_guard", default=None)


def current_guard() -> Guard | None:
    """The guard of the router dispatching the running code's task, for tokens on onward hops."""
    return _guard.get()


def set_current_guard(guard: Guard) -> Token[Guard | None]:
    return _guard.set(guard)


def reset_current_guard(token: Token[Guard | None]) -> None:
    _guard.reset(token)
