"""A state graph's run that writes none of its output keys succeeded: LangGraph's ``ainvoke``
returns None then, and the routed run answers the state as it stands (the thread's, or what holds
a value from the start) rather than failing its output schema and quarantining a healthy agent."""

from __future__ import annotations

import operator
from typing import Annotated, Any

import pytest
import typing_extensions
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
