"""Streams go through the same dispatch as unary calls: selection, admission, attempts with retry
and fallback, the decision record, the log line, observers and spans. What differs is the attempt:
it opens the agent's stream up to its first chunk, and the rest of the stream is read afterwards,
in flight on the same slot, under the same deadline, its outcome recorded when it ends."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Any, Final, cast

from pydantic import JsonValue

from middleware import Fault, ReachMessage, ReachResult, ResultStatus, Timings, ensure_json
from middleware.fast import amend, build_trusted
from reach_adapters.errors import raise_for_status
from reach_adapters.router.agent import ok_result
from reach_adapters.router.decisions import DecisionRecord
from reach_adapters.router.delivery import admit_safely, deliver
from reach_adapters.router.dispatcher import Dispatcher
from reach_adapters.router.inflight import InFlight
from reach_adapters.router.outcomes import (
    UNKNOWN_OUTCOME,
    ErrorKind,
    StreamEnded,
    account,
    error_result,
    from_exception,
    returned,
    timed_out,
)
from reach_adapters.router.policy import AgentErrors
from reach_adapters.router.recording import record_outcome
from reach_adapters.router.repeats import Kept, Settle
from reach_adapters.router.state import Slot

__all__ = ["stream_message"]

logger = logging.getLogger(__name__)


class _End:
    """The agent's stream is exhausted."""


END: Final = _End()


async def stream_message(dispatcher: Dispatcher, message: ReachMessage) -> AsyncGenerator[JsonValue, None]:
    """Dispatch like `route`, then yield the chosen agent's chunks.

    An agent streams when it has ``astream(message)``, an async iterator of JSON-safe chunks; one
    that does not is invoked, and its payload is the one chunk (a call asking its chunks in a
    ``stream_mode``, or with ``subgraphs``, never goes to it: `selection.exclusion`). Until the
    first chunk arrives a failing candidate is replaced by the next as in `route` (a transient
    failure, work safe to repeat); after it, a failure raises, since the caller already holds part
    of the answer.
    """
    opener = _Opener(dispatcher)
    result = await dispatcher.dispatch(message, opener)
    stream = opener.opened
    if stream is None:
        payload = raise_for_status(result).payload
        if result.served_by != "deduplicated":
            yield payload
            return
        # A repeat of a stream's task id: the first stream's chunks, as `_Opener.settles` kept them.
        for kept in cast(list[JsonValue], payload):
            yield kept
        return
    try:
        chunk = stream.first
        while not isinstance(chunk, _End):
            yield chunk
            chunk = await stream.next()
    finally:
        await stream.end()


class _Opener:
    """The attempts of one `Router.stream` call (an `attempts.Opener`), and the stream it opened."""

    __slots__ = ("_dispatcher", "opened")

    def __init__(self, dispatcher: Dispatcher) -> None:
        self._dispatcher = dispatcher
        self.opened: _Stream | None = None

    async def attempt(
        self, slot: Slot, message: ReachMessage, deadline: float, errors: AgentErrors
    ) -> tuple[ReachResult, float]:
        """Deliver to `slot` up to the first chunk: a failure before it is an attempt's failure."""
        astream = getattr(slot.runtime.agent, "astream", None)
        if astream is None:
            return await deliver(slot, message, deadline, errors)
        now = time.time()
        # The whole stream is bounded like a call; its first chunk by this attempt's share too.
        ends = min(now + slot.capability.timeout_ms / 1000.0, message.meta_info.deadline or deadline)
        budget = min(ends, deadline) - now
        admitted = admit_safely(slot, message, budget, errors)
        if isinstance(admitted, ReachResult):
            return admitted, 0.0
        stream = _Stream(slot, admitted, astream, ends, errors)
        try:
            first = await stream.pull(budget)
        except BaseException:
            await stream.close(None)
            raise
        if isinstance(first, ReachResult):
            return first, await stream.close(first)
        stream.first = first
        self.opened = stream
        to_first_ms = (time.perf_counter() - stream.flight.start) * 1000.0
        return ok_result(admitted, slot.runtime.agent_id, None), to_first_ms

    def takes_over(
        self, record: DecisionRecord, result: ReachResult, keep: bool, start: float, leave: Callable[[], None]
    ) -> bool:
        """Whether the stream is open, and records the outcome itself when it ends; `start` is
        when the dispatch began (``time.perf_counter()``), which the stream's total counts from."""
        stream = self.opened
        if stream is None:
            return False
        stream.hold(self._dispatcher, record, result, keep, start)
        stream.leave = leave
        return True

    def settles(self, result: ReachResult, settle: Settle, limit: int) -> None:
        stream = self.opened
        if stream is not None:
            stream.kept = Kept(settle, limit)
            if not isinstance(stream.first, _End):
                stream.kept.add(stream.first)
        elif result.status is ResultStatus.OK:
            # An agent that does not stream: its payload was the one chunk.
            settle(result.model_copy(update={"payload": [result.payload]}), True)
        else:
            settle(result, True)


class _Stream:
    """An agent's open stream: read one step at a time, in flight until `end`."""

    __slots__ = (
        "_held",
        "astream",
        "elapsed_ms",
        "ends",
        "errors",
        "first",
        "flight",
        "iterator",
        "kept",
        "leave",
        "message",
        "outcome",
        "slot",
    )

    def __init__(
        self,
        slot: Slot,
        message: ReachMessage,
        astream: Callable[[ReachMessage], Any],
        ends: float,
        errors: AgentErrors,
    ) -> None:
        self.slot = slot
        self.message = message
        self.ends = ends
        self.errors = errors
        self.astream = astream
        self.iterator: AsyncIterator[Any] | None = None
        self.flight = InFlight(slot, message.meta_info)
        self.first: JsonValue | _End = END
        self.outcome: ReachResult | None = None
        self._held: tuple[Dispatcher, DecisionRecord, ReachResult, bool, float] | None = None
        # Set when the stream's task id is deduplicated (`_Opener.settles`).
        self.kept: Kept | None = None
        # The stream's time in milliseconds, once closed.
        self.elapsed_ms = 0.0
        # Takes the task off the dispatcher's running ones (`_Opener.takes_over`).
        self.leave: Callable[[], None] | None = None

    async def pull(self, budget_s: float) -> JsonValue | _End | ReachResult:
        """The next chunk, `END`, or what the failure to get it means.

        The hop and the deadline wrap this one step, never a yield, so the caller's code between
        chunks runs outside the routed call and cannot be cancelled by its deadline.
        """
        flight = self.flight
        try:
            flight.enter(budget_s)
            try:
                if self.iterator is None:
                    # Opened here, so an agent whose astream() raises at once fails like any other.
                    self.iterator = self.astream(self.message)
                chunk = await anext(self.iterator)
            except asyncio.CancelledError:
                flight.cancelled()
                raise
            finally:
                flight.exit()
            return ensure_json(chunk, where="chunk")
        except StopAsyncIteration:
            return END
        except TimeoutError:
            return timed_out(self.message, self.slot, budget_s, flight.on_caller())
        except StreamEnded as ended:
            return returned(self.message, self.slot.runtime.agent_id, ended.result)
        except Exception as exc:  # noqa: BLE001 - any agent failure becomes a result
            return from_exception(self.message, self.slot.runtime.agent_id, exc, self.errors)

    async def next(self) -> JsonValue | _End:
        """The next chunk or `END`; a failure now raises, as the caller holds part of the answer."""
        left_s = self.ends - time.time()
        got = await self.pull(left_s)
        if isinstance(got, ReachResult) and left_s <= 0 and got.error_type == ErrorKind.TIMEOUT:
            # The time went between chunks, while the caller was not reading: not the agent's.
            got = self._caller_out_of_time()
        if isinstance(got, ReachResult):
            self.outcome = got
            return raise_for_status(got).payload  # a failed result: raises its ReachError
        if isinstance(got, _End):
            self.outcome = ok_result(self.message, self.slot.runtime.agent_id, None)
        elif self.kept is not None:
            self.kept.add(got)
        return got

    def _caller_out_of_time(self) -> ReachResult:
        agent_id = self.slot.runtime.agent_id
        error = (
            f"the stream from agent {agent_id} ran out of time (its deadline, or the capability's "
            "timeout_ms) while its caller was not reading it; read a stream as it comes, or give "
            "it more time"
        )
        status, kind = ResultStatus.TIMEOUT, ErrorKind.TIMEOUT
        return error_result(
            self.message, status, kind, error, fault=Fault.CALLER, agent_id=agent_id, delivered=True
        )

    async def close(self, outcome: ReachResult | None) -> float:
        """Close the agent's iterator and free the slot; count `outcome` (None: no outcome, the
        caller stopped). Returns the stream's time in milliseconds."""
        try:
            aclose = getattr(self.iterator, "aclose", None)
            if aclose is not None:
                await aclose()
        except Exception:
            logger.warning("closing the stream of agent %s failed", self.slot.runtime.agent_id, exc_info=True)
        finally:
            self.elapsed_ms = elapsed_ms = self.flight.close()
            if outcome is None:
                self.flight.abandon()
            else:
                account(self.message, self.slot, outcome, self.flight.agent_ms(elapsed_ms))
        return elapsed_ms

    def hold(
        self, dispatcher: Dispatcher, record: DecisionRecord, result: ReachResult, keep: bool, start: float
    ) -> None:
        """Keep the dispatch's record and result, to finish them when the stream ends."""
        self._held = (dispatcher, record, result, keep, start)

    async def end(self) -> None:
        """The stream is over (exhausted, failed, or left by the caller): close it, then finish its
        decision record, attempt and result like a unary call's, and record them; then answer
        repeats of its task id, and take the task off the running ones."""
        if self.first is END and self.outcome is None:
            self.outcome = ok_result(self.message, self.slot.runtime.agent_id, None)
        outcome = self.outcome
        try:
            await self.close(outcome)
        finally:
            # Even when closing was cancelled: recorded, and repeats do not wait for good.
            ended = self._left() if outcome is None else outcome
            if self._held is not None:
                self._record(ended, self.elapsed_ms)
            if self.kept is not None:
                # A stream left early may have done the work: a repeat runs it again only when
                # that is safe, and gets how it ended otherwise.
                again = outcome is None and self.slot.capability.safe_to_repeat
                self.kept.answer(self.message, None if again else ended)
            if self.leave is not None:
                self.leave()

    def _left(self) -> ReachResult:
        """How a stream its caller stopped reading before its end ended."""
        agent_id = self.slot.runtime.agent_id
        error = f"the caller stopped reading the stream of agent {agent_id} before its end; {UNKNOWN_OUTCOME}"
        kind = ErrorKind.CANCELLED
        return error_result(
            self.message,
            ResultStatus.CANCELLED,
            kind,
            error,
            fault=Fault.CALLER,
            agent_id=agent_id,
            delivered=True,
        )

    def _record(self, outcome: ReachResult, elapsed_ms: float) -> None:
        assert self._held is not None
        dispatcher, record, held, keep, start = self._held
        timings = held.timings
        amend(
            outcome,
            {
                name: getattr(held, name)
                for name in ("task_id", "trace_id", "capability", "attempts", "served_by", "agent_id")
            },
        )
        # From the dispatch's start, not its total plus the time since: the step between the two
        # would be counted by neither, and the total could come out below the agent's time.
        total_ms = (time.perf_counter() - start) * 1000.0
        amend(
            outcome,
            {
                "delivered": True,
                "timings": build_trusted(
                    Timings,
                    {
                        "routing_ms": timings.routing_ms,
                        "queueing_ms": timings.queueing_ms,
                        "agent_ms": elapsed_ms,
                        "total_ms": total_ms,
                    },
                ),
            },
        )
        attempt = record.attempts[-1]
        attempt.status, attempt.elapsed_ms = outcome.status, elapsed_ms
        attempt.error_type, attempt.error, attempt.fault = outcome.error_type, outcome.error, outcome.fault
        record.status = outcome.status
        record_outcome(dispatcher.decisions, dispatcher.observers, record, outcome, keep)
