"""A caller's mistake that a call option fixes (a checkpointed graph called without a thread, a
resume that does not answer every interrupt) is told to an MCP client in its own terms: the
request `_meta` key to send, as JSON, where a Python caller is told the keyword to pass."""

from __future__ import annotations

import json
from typing import Any, cast

import mcp
import pytest
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt
from mcp.types import RequestParamsMeta, TextContent

from middleware import Fault, ResultStatus
from reach_adapters import Router
from reach_adapters.langchain import LangChainAgent
from reach_adapters.mcp import MCPServerAgent, RouterMCPServer
from tests.mcp_adapter.test_input_required import two_reviews_graph

pytestmark = pytest.mark.timeout(60)

USER = {"messages": [{"role": "user", "content": "refund order 42"}]}


def chat_graph() -> Any:
    def review(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"refund {interrupt('approve?')}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("review", review)
    builder.add_edge(START, "review")
    builder.add_edge("review", END)
    return builder.compile(checkpointer=InMemorySaver())


def text_of(result: Any) -> str:
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


def meta_example(text: str) -> Any:
    """The JSON the error gives an MCP client to put in its request's `_meta`."""
    return json.loads(text[text.index("_meta: ") + len("_meta: ") :].removesuffix(")"))


async def test_a_call_without_a_thread_names_the_meta_key_to_an_mcp_client() -> None:
    async with Router() as router:
        router.register(LangChainAgent(chat_graph(), agent_id="support:refund:01"))
        async with mcp.Client(RouterMCPServer(router).server) as client:
            refused = await client.call_tool("refund", USER)
        # A Python caller is told the keyword it passes, and nothing of MCP.
        direct = await router.route("refund", USER)
    assert refused.is_error
    assert refused.meta is not None
    assert (refused.meta["agent-reach/status"], refused.meta["agent-reach/fault"]) == ("invalid", "caller")
    text = text_of(refused)
    assert meta_example(text) == {"agent-reach/configurable": {"thread_id": "<thread id>"}}
    assert (direct.status, direct.fault) == (ResultStatus.INVALID, Fault.CALLER)
    assert "configurable={'thread_id': ...}" in (direct.error or "")
    assert "_meta" not in (direct.error or "")
    assert direct.extra["fix_options"] == {"configurable": {"thread_id": "<thread id>"}}
    # The caller's mistake: the agent's health is untouched.
    assert [info.failures for info in router.catalog()] == [0]


async def test_a_resume_that_answers_one_of_two_interrupts_names_the_meta_key_and_the_ids() -> None:
    async with Router() as router:
        router.register(LangChainAgent(two_reviews_graph(), agent_id="support:review:01"))
        async with mcp.Client(RouterMCPServer(router).server) as client:
            thread = {"agent-reach/configurable": {"thread_id": "t-2"}}
            asked = await client.call_tool("review", {}, meta=cast(RequestParamsMeta, thread))
            assert asked.meta is not None
            ids = sorted(item["id"] for item in asked.meta["agent-reach/interrupts"])
            wrong = cast(RequestParamsMeta, {**thread, "agent-reach/resume": "yes"})
            refused = await client.call_tool("review", {}, meta=wrong)
    assert refused.is_error
    assert meta_example(text_of(refused)) == {"agent-reach/resume": dict.fromkeys(ids, "<answer>")}


async def test_consensus_voters_refusing_a_call_without_a_thread_name_the_meta_key() -> None:
    async with Router() as router:
        router.register(LangChainAgent(chat_graph(), agent_id="support:refund:01"))
        router.register(LangChainAgent(chat_graph(), agent_id="billing:refund:01"))
        async with mcp.Client(RouterMCPServer(router, consensus_tool=True).server) as client:
            refused = await client.call_tool(
                "reach_consensus", {"capability": "refund", "payload": USER, "n": 2, "quorum": 2}
            )
    assert refused.is_error
    assert refused.meta is not None
    assert (refused.meta["agent-reach/status"], refused.meta["agent-reach/fault"]) == ("invalid", "caller")
    assert meta_example(text_of(refused)) == {"agent-reach/configurable": {"thread_id": "<thread id>"}}


async def test_the_options_to_give_cross_a_hop_between_routers_and_are_said_once_per_surface() -> None:
    """Router near calls router far over MCP, through router mid: near's Python caller gets
    `fix_options` and Python words only; an MCP client of near is told the `_meta` once, not once
    per hop."""
    async with Router() as far, Router() as mid, Router() as near:
        far.register(LangChainAgent(chat_graph(), agent_id="support:refund:01"))
        mid.register(await MCPServerAgent.connect("far", server=RouterMCPServer(far).server))
        # Two hops: mid passes far's error on as far sent it.
        near.register(await MCPServerAgent.connect("mid", server=RouterMCPServer(mid).server))
        direct = await near.route("refund", USER)
        async with mcp.Client(RouterMCPServer(near).server) as client:
            refused = await client.call_tool("refund", USER)
    assert (direct.status, direct.fault) == (ResultStatus.INVALID, Fault.CALLER)
    assert direct.extra["fix_options"] == {"configurable": {"thread_id": "<thread id>"}}
    assert "configurable={'thread_id': ...}" in (direct.error or "")
    assert "_meta" not in (direct.error or "")
    text = text_of(refused)
    assert text.count("over MCP") == 1
    assert meta_example(text) == {"agent-reach/configurable": {"thread_id": "<thread id>"}}
