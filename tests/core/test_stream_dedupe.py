"""A stream whose caller chose its task id is delivered once within the dedupe window, like a
unary call: a repeat is answered with the first stream's chunks, never by running it again."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from middleware import MetaInfo, ReachMessage, ReachResult
from reach_adapters import Capability, FunctionAgent, Router
from reach_adapters.errors import (
    AgentCallError,
    IdempotencyConflictError,
    InvalidMessageError,
    ReachError,
    ReachTimeoutError,
)
from tests.core.conftest import FAST
from tests.core.test_streaming import Seen, Streamer, collect


async def test_a_repeated_stream_gets_the_first_streams_chunks_and_the_agent_runs_once() -> None:
    router = Router(FAST)
    agent = Streamer("chat:talk:01")
    router.register(agent)
    assert await collect(router, task_id="t-1") == ["chat:talk:01", "done"]
    assert await collect(router, task_id="t-1") == ["chat:talk:01", "done"]
    assert agent.opened == 1
    # Another task id is another task.
    assert await collect(router, task_id="t-2") == ["chat:talk:01", "done"]
    assert agent.opened == 2


async def test_a_repeat_arriving_while_the_first_streams_waits_for_it() -> None:
    router = Router(FAST)
    hold = asyncio.Event()
    agent = Streamer("chat:talk:01", hold=hold)
    router.register(agent)
    first = asyncio.create_task(collect(router, task_id="t-1"))
    while not agent.opened:
        await asyncio.sleep(0.001)
    repeat = asyncio.create_task(collect(router, task_id="t-1"))
    await asyncio.sleep(0.01)
    assert not repeat.done()
    hold.set()
    assert await first == ["chat:talk:01", "done"]
    assert await repeat == ["chat:talk:01", "done"]
    assert agent.opened == 1


async def leave_early(router: Router) -> None:
    """Stream task "t-1" from "talk", read its first chunk, and stop reading."""
    async with asyncio.timeout(10):
        chunks = router.stream("talk", {}, task_id="t-1")
        assert await anext(chunks) == "chat:talk:01"
        await chunks.aclose()  # type: ignore[attr-defined]


async def test_a_stream_left_early_is_streamed_again_by_its_repeat_when_safe_to_repeat() -> None:
    router = Router(FAST)
    agent = Streamer("chat:talk:01", read_only=True)
    router.register(agent)
    await leave_early(router)
    assert await collect(router, task_id="t-1") == ["chat:talk:01", "done"]
    assert agent.opened == 2


async def test_a_stream_left_early_is_not_streamed_again_by_its_repeat_otherwise() -> None:
    router = Router(FAST)
    agent = Streamer("chat:talk:01")
    router.register(agent)
    await leave_early(router)
    # The agent had the task and may have done the work: the repeat learns how it ended.
    with pytest.raises(ReachError, match="stopped reading the stream of agent chat:talk:01"):
        await collect(router, task_id="t-1")
    assert agent.opened == 1


async def test_a_stream_that_failed_after_its_first_chunk_fails_its_repeat_alike() -> None:
    router = Router(FAST)
    agent = Streamer("chat:talk:01", ConnectionResetError("dropped"), late=True)
    router.register(agent)
    for _ in range(2):
        with pytest.raises(AgentCallError, match="dropped"):
            await collect(router, task_id="t-1")
    assert agent.opened == 1


async def test_a_stream_too_large_to_keep_refuses_its_repeat_rather_than_running_it_again() -> None:
    router = Router(FAST.model_copy(update={"dedupe_max_result_bytes": 20}))
    agent = Streamer("chat:talk:01")
    router.register(agent)
    assert await collect(router, task_id="t-1") == ["chat:talk:01", "done"]
    with pytest.raises(IdempotencyConflictError, match="dedupe_max_result_bytes, 20 bytes"):
        await collect(router, task_id="t-1")
    assert agent.opened == 1


async def test_an_agent_that_does_not_stream_answers_a_repeat_with_its_one_chunk() -> None:
    calls: list[Any] = []

    async def talk(text: str) -> dict[str, Any]:
        calls.append(text)
        return {"said": text}

    router = Router(FAST)
    router.register(FunctionAgent(talk, agent_id="chat:talk:01", capabilities=[Capability(name="talk")]))
    for _ in range(2):
        async with asyncio.timeout(10):
            chunks = [c async for c in router.stream("talk", {"text": "hi"}, task_id="t-1")]
        assert chunks == [{"said": "hi"}]
    assert calls == ["hi"]


async def test_a_task_id_streamed_first_is_refused_for_a_call_and_the_other_way_round() -> None:
    router = Router(FAST)
    router.register(Streamer("chat:talk:01"))
    await collect(router, task_id="t-1")
    result = await router.route("talk", {}, task_id="t-1")
    assert result.error_type == "IdempotencyConflictError"
    assert "stream from 'talk', this request would route to 'talk'" in (result.error or "")
    await router.route("talk", {}, task_id="t-2")
    with pytest.raises(IdempotencyConflictError, match="route to 'talk', this request would stream"):
        await collect(router, task_id="t-2")


async def test_a_repeat_asking_chunks_of_another_shape_is_refused() -> None:
    """Chunks kept in one ``stream_mode`` (or without ``subgraphs``) cannot answer a repeat that
    would read them in another; the same shape, a list of modes given again (in any order), is a
    repeat."""
    router = Router(FAST)
    router.register(Streamer("chat:talk:01"))
    first = await collect(router, task_id="t-1", stream_mode=["values"])
    assert await collect(router, task_id="t-1", stream_mode=["values"]) == first
    with pytest.raises(IdempotencyConflictError, match=r"the stream's chunks differ \(subgraphs\)"):
        await collect(router, task_id="t-1", stream_mode=["values"], subgraphs=True)
    with pytest.raises(IdempotencyConflictError, match=r"the stream's chunks differ \(stream_mode\)"):
        await collect(router, task_id="t-1")
    # The same modes in another order are the same chunks (LangGraph reads a set of them).
    both = await collect(router, task_id="t-2", stream_mode=["values", "updates"])
    assert await collect(router, task_id="t-2", stream_mode=["updates", "values", "updates"]) == both


async def test_streams_are_not_deduplicated_without_a_window() -> None:
    router = Router(FAST.model_copy(update={"dedupe_window_s": 0}))
    agent = Streamer("chat:talk:01")
    router.register(agent)
    for _ in range(2):
        await collect(router, task_id="t-1")
    assert agent.opened == 2


async def test_an_agent_whose_cleanup_is_cancelled_still_frees_its_task_id_for_a_repeat() -> None:
    class Helper:
        """Left early, it awaits a helper task it cancels: the cancellation comes out of aclose()."""

        agent_id = "chat:talk:01"
        capabilities = (Capability(name="talk", read_only=True),)
        opened = 0

        async def invoke(self, message: ReachMessage) -> ReachResult:
            raise AssertionError("streamed, not invoked")

        async def astream(self, message: ReachMessage) -> AsyncIterator[Any]:
            self.opened += 1
            helper = asyncio.create_task(asyncio.sleep(60))
            try:
                yield "one"
                yield "two"
            except GeneratorExit:
                helper.cancel()
                await helper
            helper.cancel()

    router = Router(FAST)
    seen = Seen()
    router.add_observer(seen)
    agent = Helper()
    router.register(agent)
    async with asyncio.timeout(10):
        chunks = router.stream("talk", {}, task_id="t-1")
        assert await anext(chunks) == "one"
        with pytest.raises(asyncio.CancelledError):
            await chunks.aclose()  # type: ignore[attr-defined]
        # Recorded all the same, as left by its caller.
        assert [(record.status, result.fault) for record, result in seen.reaches] == [("cancelled", "caller")]
        # Left early, and safe to repeat: the repeat streams the task itself, not waiting for good.
        assert await collect(router, task_id="t-1") == ["one", "two"]
    assert agent.opened == 2


async def test_a_repeat_waits_for_the_first_stream_no_longer_than_its_own_deadline() -> None:
    router = Router(FAST)
    agent = Streamer("chat:talk:01")
    router.register(agent)
    async with asyncio.timeout(10):
        first = router.stream("talk", {}, task_id="t-1")
        assert await anext(first) == "chat:talk:01"  # and its caller pauses
        with pytest.raises(ReachTimeoutError, match="still being streamed to its first caller") as raised:
            await collect(router, task_id="t-1", timeout_ms=100)
        assert raised.value.result is not None
        assert (raised.value.result.fault, raised.value.result.delivered) == ("router", False)
        assert [chunk async for chunk in first] == ["done"]
    assert await collect(router, task_id="t-1") == ["chat:talk:01", "done"]
    assert agent.opened == 1


async def test_a_repeat_without_a_deadline_waits_as_long_as_a_stream_may_run() -> None:
    router = Router(FAST)
    router.register(Streamer("chat:talk:01", timeout_ms=300))
    async with asyncio.timeout(10):
        first = router.stream("talk", {}, task_id="t-1")
        assert await anext(first) == "chat:talk:01"
        with pytest.raises(ReachTimeoutError, match="still being streamed"):
            await collect(router, task_id="t-1")
        await first.aclose()  # type: ignore[attr-defined]


async def test_a_task_coming_back_mid_stream_is_refused_as_a_loop_not_left_waiting_on_itself() -> None:
    router = Router(FAST)

    class Looper:
        agent_id = "chat:talk:01"
        capabilities = (Capability(name="talk", timeout_ms=5000),)

        async def invoke(self, message: ReachMessage) -> ReachResult:
            raise AssertionError("streamed, not invoked")

        async def astream(self, message: ReachMessage) -> AsyncIterator[Any]:
            yield "one"
            again = await router.route("talk", {}, task_id=message.meta_info.task_id)
            yield again.error_type

    router.register(Looper())
    async with asyncio.timeout(3):
        assert await collect(router, task_id="t-1") == ["one", "LoopDetectedError"]


async def test_a_prepared_message_is_deduplicated_only_when_it_was_given_its_task_id() -> None:
    router = Router(FAST)
    agent = Streamer("chat:talk:01")
    router.register(agent)
    made_up = ReachMessage(raw_payload={}, meta_info=MetaInfo(capability="talk"))
    chosen = ReachMessage(raw_payload={}, meta_info=MetaInfo(capability="talk", task_id="t-1"))
    async with asyncio.timeout(10):
        for message in (made_up, made_up, chosen, chosen):
            assert [chunk async for chunk in router.dispatch_stream(message)] == ["chat:talk:01", "done"]
        assert agent.opened == 3
        with pytest.raises(InvalidMessageError, match="unicast message naming its capability"):
            await anext(router.dispatch_stream(ReachMessage(raw_payload={})))
