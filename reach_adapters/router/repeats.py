"""Repeats of a caller-chosen task id (see `idempotency`): answered with the first delivery's
result (a stream's with its chunks, kept while it streams), or told the first still runs when
their own deadline passes first."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import NamedTuple

from pydantic import JsonValue

from middleware import Fault, ReachMessage, ReachResult, ResultStatus
from reach_adapters.errors import IdempotencyConflictError
from reach_adapters.router.deadlines import apply_caller_timeout
from reach_adapters.router.idempotency import Fingerprint, IdempotencyStore, payload_size
from reach_adapters.router.outcomes import ErrorKind, error_result
from reach_adapters.router.planning import slot_for
from reach_adapters.router.registry import Registry

__all__ = [
    "Kept",
    "Repeated",
    "Settle",
    "claim",
    "may_run_again",
    "repeat_wait_s",
    "settler",
    "still_running",
]

# Takes what repeats of a stream's task id get (None: nothing, the next one streams it itself)
# and whether later repeats may get it too.
Settle = Callable[[ReachResult | None, bool], None]


class Kept:
    """A deduplicated stream's chunks, gathered for repeats of its task id while they fit in
    `limit` bytes; past it only the first caller has them, and later repeats are refused."""

    __slots__ = ("chunks", "limit", "settle", "size")

    def __init__(self, settle: Settle, limit: int) -> None:
        self.settle = settle
        self.limit = limit
        self.size = 0
        self.chunks: list[JsonValue] | None = []

    def add(self, chunk: JsonValue) -> None:
        if self.chunks is None:
            return
        self.size += payload_size(chunk)
        if self.size > self.limit:
            self.chunks = None
        else:
            self.chunks.append(chunk)

    def answer(self, message: ReachMessage, outcome: ReachResult | None) -> None:
        """Settle with the stream's `outcome` (None: left early, it may be streamed again)."""
        if outcome is None or outcome.status is not ResultStatus.OK:
            self.settle(outcome, True)
            return
        if self.chunks is not None:
            self.settle(outcome.model_copy(update={"payload": self.chunks}), True)
            return
        error = (
            f"task_id {message.meta_info.task_id!r} was streamed while this repeat waited, and its "
            f"chunks were not kept (more than policy dedupe_max_result_bytes, {self.limit} bytes), "
            "so it is not streamed again; the first caller got them. Give a new task_id to run the "
            "task again"
        )
        kind = ErrorKind.IDEMPOTENCY_CONFLICT
        refused = error_result(
            message, ResultStatus.REJECTED, kind, error, fault=Fault.CALLER, delivered=True
        )
        # For repeats waiting now; later ones are refused when they claim the task id.
        self.settle(refused, False)


def still_running(message: ReachMessage, stream: bool) -> ReachResult:
    """A repeat whose deadline passed while the first request of its task id still ran (`stream`:
    was still read)."""
    meta = message.meta_info
    first = "being streamed to its first caller" if stream else "running for its first caller"
    got = "that stream's chunks" if stream else "that call's result"
    error = (
        f"task_id {meta.task_id!r} is still {first}; a repeat gets {got} once it ends, which did "
        "not happen within this call's deadline. Ask again later, or give a new task_id to run "
        "the task again"
    )
    # Never delivered, it waited in the router: the router's to answer for (DESIGN §6).
    return error_result(message, ResultStatus.TIMEOUT, ErrorKind.TIMEOUT, error, fault=Fault.ROUTER)


class Repeated(NamedTuple):
    """What a repeat of a task id gets instead of a delivery of its own: the first request's
    answer, or (`refused`) this call's own refusal, recorded as its outcome."""

    result: ReachResult
    refused: bool


async def claim(
    store: IdempotencyStore,
    message: ReachMessage,
    request: Fingerprint,
    wait_s: Callable[[], float | None],
) -> asyncio.Future[ReachResult] | Repeated:
    """Claim `message`'s task id for `request`: the future its delivery settles when it is the
    first; else what this repeat gets. A repeat waits for the first at most `wait_s()` (None:
    as long as the first runs)."""
    task_id = message.meta_info.task_id
    while True:
        try:
            future, first = store.claim(task_id, request)
        except IdempotencyConflictError as exc:
            kind = ErrorKind.IDEMPOTENCY_CONFLICT
            refused = error_result(message, ResultStatus.REJECTED, kind, str(exc), fault=Fault.CALLER)
            return Repeated(refused, refused=True)
        if first:
            return future
        try:
            async with asyncio.timeout(wait_s()):
                earlier = await asyncio.shield(future)
        except TimeoutError:
            return Repeated(still_running(message, request.mode == "stream"), refused=True)
        except asyncio.CancelledError:
            task = asyncio.current_task()
            if task is not None and task.cancelling():
                raise
            continue  # given up before any agent had it, or safe to repeat: claim it again
        return Repeated(earlier.model_copy(update={"served_by": "deduplicated"}), refused=False)


def settler(store: IdempotencyStore, task_id: str, future: asyncio.Future[ReachResult]) -> Settle:
    """How a stream that claimed `task_id` settles it when it ends (see `Settle`)."""

    def settle(outcome: ReachResult | None, keep: bool) -> None:
        if outcome is None:
            store.abandon(task_id, future)
        else:
            store.settle(task_id, future, outcome, keep)

    return settle


def repeat_wait_s(registry: Registry, message: ReachMessage, stream: bool) -> float | None:
    """How long a repeat may wait for the first request of its task id: until its own deadline;
    without one, as long as the first runs (a call's ends with its deadline) or any `stream` may
    run here (the first may have fallen back to another capability's agent)."""
    meta = message.meta_info
    if apply_caller_timeout(meta):
        return max((meta.deadline or 0.0) - time.time(), 0.0)
    return registry.longest_timeout_ms() / 1000.0 if stream else None


def may_run_again(registry: Registry, message: ReachMessage, gone: ReachResult) -> bool:
    """Whether a repeat of a task its caller gave up on (`gone`) may run it: it never reached an
    agent, or the capability the agent had it under is safe to repeat."""
    runtime = registry.get(gone.agent_id or "") if gone.delivered else None
    if runtime is None:
        return not gone.delivered
    slot = slot_for(runtime.slots, message.meta_info.capability or "")
    return slot is not None and slot.capability.safe_to_repeat
