"""The second review of issue 11: agents written as LangChain's and LangGraph's docs write them,
callers' mistakes kept off the agent's record, and what the reach tools tell a model."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
import typing_extensions
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableLambda
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages

from reach_adapters import Router
from reach_adapters.langchain import LangChainAgent

pytestmark = pytest.mark.timeout(30)

USER = [{"role": "user", "content": "hi"}]


def one_step(state: type, node: Any) -> Any:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(state)
    builder.add_node("step", node)
    builder.add_edge(START, "step")
    builder.add_edge("step", END)
    return builder.compile()


# -- a state with untyped messages is chat-shaped ----------------------------------------------


class QuickstartState(typing_extensions.TypedDict):
    """LangGraph's "build a basic chatbot" state."""

    messages: Annotated[list, add_messages]  # type: ignore[type-arg]  # as the tutorial writes it


class LooseTurn(typing_extensions.TypedDict):
    messages: list  # type: ignore[type-arg]  # a list of anything, which may hold messages


async def test_the_quickstart_state_answers_with_text_and_takes_plain_text(router: Router) -> None:
    graph = one_step(QuickstartState, lambda s: {"messages": [AIMessage("Hello! How can I help?")]})
    router.register(LangChainAgent(graph, agent_id="support:chatbot:01"))
    for _ in range(3):  # enough in a row to quarantine the agent, were they failures
        result = await router.route("chatbot", {"messages": USER})
        assert (result.ok, result.payload) == (True, "Hello! How can I help?"), result.error
    plain = await router.route("chatbot", "hi")
    assert (plain.ok, plain.payload) == (True, "Hello! How can I help?"), plain.error
    assert router.catalog()[0].failures == 0


async def test_loosely_typed_lists_of_messages_are_answered_as_text(router: Router) -> None:
    def reply(state: Any) -> list:  # type: ignore[type-arg]  # a loosely typed output
        return [AIMessage("hi there")]

    def turn(state: Any) -> LooseTurn:
        return {"messages": [AIMessage("turned")]}

    router.register(LangChainAgent(RunnableLambda(reply), agent_id="support:reply:01"))
    router.register(LangChainAgent(RunnableLambda(turn), agent_id="support:turn:01"))
    for _ in range(3):
        replied = await router.route("reply", {"messages": USER})
        turned = await router.route("turn", {"messages": USER})
        assert (replied.ok, replied.payload) == (True, "hi there"), replied.error
        assert (turned.ok, turned.payload) == (True, "turned"), turned.error
    assert all(info.failures == 0 for info in router.catalog())
