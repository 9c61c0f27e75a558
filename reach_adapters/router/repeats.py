"""Repeats of a stream's task id (see `idempotency`): answered with the first stream's chunks,
kept while it streams, or told the first is still streaming when their deadline passes first."""

from __future__ import annotations

from collections.abc import Callable

from pydantic import JsonValue

from middleware import Fault, ReachMessage, ReachResult, ResultStatus
from reach_adapters.router.idempotency import payload_size
from reach_adapters.router.outcomes import ErrorKind, error_result

__all__ = ["Kept", "Settle", "still_streaming"]

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
        """Settle with the stream's `outcome` (None: its caller left it early)."""
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


def still_streaming(message: ReachMessage) -> ReachResult:
    """A repeat whose deadline passed while the first stream of its task id was still read."""
    meta = message.meta_info
    error = (
        f"task_id {meta.task_id!r} is still being streamed to its first caller; a repeat gets that "
        "stream's chunks once it ends, which did not happen within this call's deadline. Ask again "
        "later, or give a new task_id to run the task again"
    )
    # Never delivered, it waited in the router: the router's to answer for (DESIGN §6).
    return error_result(message, ResultStatus.TIMEOUT, ErrorKind.TIMEOUT, error, fault=Fault.ROUTER)
