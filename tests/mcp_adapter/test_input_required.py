"""A LangGraph agent that stops at ``interrupt()``, served over MCP: the client sees the question
(whether or not the tool declares an output schema the question does not fit), a reach router
on the calling side gets ``input_required`` with the question as payload, and both resume."""

from __future__ import annotations

from typing import Any, TypedDict, cast

import mcp
import pytest
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt
from mcp.types import RequestParamsMeta

from middleware import ResultStatus
from reach_adapters import Router
from reach_adapters.langchain import LangChainAgent
from reach_adapters.mcp import MCPServerAgent, RouterMCPServer

pytestmark = pytest.mark.timeout(60)

QUESTION = {"question": "approve the refund of order 42?", "amount": 42}


def chat_graph() -> Any:
    """A chat graph: its tool declares an output schema (``{"result": ...}``)."""

    def review(state: MessagesState) -> dict[str, Any]:
        decision = interrupt(QUESTION)
        return {"messages": [AIMessage(f"refund {decision}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("review", review)
    builder.add_edge(START, "review")
    builder.add_edge("review", END)
    return builder.compile(checkpointer=InMemorySaver())


class Order(TypedDict, total=False):
    order_id: str
    approved: str


def order_graph() -> Any:
    def ask(state: Order) -> dict[str, Any]:
        return {"approved": interrupt(QUESTION)}

    builder = StateGraph(Order)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    return builder.compile(checkpointer=InMemorySaver())


def thread(name: str, **more: Any) -> RequestParamsMeta:
    return cast(RequestParamsMeta, {"agent-reach/configurable": {"thread_id": name}, **more})


async def test_an_mcp_client_reads_the_question_of_a_tool_with_an_output_schema() -> None:
    async with Router() as router:
        router.register(LangChainAgent(chat_graph(), agent_id="support:refund:01"))
        served = RouterMCPServer(router)
        async with mcp.Client(served.server) as client:
            (tool,) = (await client.list_tools()).tools
            assert tool.output_schema is not None
            user = {"messages": [{"role": "user", "content": "refund order 42"}]}
            # The SDK's client checks every non-error result against the output schema.
            asked = await client.call_tool("refund", user, meta=thread("t-1"))
            assert asked.meta is not None
            assert asked.meta["agent-reach/status"] == "input_required"
            assert asked.meta["agent-reach/asked"] == QUESTION
            assert asked.content[0].type == "text"
            assert asked.content[0].text.startswith("input required: ")
            done = await client.call_tool("refund", {}, meta=thread("t-1", **{"agent-reach/resume": "yes"}))
    assert not done.is_error
    assert done.structured_content == {"result": "refund yes"}


@pytest.mark.parametrize("graph", [chat_graph, order_graph], ids=["output-schema", "no-output-schema"])
async def test_input_required_crosses_an_mcp_hop_with_its_question(graph: Any) -> None:
    async with Router() as far, Router() as near:
        far.register(LangChainAgent(graph(), agent_id="support:refund:01"))
        near.register(await MCPServerAgent.connect("far", server=RouterMCPServer(far).server))
        payload = (
            {"messages": [{"role": "user", "content": "refund order 42"}]}
            if graph is chat_graph
            else {"order_id": "42"}
        )
        configurable = {"thread_id": "t-hop"}
        asked = await near.route("refund", payload, configurable=configurable)
        assert (asked.status, asked.payload) == (ResultStatus.INPUT_REQUIRED, QUESTION)
        assert asked.fault is None
        done = await near.route("refund", None, configurable=configurable, resume="yes")
    assert done.ok, done.error
    assert [info.failures for info in near.catalog()] == [0]
