"""Streams go through the same dispatch as unary calls: attempts, retry, fallback, the record."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

import pytest

from middleware import ReachMessage, ReachResult
from reach_adapters import Capability, ReachError, Router, RoutingPolicy
from reach_adapters.errors import AgentCallError, NoCandidateError, ReachTimeoutError
from reach_adapters.observability.metrics import ReachMetrics
from reach_adapters.router.decisions import DecisionRecord
from tests.core.conftest import FAST, agent_info, echo_agent


class Streamer:
    """Streams ``[agent id, "done"]``; with `fail`, raises it before the first chunk, or after it
    with ``late=True``; with `hold`, waits for it before the last chunk."""

    def __init__(
        self,
        agent_id: str,
        fail: Exception | None = None,
        *,
        late: bool = False,
        hold: asyncio.Event | None = None,
        **cap: Any,
    ) -> None:
        self.agent_id = agent_id
        self.capabilities = (Capability(name="talk", **cap),)
        self.fail = fail
        self.late = late
        self.hold = hold
        self.opened = 0
        self.closed = 0

    async def invoke(self, message: ReachMessage) -> ReachResult:
        raise AssertionError("streamed, not invoked")

    async def astream(self, message: ReachMessage) -> AsyncIterator[Any]:
        self.opened += 1
        try:
            if self.fail is not None and not self.late:
                raise self.fail
            yield self.agent_id
            if self.fail is not None:
                raise self.fail
            if self.hold is not None:
                await self.hold.wait()
            yield "done"
        finally:
            self.closed += 1


class Seen:
    def __init__(self) -> None:
        self.reaches: list[tuple[DecisionRecord, ReachResult]] = []

    def on_reach(self, record: DecisionRecord, result: ReachResult) -> None:
        self.reaches.append((record, result))


async def collect(router: Router, **options: Any) -> list[Any]:
    async with asyncio.timeout(10):
        return [chunk async for chunk in router.stream("talk", {}, **options)]


async def test_a_stream_failing_before_its_first_chunk_is_retried_on_the_next_candidate() -> None:
    router = Router(FAST)
    seen = Seen()
    router.add_observer(seen)
    first = Streamer("chat:talk:01", ConnectionResetError("dropped"), weight=100, read_only=True)
    second = Streamer("chat:talk:02", weight=1, read_only=True)
    router.register(first)
    router.register(second)
    assert await collect(router) == ["chat:talk:02", "done"]
    ((record, result),) = seen.reaches
    # Recorded like a unary call that was retried: both attempts, the second chosen.
    assert [(a.agent_id, a.status, a.fault) for a in record.attempts] == [
        ("chat:talk:01", "error", "agent"),
        ("chat:talk:02", "ok", None),
    ]
    assert (record.chosen, record.path, record.status) == ("chat:talk:02", "candidate", "ok")
    assert (result.agent_id, result.attempts, result.served_by, result.status) == (
        "chat:talk:02",
        2,
        "candidate",
        "ok",
    )
    assert result.timings.total_ms >= result.timings.agent_ms > 0
    assert router.explain(result.task_id) is record
    # The failure counts against the agent that failed; both streams were closed.
    assert agent_info(router, "chat:talk:01").failures == 1
    assert agent_info(router, "chat:talk:02").calls == 1
    assert (first.closed, second.closed) == (1, 1)
    assert agent_info(router, "chat:talk:02").in_flight == 0


async def test_a_retried_stream_is_counted_in_the_metrics_like_a_unary_call() -> None:
    router = Router(FAST)
    metrics = ReachMetrics(router)
    router.register(Streamer("chat:talk:01", ConnectionResetError("dropped"), weight=100, read_only=True))
    router.register(Streamer("chat:talk:02", weight=1, read_only=True))
    assert await collect(router) == ["chat:talk:02", "done"]
    sample = metrics.registry.get_sample_value
    labels = {"capability": "talk", "status": "ok", "served_by": "candidate", "fault": ""}
    assert sample("reach_reaches_total", labels) == 1.0
    assert sample("reach_retries_total", {"capability": "talk"}) == 1.0
    assert sample("reach_routing_latency_seconds_count", {"mode": "unicast"}) == 1.0


async def test_a_stream_falls_back_like_a_unary_call() -> None:
    router = Router(FAST)
    router.register(Streamer("chat:talk:01", ConnectionResetError("dropped"), read_only=True))
    router.register(echo_agent("chat:spare:01", capability="spare"))
    chunks = await collect(router, fallback=["chat:spare:01"])
    assert chunks[0]["agent"] == "chat:spare:01"
    record = router.recent_decisions(1)[0]
    assert record.path == "fallback"
    # As a unary call does: the only candidate tried again, then the fallback agent.
    assert [(a.agent_id, a.path) for a in record.attempts] == [
        ("chat:talk:01", "candidate"),
        ("chat:talk:01", "candidate"),
        ("chat:spare:01", "fallback"),
    ]


async def test_a_stream_failing_after_its_first_chunk_raises_and_is_recorded_as_failed() -> None:
    router = Router(FAST)
    seen = Seen()
    router.add_observer(seen)
    first = Streamer("chat:talk:01", ConnectionResetError("dropped"), late=True, weight=100, read_only=True)
    router.register(first)
    router.register(Streamer("chat:talk:02", weight=1, read_only=True))
    got: list[Any] = []

    async def read() -> None:
        async for chunk in router.stream("talk", {}):
            got.append(chunk)

    with pytest.raises(AgentCallError, match="dropped"):
        await read()
    assert got == ["chat:talk:01"]  # part of the answer arrived: never resent elsewhere
    ((record, result),) = seen.reaches
    assert [(a.agent_id, a.status) for a in record.attempts] == [("chat:talk:01", "error")]
    assert (record.status, result.status, result.fault, result.agent_id) == (
        "error",
        "error",
        "agent",
        "chat:talk:01",
    )
    assert result.delivered
    assert agent_info(router, "chat:talk:01").failures == 1
    assert first.closed == 1


async def test_a_stream_the_caller_leaves_early_is_recorded_as_cancelled_and_frees_its_slot() -> None:
    router = Router(FAST)
    seen = Seen()
    router.add_observer(seen)
    hold = asyncio.Event()
    agent = Streamer("chat:talk:01", hold=hold)
    router.register(agent)
    stream = router.stream("talk", {})
    assert isinstance(stream, AsyncGenerator)
    async with asyncio.timeout(10):
        assert await anext(stream) == "chat:talk:01"
        assert agent_info(router, "chat:talk:01").in_flight == 1
        await stream.aclose()
    ((record, result),) = seen.reaches
    assert (result.status, result.fault) == ("cancelled", "caller")
    assert record.status == "cancelled"
    info = agent_info(router, "chat:talk:01")
    assert (info.in_flight, info.calls, info.failures) == (0, 0, 0)  # no outcome held against it
    assert agent.closed == 1


async def test_a_stream_with_nothing_to_serve_it_raises_the_unary_error() -> None:
    router = Router(FAST)
    with pytest.raises(NoCandidateError):
        await collect(router)
    record = router.recent_decisions(1)[0]
    assert (record.status, record.path) == ("no_candidate", "none")


async def test_a_streams_attempts_are_limited_by_the_retry_rules() -> None:
    router = Router(RoutingPolicy(backoff_ms=0.0, jitter_ms=0.0, max_retries=1))
    agents = [Streamer(f"chat:talk:0{i}", ConnectionResetError("dropped"), read_only=True) for i in range(3)]
    for agent in agents:
        router.register(agent)
    with pytest.raises(ReachError, match="dropped"):
        await collect(router)
    assert sum(agent.opened for agent in agents) == 2
    assert len(router.recent_decisions(1)[0].attempts) == 2


async def test_an_astream_that_raises_when_called_fails_over_like_any_attempt() -> None:
    class Refusing(Streamer):
        def astream(self, message: ReachMessage) -> AsyncIterator[Any]:
            self.opened += 1
            raise ConnectionResetError("no stream today")

    router = Router(FAST)
    refusing = Refusing("chat:talk:01", weight=100, read_only=True)
    router.register(refusing)
    router.register(Streamer("chat:talk:02", weight=1, read_only=True))
    assert await collect(router) == ["chat:talk:02", "done"]
    assert refusing.opened == 1
    info = agent_info(router, "chat:talk:01")
    assert (info.failures, info.in_flight) == (1, 0)


async def test_a_stream_whose_time_runs_out_while_its_caller_pauses_is_not_held_against_the_agent() -> None:
    router = Router(FAST)
    # The agent waits before its last chunk: the time left runs out there.
    router.register(Streamer("chat:talk:01", hold=asyncio.Event(), timeout_ms=100))
    async with asyncio.timeout(10):
        chunks = router.stream("talk", {})
        assert await anext(chunks) == "chat:talk:01"
        await asyncio.sleep(0.2)
        with pytest.raises(ReachTimeoutError, match="while its caller was not reading it") as raised:
            await anext(chunks)
    assert raised.value.result is not None
    assert raised.value.result.fault == "caller"
    info = agent_info(router, "chat:talk:01")
    assert (info.failures, info.in_flight) == (0, 0)
