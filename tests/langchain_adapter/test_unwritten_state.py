"""A state graph's run that writes none of its output keys succeeded: LangGraph's ``ainvoke``
returns None then, and the routed run answers the state as it stands (the thread's, or what holds
a value from the start) rather than failing its output schema and quarantining a healthy agent."""

from __future__ import annotations

import operator
from typing import Annotated, Any

import pytest
import typing_extensions
from langchain_core.runnables import RunnableLambda
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph

from middleware import ResultStatus
from reach_adapters import Router
from reach_adapters.langchain import LangChainAgent, ReachToolkit

pytestmark = pytest.mark.timeout(30)


class Report(typing_extensions.TypedDict, total=False):
    day: str


class Logged(typing_extensions.TypedDict, total=False):
    email: str
    log: Annotated[list[str], operator.add]


def acting(state_schema: Any, ran: list[Any], **compile_options: Any) -> Any:
    """A graph whose one node only acts (sends the daily report, say) and writes nothing."""

    def send(state: Any) -> dict[str, Any]:
        ran.append(state)
        return {}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(state_schema)
    builder.add_node("send", send)
    builder.add_edge(START, "send")
    return builder.compile(**compile_options)


async def test_a_run_that_writes_nothing_is_ok_and_runs_once(router: Router) -> None:
    ran: list[Any] = []
    assert await acting(Report, []).ainvoke({}) is None
    router.register(LangChainAgent(acting(Report, ran), agent_id="ops:daily_report:01"))
    router.register(LangChainAgent(acting(Report, ran), agent_id="ops:daily_report:02"))
    result = await router.route("daily_report")
    assert (result.status, result.payload) == (ResultStatus.OK, {})
    assert len(ran) == 1
    assert [agent.failures for agent in router.catalog()] == [0, 0]
    (tool,) = [t for t in ReachToolkit(router).get_tools() if t.name == "daily_report"]
    message = await tool.ainvoke({"name": "daily_report", "args": {}, "id": "c1", "type": "tool_call"})
    assert message.status == "success"


async def test_it_answers_the_keys_that_hold_a_value_from_the_start(router: Router) -> None:
    router.register(LangChainAgent(acting(Logged, []), agent_id="ops:notify:01"))
    result = await router.route("notify", {})
    assert (result.status, result.payload) == (ResultStatus.OK, {"log": []})


async def test_a_later_turn_that_writes_nothing_answers_the_threads_state(router: Router) -> None:
    graph = acting(Logged, [], checkpointer=InMemorySaver())
    router.register(LangChainAgent(graph, agent_id="ops:notify:01"))
    thread = {"thread_id": "t"}
    first = await router.route("notify", {"email": "a@example.com"}, configurable=thread)
    assert first.payload == {"email": "a@example.com", "log": []}
    later = await router.route("notify", {}, configurable=thread)
    assert (later.status, later.payload) == (ResultStatus.OK, {"email": "a@example.com", "log": []})


async def test_a_chat_graph_that_writes_nothing_still_answers_nothing(router: Router) -> None:
    router.register(LangChainAgent(acting(MessagesState, []), agent_id="ops:chat:01"))
    result = await router.route("chat", {})
    assert (result.status, result.payload) == (ResultStatus.OK, None)


async def test_a_thread_bound_with_with_config_answers_its_state(router: Router) -> None:
    graph = acting(Logged, [], checkpointer=InMemorySaver())
    router.register(
        LangChainAgent(graph.with_config(configurable={"thread_id": "t"}), agent_id="ops:notify:01")
    )
    await router.route("notify", {"email": "a@example.com"})
    later = await router.route("notify", {})
    assert (later.status, later.payload) == (ResultStatus.OK, {"email": "a@example.com", "log": []})


class Summary(typing_extensions.TypedDict, total=False):
    summary: str


class ChatWithSummary(MessagesState, total=False):
    summary: str


async def test_a_chat_state_whose_output_is_not_chat_answers_its_output_keys(router: Router) -> None:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(ChatWithSummary, output_schema=Summary)
    builder.add_node("act", lambda state: {})
    builder.add_edge(START, "act")
    router.register(LangChainAgent(builder.compile(), agent_id="ops:summarise:01"))
    result = await router.route("summarise", {})
    assert (result.status, result.payload) == (ResultStatus.OK, {}), result.error


async def test_a_chain_ending_in_the_graph_answers_its_state(router: Router) -> None:
    chain = RunnableLambda(lambda state: state, name="prep") | acting(Logged, [])
    router.register(LangChainAgent(chain, agent_id="ops:notify:01"))
    result = await router.route("notify", {})
    assert (result.status, result.payload) == (ResultStatus.OK, {"log": []}), result.error


async def test_a_fallbacks_none_is_its_own_answer(router: Router) -> None:
    def failing(state: Logged) -> dict[str, Any]:
        raise RuntimeError("down")

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Logged)
    builder.add_node("fail", failing)
    builder.add_edge(START, "fail")
    primary = builder.compile(checkpointer=InMemorySaver())
    agent = primary.with_fallbacks([RunnableLambda(lambda state: None, name="spare")])
    router.register(LangChainAgent(agent, agent_id="ops:notify:01", capabilities=[{"name": "notify"}]))
    result = await router.route("notify", {"email": "e"}, configurable={"thread_id": "t"})
    assert (result.status, result.payload) == (ResultStatus.OK, None), result.error
