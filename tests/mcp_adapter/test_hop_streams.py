"""An MCP hop is unary: a tool call answers once. A stream through it (to a graph another reach
router serves, say) cannot come in the ``stream_mode`` asked, nor with ``subgraphs``: asked, the
call is refused as the caller's mistake, never answered with the final text in place of the
chunks (which a caller reading ``[mode, chunk]`` pairs would mis-read) and never with a misspelt
mode accepted. A stream asking no shape gets the answer as its one chunk."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph

from middleware import Fault, ResultStatus
from reach_adapters import Router
from reach_adapters.errors import InvalidMessageError
from reach_adapters.langchain import LangChainAgent
from reach_adapters.mcp import MCPServerAgent, RouterMCPServer

pytestmark = pytest.mark.timeout(60)

SAID = {"messages": [{"role": "user", "content": "hi"}]}


def memo_graph() -> Any:
    def reply(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"heard {len(state['messages'])}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=InMemorySaver())


async def streamed(router: Router, thread: str, **shape: Any) -> list[Any]:
    async with asyncio.timeout(20):
        return [c async for c in router.stream("memo", SAID, configurable={"thread_id": thread}, **shape)]


@pytest.mark.parametrize(
    "shape",
    [
        {"stream_mode": "updates"},
        {"stream_mode": ["updates", "values"]},
        {"stream_mode": "tokens"},
        {"subgraphs": True},
    ],
)
async def test_a_stream_shape_asked_through_an_mcp_hop_is_refused_not_dropped(shape: dict[str, Any]) -> None:
    async with Router() as far, Router() as near:
        far.register(LangChainAgent(memo_graph(), agent_id="notes:memo:01"))
        near.register(await MCPServerAgent.connect("far", server=RouterMCPServer(far).server))
        with pytest.raises(InvalidMessageError, match="does not stream: it answers once") as raised:
            await streamed(near, "t-1", **shape)
        refused = raised.value.result
        assert refused is not None
        assert (refused.status, refused.fault) == (ResultStatus.INVALID, Fault.CALLER)
        unary = await near.route("memo", SAID, configurable={"thread_id": "t-2"}, **shape)
        assert (unary.status, unary.fault) == (ResultStatus.INVALID, Fault.CALLER)
        # Neither reached the far graph, and neither counts against the hop.
        assert [info.calls for info in far.catalog()] == [0]
        assert [info.failures for info in near.catalog()] == [0]
        # Asking no shape, the stream is the answer, once.
        assert await streamed(near, "t-3") == ["heard 1"]
