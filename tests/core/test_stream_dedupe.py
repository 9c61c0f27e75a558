"""A stream whose caller chose its task id is delivered once within the dedupe window, like a
unary call: a repeat is answered with the first stream's chunks, never by running it again."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from reach_adapters import Capability, FunctionAgent, Router
from reach_adapters.errors import AgentCallError, IdempotencyConflictError
from tests.core.conftest import FAST
from tests.core.test_streaming import Streamer, collect


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


async def test_a_stream_left_early_answers_no_repeat_the_repeat_runs_it() -> None:
    router = Router(FAST)
    agent = Streamer("chat:talk:01")
    router.register(agent)
    async with asyncio.timeout(10):
        chunks = router.stream("talk", {}, task_id="t-1")
        assert await anext(chunks) == "chat:talk:01"
        await chunks.aclose()  # type: ignore[attr-defined]
    assert await collect(router, task_id="t-1") == ["chat:talk:01", "done"]
    assert agent.opened == 2


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


async def test_streams_are_not_deduplicated_without_a_window() -> None:
    router = Router(FAST.model_copy(update={"dedupe_window_s": 0}))
    agent = Streamer("chat:talk:01")
    router.register(agent)
    for _ in range(2):
        await collect(router, task_id="t-1")
    assert agent.opened == 2
