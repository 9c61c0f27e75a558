"""Streams, long tasks, cancellation and multi-turn conversations with a real A2A agent."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from reach_adapters import Router, TaskStatus
from reach_adapters.a2a import A2AAgent
from reach_adapters.errors import ReachError
from reach_adapters.security.guard import SecurityGuard
from reach_adapters.security.spec import SecuritySpec
from tests.a2a.agents import Served, SkillsExecutor, build_app, serve_agent, serve_app
from tests.refusing import refusing_requests
from tests.waiting import eventually


async def test_a_stream_yields_each_artifact_chunk(routed: Router) -> None:
    chunks = [chunk async for chunk in routed.stream("stream", "go")]
    assert chunks == ["one ", "two ", "three"]
    # The unary call gathers the chunks of one artifact into one text.
    assert (await routed.route("stream", "go")).payload == "one two three"


async def test_a_stream_of_an_agent_that_answers_once(routed: Router) -> None:
    assert [chunk async for chunk in routed.stream("hello", "ann")] == ["hello, ann"]
    with pytest.raises(ReachError, match="boom"):
        _ = [chunk async for chunk in routed.stream("fail", "x")]


async def test_a_long_task_through_submit_and_wait(routed: Router) -> None:
    record = await routed.submit("slow", {"seconds": 0.5})
    done = await routed.wait(record.task_id, timeout=20)
    assert done.status is TaskStatus.OK, done
    assert done.result is not None
    assert done.result.payload == "slept 0.5"


async def test_cancelling_a_submitted_task_cancels_the_remote_one(routed: Router, served: Served) -> None:
    record = await routed.submit("slow", {"seconds": 30})
    await eventually(
        lambda: bool(served.executor.record.started), timeout=20, what="the remote task to start"
    )
    await routed.cancel(record.task_id)
    remote = served.executor.record.started[0]
    await eventually(lambda: remote in served.executor.record.cancelled, what="CancelTask to reach the agent")


async def test_the_deadline_cancels_the_remote_task(routed: Router, served: Served) -> None:
    result = await routed.route("slow", {"seconds": 30}, timeout_ms=500)
    assert result.status.value == "timeout"
    await eventually(lambda: bool(served.executor.record.cancelled), what="CancelTask to reach the agent")
    assert served.executor.record.cancelled == served.executor.record.started


@pytest.fixture
async def polled() -> AsyncIterator[tuple[Router, Served]]:
    """An agent without streaming, asked to answer sends at once: its tasks are polled."""
    async with serve_agent(streaming=False) as served:
        agent = await A2AAgent.connect(
            served.url, options={"return_immediately": True, "poll_interval_s": 0.05}
        )
        router = Router()
        router.register(agent)
        try:
            yield router, served
        finally:
            await router.aclose()


async def test_a_task_of_an_agent_without_streaming_is_polled(polled: tuple[Router, Served]) -> None:
    router, served = polled
    assert (await router.route("slow", {"seconds": 0.3})).payload == "slept 0.3"
    assert [chunk async for chunk in router.stream("echo", "once")] == ["once"]
    record = await router.submit("slow", {"seconds": 30})
    await eventually(lambda: len(served.executor.record.started) == 3, what="the remote task to start")
    await router.cancel(record.task_id)
    remote = served.executor.record.started[2]
    await eventually(lambda: remote in served.executor.record.cancelled, what="CancelTask to reach the agent")


def refusing_follow_ups(app: Any, status: int) -> Any:
    """`app` behind a rate limiter that takes every send but answers `status` to the requests
    that follow a task (GetTask, SubscribeToTask)."""

    def follow_up(body: bytes) -> tuple[int, dict[str, str]] | None:
        return (status, {}) if b'"GetTask"' in body or b'"SubscribeToTask"' in body else None

    return refusing_requests(app, follow_up)


@pytest.mark.parametrize("status", [429, 503])
async def test_a_refusal_while_following_a_task_the_agent_took_is_no_refusal_of_the_call(status: int) -> None:
    """429 and 503 to the send say the agent never took the call; to a request following its task,
    they come after work it may have done: not sent to a replica unless safe to repeat."""
    executor = SkillsExecutor()

    def make(url: str) -> Any:
        return refusing_follow_ups(build_app(f"{url}/a2a", executor, streaming=False), status)

    async with serve_app(make) as (url, _), serve_agent(streaming=False) as spare:
        router = Router()
        polled = {"instance": "a", "return_immediately": True, "poll_interval_s": 0.05}
        router.register(await A2AAgent.connect(url, options=polled, overrides={"slow": {"weight": 100}}))
        router.register(
            await A2AAgent.connect(spare.url, options={"instance": "b"}, overrides={"slow": {"weight": 1}})
        )
        try:
            result = await router.route("slow", {"seconds": 0.2})
        finally:
            await router.aclose()
    assert (result.ok, result.delivered, result.attempts) == (False, True, 1), result.error
    assert "the outcome is unknown" in (result.error or "")
    assert (len(executor.record.started), spare.executor.record.started) == (1, [])


async def test_a_blocking_send_cancelled_before_its_answer() -> None:
    """An agent without streaming answers a blocking send once its task is final, so a call
    cancelled before the answer leaves no running task it could name; the agent serves on."""
    async with serve_agent(streaming=False) as served:
        router = Router()
        router.register(await A2AAgent.connect(served.url))
        try:
            call = asyncio.ensure_future(router.route("slow", {"seconds": 0.3}))
            await eventually(lambda: bool(served.executor.record.started), what="the remote task to start")
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            assert (await router.route("echo", "again")).payload == "again"
            assert served.executor.record.cancelled == []
        finally:
            await router.aclose()


def _context(result: object) -> str:
    ids = result.extra["a2a"]  # type: ignore[attr-defined]
    assert isinstance(ids, dict)
    return str(ids["context_id"])


async def test_input_required_then_resume_on_the_same_thread(routed: Router) -> None:
    asked = await routed.route("ask", "hi", configurable={"thread_id": "alice"})
    assert asked.status.value == "input_required"
    context = _context(asked)
    other = await routed.route("ask", "hi", configurable={"thread_id": "bob"})
    assert _context(other) != context
    answered = await routed.route("ask", None, configurable={"thread_id": "alice"}, resume="Ann")
    assert answered.status.value == "ok", answered.error
    assert answered.payload == f"hello Ann (context {context})"
    # The conversation goes on in the same context; nothing waits for an answer any more.
    assert _context(await routed.route("echo", "more", configurable={"thread_id": "alice"})) == context
    again = await routed.route("ask", None, configurable={"thread_id": "alice"}, resume="Ann")
    # Another replica might hold the question: the call is not sent, and not the caller's fault.
    assert (again.status.value, again.fault, again.delivered) == ("error", "router", False)
    assert "waits on no question" in (again.error or "")
    assert "its last task on the thread here ended (answered already?)" in (again.error or "")


async def test_a_principal_cannot_answer_the_question_another_was_asked(agent: A2AAgent) -> None:
    """The agent keeps threads as the router scoped them: bob naming alice's thread finds no
    question (and is shown the thread he named); alice's answer still reaches hers."""
    spec = SecuritySpec.model_validate({"principals": {"alice": {"allow": ["*"]}, "bob": {"allow": ["*"]}}})
    async with Router(guard=SecurityGuard(spec)) as router:
        router.register(agent)
        thread = {"thread_id": "t"}
        asked = await router.route("ask", "hi", configurable=thread, principal="alice")
        assert asked.status.value == "input_required"
        bobs = await router.route("ask", None, configurable=thread, resume="by bob", principal="bob")
        assert (bobs.status.value, bobs.delivered) == ("error", False)
        assert "thread 't' waits on no question" in (bobs.error or "")
        answered = await router.route("ask", None, configurable=thread, resume="Ann", principal="alice")
        assert answered.payload == f"hello Ann (context {_context(asked)})"


async def test_resume_needs_a_thread(routed: Router) -> None:
    result = await routed.route("ask", None, resume="Ann")
    assert result.status.value == "invalid"
    assert "configurable={'thread_id'" in (result.error or "")
    assert result.extra["fix_options"] == {"configurable": {"thread_id": "<thread id>"}}
