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
from pydantic import JsonValue

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


class Review(TypedDict, total=False):
    finance: str
    legal: str


def two_reviews_graph() -> Any:
    """Two reviews side by side, each stopping at an interrupt: one resume answers both by id."""

    def finance(state: Review) -> dict[str, Any]:
        return {"finance": interrupt("finance ok?")}

    def legal(state: Review) -> dict[str, Any]:
        return {"legal": interrupt("legal ok?")}

    builder = StateGraph(Review)
    builder.add_node("finance", finance)
    builder.add_node("legal", legal)
    builder.add_edge(START, "finance")
    builder.add_edge(START, "legal")
    builder.add_edge("finance", END)
    builder.add_edge("legal", END)
    return builder.compile(checkpointer=InMemorySaver())


async def test_an_mcp_client_resumes_two_interrupts_by_their_ids() -> None:
    async with Router() as router:
        router.register(LangChainAgent(two_reviews_graph(), agent_id="support:review:01"))
        async with mcp.Client(RouterMCPServer(router).server) as client:
            asked = await client.call_tool("review", {}, meta=thread("t-2"))
            assert asked.meta is not None
            pending = asked.meta["agent-reach/interrupts"]
            assert sorted(item["value"] for item in pending) == ["finance ok?", "legal ok?"]
            answers = {item["id"]: item["value"].split()[0] for item in pending}
            done = await client.call_tool("review", {}, meta=thread("t-2", **{"agent-reach/resume": answers}))
    assert not done.is_error, done.content
    assert done.structured_content == {"finance": "finance", "legal": "legal"}


async def test_two_interrupts_cross_an_mcp_hop_with_their_ids() -> None:
    async with Router() as far, Router() as near:
        far.register(LangChainAgent(two_reviews_graph(), agent_id="support:review:01"))
        near.register(await MCPServerAgent.connect("far", server=RouterMCPServer(far).server))
        configurable = {"thread_id": "t-hop-2"}
        asked = await near.route("review", {}, configurable=configurable)
        assert asked.status is ResultStatus.INPUT_REQUIRED
        pending = asked.extra["interrupts"]
        assert isinstance(pending, list)
        answers: dict[str, JsonValue] = {str(item["id"]): "yes" for item in pending if isinstance(item, dict)}
        assert len(answers) == 2
        done = await near.route("review", None, configurable=configurable, resume=answers)
    assert done.ok, done.error
    assert done.payload == {"finance": "yes", "legal": "yes"}


async def test_a_misspelt_agent_reach_key_is_refused_naming_the_key_meant() -> None:
    async with Router() as router:
        router.register(LangChainAgent(chat_graph(), agent_id="support:refund:01"))
        async with mcp.Client(RouterMCPServer(router).server) as client:
            user = {"messages": [{"role": "user", "content": "refund order 42"}]}
            typo = cast(RequestParamsMeta, {"agent-reach/configurabel": {"thread_id": "t-1"}})
            refused = await client.call_tool("refund", user, meta=typo)
            assert refused.is_error
            assert "did you mean 'agent-reach/configurable'?" in refused.content[0].text  # type: ignore[union-attr]
            # Said as any failed result says it, for a reach router calling this one.
            assert refused.meta is not None
            assert (refused.meta["agent-reach/status"], refused.meta["agent-reach/fault"]) == (
                "invalid",
                "caller",
            )
            # Keys far from any it reads are another version's or protocol's, and left alone.
            other = cast(RequestParamsMeta, {**thread("t-2"), "agent-reach/priority_hint": 3})
            asked = await client.call_tool("refund", user, meta=other)
            assert asked.meta is not None
            assert asked.meta["agent-reach/status"] == "input_required"
    assert [info.failures for info in router.catalog()] == [0]


def topic_workflow() -> Any:
    """LangGraph's functional API: an entrypoint of a plain string, served as a tool of one
    boxed argument, ``{"input": ...}``."""
    from langgraph.func import entrypoint

    @entrypoint(checkpointer=InMemorySaver())
    def review(topic: str) -> str:
        return f"{topic}: {interrupt('publish?')}"

    return review


@pytest.mark.parametrize("arguments", [None, {}], ids=["none", "empty"])
async def test_a_resume_of_a_tool_of_one_boxed_argument_needs_no_input(arguments: Any) -> None:
    # An answer is no input: as a Python caller resumes with None, an MCP client gives none.
    async with Router() as router:
        router.register(LangChainAgent(topic_workflow(), agent_id="write:review:01"))
        served = RouterMCPServer(router)
        async with mcp.Client(served.server) as client:
            asked = await client.call_tool("review", {"input": "cats"}, meta=thread("t-1"))
            assert asked.meta is not None
            assert asked.meta["agent-reach/status"] == "input_required"
            answer = thread("t-1", **{"agent-reach/resume": "yes"})
            done = await client.call_tool("review", arguments, meta=answer)
            assert not done.is_error, done.content
            assert done.structured_content == {"result": "cats: yes"}
            # Outside a resume the one argument is still required.
            refused = await client.call_tool("review", arguments, meta=thread("t-2"))
            assert refused.is_error
