"""Undoing a cancelled call's side effects: a `compensable` capability's agent may define
``async compensate(message)``, run when a delivery to it is cancelled after it started (the caller
gave up, an async task was cancelled, another node cancelled its call).

The agent may have done part of the work; only it knows how to undo that. Compensation runs in the
background, after the cancellation, and its failure is logged, never raised: the caller has gone.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable

from middleware import ReachMessage
from reach_adapters.router.state import Slot

__all__ = ["ABANDONED", "abandoned", "compensate_later"]

logger = logging.getLogger(__name__)

Compensate = Callable[[ReachMessage], Awaitable[None]]

ABANDONED = "reach: the call was abandoned, not cancelled by its caller"
"""The message of a cancellation that must not compensate (``task.cancel(ABANDONED)``): the run
is dropped because another node took the task over, or its router or node is closing, and the
call's work may stand, or be done again elsewhere."""


def abandoned(cancelled: asyncio.CancelledError) -> bool:
    """Whether `cancelled` dropped the call (`ABANDONED`) rather than its caller cancelling it."""
    return cancelled.args[:1] == (ABANDONED,)


# Running compensations: held so the event loop does not drop them half way.
_running: set[asyncio.Task[None]] = set()


def compensate_later(slot: Slot, message: ReachMessage, cancelled: asyncio.CancelledError) -> None:
    """Start the agent's ``compensate(message)`` when its capability is compensable, it has one,
    and the call was `cancelled` for its caller (not `ABANDONED`)."""
    if not slot.capability.compensable or abandoned(cancelled):
        return
    compensate: Compensate | None = getattr(slot.runtime.agent, "compensate", None)
    if compensate is None:
        return
    task = asyncio.get_running_loop().create_task(_run(compensate, message, slot.runtime.agent_id))
    _running.add(task)
    task.add_done_callback(_running.discard)


async def _run(
    compensate: Callable[[ReachMessage], Awaitable[None]], message: ReachMessage, agent_id: str
) -> None:
    meta = message.meta_info
    try:
        await compensate(message)
    except Exception:
        logger.exception("compensation of task %s by agent %s failed", meta.task_id, agent_id)
    else:
        logger.info("agent %s compensated cancelled task %s (%s)", agent_id, meta.task_id, meta.capability)
