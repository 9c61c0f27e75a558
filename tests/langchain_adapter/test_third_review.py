"""The third review of issue 11: histories bound inside chains, schema keywords used as property
names, loosely typed chat outputs, graphs inside chains and fallbacks, JSON-pointer refs."""

from __future__ import annotations

import logging
from typing import Annotated, Any

import pytest
import typing_extensions
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.runnables import Runnable, RunnableLambda
from langgraph.graph import MessagesState
from langgraph.graph.message import add_messages

from examples.langchain_demo.agents import scripted
from middleware import Fault, ResultStatus
from reach_adapters import Router
from reach_adapters.langchain import LangChainAgent
from tests.langchain_adapter.test_fidelity import USER, one_step, with_history
from tests.langchain_adapter.test_patterns import PlainState, approval_graph

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize(
    "chain",
    [
        lambda: with_history(session_id="s") | StrOutputParser(),
        lambda: RunnableLambda(lambda d: d, name="prep") | with_history(session_id="s") | StrOutputParser(),
    ],
    ids=["history-first", "history-second"],
)
async def test_a_history_bound_to_its_session_inside_a_chain_needs_none_from_callers(
    router: Router, caplog: pytest.LogCaptureFixture, chain: Any
) -> None:
    runnable: Runnable[Any, Any] = chain()
    with caplog.at_level(logging.WARNING, logger="reach_adapters.langchain"):
        router.register(LangChainAgent(runnable, agent_id="support:chat:01"))
    assert "session_id" not in caplog.text
    for _ in range(2):
        result = await router.route("chat", {"question": "hi"})
        assert (result.status, result.payload) == (ResultStatus.OK, "hello"), result.error


@pytest.mark.parametrize(
    "items",
    [list[dict[str, Any]], list[BaseMessage | dict[str, Any]], Any, list[str | BaseMessage]],
    ids=["dicts", "messages-or-dicts", "any", "text-or-messages"],
)
async def test_a_key_add_messages_reduces_is_chat_however_it_is_typed(router: Router, items: Any) -> None:
    # The functional form: a class body's annotation could not name this test's parameter.
    state = typing_extensions.TypedDict("state", {"messages": Annotated[items, add_messages]})  # noqa: UP013
    graph = one_step(state, lambda s: {"messages": [AIMessage("ok")]})
    router.register(LangChainAgent(graph, agent_id="g:s:01"))
    for payload in ({"messages": USER}, "hi"):
        result = await router.route("s", payload)
        assert (result.status, result.payload) == (ResultStatus.OK, "ok"), result.error


async def test_a_loosely_typed_function_returning_a_graph_state_answers_with_its_text(router: Router) -> None:
    graph = one_step(MessagesState, lambda s: {"messages": [AIMessage("from graph")]})

    async def ask(question: dict[str, Any]) -> dict[str, list[Any]]:
        return await graph.ainvoke(question)  # type: ignore[no-any-return]

    router.register(LangChainAgent(RunnableLambda(ask), agent_id="x:ask:01"))
    for _ in range(2):  # enough in a row to quarantine the agent, were they failures
        result = await router.route("ask", {"messages": USER})
        assert (result.status, result.payload) == (ResultStatus.OK, "from graph"), result.error


async def test_a_graph_followed_by_a_step_that_drops_its_state_still_asks_for_input(router: Router) -> None:
    def final(state: dict[str, Any]) -> dict[str, Any]:
        messages = state.get("messages") or [None]
        return {"final": getattr(messages[-1], "content", None)}

    router.register(LangChainAgent(approval_graph() | RunnableLambda(final), agent_id="support:refund:01"))
    thread = {"thread_id": "t-7"}
    asked = await router.route("refund", {"messages": USER}, configurable=thread)
    assert (asked.status, asked.payload) == (
        ResultStatus.INPUT_REQUIRED,
        {"question": "approve the refund of order 42?"},
    )
    done = await router.route("refund", None, configurable=thread, resume="approved")
    assert (done.status, done.payload) == (ResultStatus.OK, {"final": "refund approved"}), done.error


async def test_a_fallback_that_answers_otherwise_than_its_graph_is_a_good_run(router: Router) -> None:
    def down(state: dict[str, Any]) -> dict[str, Any]:
        raise RuntimeError("primary down")

    sorry: Runnable[Any, str] = RunnableLambda(lambda state: "sorry, try later")
    router.register(LangChainAgent(one_step(PlainState, down).with_fallbacks([sorry]), agent_id="kb:fb:01"))
    for _ in range(3):  # enough in a row to quarantine the agent, were they failures
        result = await router.route("fb", {"question": "q"})
        assert (result.status, result.payload) == (ResultStatus.OK, "sorry, try later"), result.error
    assert router.catalog()[0].failures == 0
    # Runnables that agree keep their schema: a chat model falling back on another.
    model = scripted(AIMessage("x")).with_fallbacks([scripted(AIMessage("y"))])
    router.register(LangChainAgent(model, agent_id="llm:chat:01"))
    assert router.reachable()["chat"].output_schema == {"type": ["string", "null"]}


async def test_a_checkpointed_graph_after_other_steps_needs_a_thread_and_resumes_from_its_step(
    router: Router, caplog: pytest.LogCaptureFixture
) -> None:
    prep: Runnable[Any, Any] = RunnableLambda(lambda payload: {"messages": payload["messages"]}, name="prep")
    with caplog.at_level(logging.WARNING, logger="reach_adapters.langchain"):
        router.register(LangChainAgent(prep | approval_graph(), agent_id="support:refund:01"))
    assert "configurable={'thread_id': ...}" in caplog.text
    for _ in range(3):  # enough in a row to quarantine the agent, were they failures
        result = await router.route("refund", {"messages": USER})
        assert (result.status, result.fault) == (ResultStatus.INVALID, Fault.CALLER), result.error
        assert "thread_id" in (result.error or "")
    thread = {"thread_id": "t-7"}
    asked = await router.route("refund", {"messages": USER}, configurable=thread)
    assert asked.status is ResultStatus.INPUT_REQUIRED
    # The answer goes to the graph, not to prep, which would fail on LangGraph's Command.
    done = await router.route("refund", None, configurable=thread, resume="approved")
    assert (done.status, done.payload) == (ResultStatus.OK, "refund approved"), done.error
    assert router.catalog()[0].failures == 0
