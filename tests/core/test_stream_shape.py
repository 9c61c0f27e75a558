"""``stream_mode`` and ``subgraphs`` shape the chunks of an agent that streams: an agent that does
not (a function, an MCP hop) would answer once and drop them silently, a misspelt mode with them.
So they go only to agents that stream: a capability served by one that does and one that does
not streams from the one that does, and with none that does, the call is the caller's mistake
(`invalid`), for streams and unary calls alike, never held against an agent."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from middleware import Fault, ReachMessage, ReachResult, ResultStatus
from reach_adapters import AgentHandle, AgentState, Capability, FunctionAgent, Router
from reach_adapters.errors import InvalidMessageError, NoCandidateError
from reach_adapters.router import ok_result
from reach_adapters.router.decisions import ExclusionKind
from tests.core.conftest import FAST, agent_info
from tests.core.test_streaming import Streamer, collect

NOT_STREAMED = "shapes the chunks of an agent that streams"


def talker(agent_id: str, heard: list[Any], capability: str = "talk") -> FunctionAgent:
    """Answers once; keeps what it was given."""

    async def talk(payload: Any) -> str:
        heard.append(payload)
        return "once"

    return FunctionAgent(talk, agent_id=agent_id, capabilities=[Capability(name=capability)])


class ShapedStreamer(Streamer):
    """A `Streamer` that keeps the shape each stream was asked in, answers unary calls, and can
    be taken offline."""

    def __init__(self, agent_id: str) -> None:
        super().__init__(agent_id)
        self.shapes: list[tuple[Any, bool]] = []
        self.handle: AgentHandle | None = None

    def attach(self, handle: AgentHandle) -> None:
        self.handle = handle

    async def invoke(self, message: ReachMessage) -> ReachResult:
        return ok_result(message, self.agent_id, "whole")

    async def astream(self, message: ReachMessage) -> AsyncIterator[Any]:
        meta = message.meta_info
        self.shapes.append((meta.stream_mode, meta.subgraphs))
        async for chunk in super().astream(message):
            yield chunk


@pytest.mark.parametrize(
    "shape",
    [
        {"stream_mode": "updates"},
        {"stream_mode": ["updates", "values"]},
        {"stream_mode": "tokens"},
        {"subgraphs": True},
    ],
)
async def test_a_stream_shape_asked_of_an_agent_that_does_not_stream_is_the_callers_mistake(
    shape: dict[str, Any],
) -> None:
    router = Router(FAST)
    heard: list[Any] = []
    router.register(talker("chat:talk:01", heard))
    with pytest.raises(InvalidMessageError, match=NOT_STREAMED) as raised:
        await collect(router, **shape)
    refused = raised.value.result
    assert refused is not None
    assert (refused.status, refused.fault, refused.delivered) == (ResultStatus.INVALID, Fault.CALLER, False)
    assert "chat:talk:01: does not stream: it answers once" in (refused.error or "")
    # A unary call asking a shape is refused alike; a directed one too.
    for result in (
        await router.route("talk", {}, **shape),
        await router.send("chat:talk:01", {}, **shape),
    ):
        assert (result.status, result.fault) == (ResultStatus.INVALID, Fault.CALLER), result
    assert heard == []
    assert agent_info(router, "chat:talk:01").failures == 0
    # Without one, it answers its stream once, as before.
    assert await collect(router) == ["once"]


async def test_a_stream_shape_goes_to_the_agent_that_streams_among_those_serving_it() -> None:
    router = Router(FAST)
    heard: list[Any] = []
    streamer = ShapedStreamer("chat:talk:01")
    router.register(streamer)
    # It would serve some of the calls (the strategy spreads them): never one asking a shape.
    router.register(talker("chat:talk:02", heard))
    for _ in range(6):
        assert await collect(router, stream_mode=["updates"], subgraphs=True) == ["chat:talk:01", "done"]
    assert streamer.shapes == [(["updates"], True)] * 6
    assert heard == []
    result = await router.route("talk", {}, stream_mode="updates")
    assert result.ok, result
    record = router.explain(result.task_id)
    assert record is not None
    assert [(e.agent_id, e.kind) for e in record.exclusions] == [("chat:talk:02", ExclusionKind.UNSTREAMED)]


async def test_with_the_agent_that_streams_out_of_service_nothing_else_serves_the_shape() -> None:
    """Not the caller's mistake then (an agent could serve it), and not served by one that would
    drop the shape: no candidate, fault router; a fallback that does not stream is passed over."""
    router = Router(FAST)
    heard: list[Any] = []
    streamer = ShapedStreamer("chat:talk:01")
    router.register(streamer)
    router.register(talker("chat:talk:02", heard))
    router.register(talker("chat:spare:01", heard, "spare"))
    assert streamer.handle is not None
    streamer.handle.set_state(AgentState.OFFLINE, "down for a test")
    with pytest.raises(NoCandidateError) as raised:
        await collect(router, stream_mode="updates", fallback=["chat:spare:01"])
    result = raised.value.result
    assert result is not None
    assert (result.status, result.fault) == (ResultStatus.NO_CANDIDATE, Fault.ROUTER)
    record = router.explain(result.task_id)
    assert record is not None
    assert {(e.agent_id, e.kind) for e in record.exclusions} == {
        ("chat:talk:01", ExclusionKind.STATE),
        ("chat:talk:02", ExclusionKind.UNSTREAMED),
        ("chat:spare:01", ExclusionKind.UNSTREAMED),
    }
    assert heard == []
    # Without a shape, the agent that answers once serves the stream.
    async with asyncio.timeout(10):
        assert [chunk async for chunk in router.stream("talk", {})] == ["once"]
