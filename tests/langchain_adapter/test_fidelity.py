"""The second review of issue 11: agents written as LangChain's and LangGraph's docs write them,
callers' mistakes kept off the agent's record, and what the reach tools tell a model."""

from __future__ import annotations

import logging
import operator
import warnings
from typing import Annotated, Any

import pytest
import typing_extensions
from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, HumanMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import ConfigurableField, Runnable, RunnableConfig, RunnableLambda
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt

from examples.langchain_demo.agents import scripted
from middleware import Fault, ResultStatus
from reach_adapters import Router
from reach_adapters.langchain import LangChainAgent, ReachToolkit

pytestmark = pytest.mark.timeout(30)

USER = [{"role": "user", "content": "hi"}]


def one_step(state: type, node: Any, checkpointer: InMemorySaver | None = None) -> Any:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(state)
    builder.add_node("step", node)
    builder.add_edge(START, "step")
    builder.add_edge("step", END)
    return builder.compile(checkpointer=checkpointer)


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


# -- the caller's configurable is the caller's mistake -----------------------------------------


def with_history(**bound: Any) -> Runnable[Any, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # both are deprecated, and still what many agents use
        from langchain_core.chat_history import InMemoryChatMessageHistory
        from langchain_core.runnables.history import RunnableWithMessageHistory

        histories: dict[str, InMemoryChatMessageHistory] = {}

        def new_history() -> InMemoryChatMessageHistory:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                return InMemoryChatMessageHistory()

        prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("user", "{question}")])
        model = GenericFakeChatModel(messages=iter([AIMessage("hello")] * 8))
        chain = RunnableWithMessageHistory(
            prompt | model,
            lambda session_id: histories.setdefault(session_id, new_history()),
            input_messages_key="question",
            history_messages_key="history",
        )
    return chain.with_config(configurable=bound) if bound else chain


async def test_a_history_call_without_its_session_is_the_callers_mistake(
    router: Router, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="reach_adapters.langchain"):
        router.register(LangChainAgent(with_history(), agent_id="support:chat:01"))
    assert "configurable={'session_id': ...}" in caplog.text
    for _ in range(3):  # enough in a row to quarantine the agent, were they failures
        result = await router.route("chat", {"question": "hi"})
        assert (result.status, result.fault) == (ResultStatus.INVALID, Fault.CALLER)
        assert "configurable={'session_id': ...}" in (result.error or "")
        # Each surface (an MCP request's `_meta`) tells its callers how to give it.
        assert result.extra["fix_options"] == {"configurable": {"session_id": "<session_id>"}}
    good = await router.route("chat", {"question": "hi"}, configurable={"session_id": "alice"})
    assert (good.ok, good.payload) == (True, "hello"), good.error
    assert router.catalog()[0].failures == 0


async def test_a_history_bound_to_its_session_needs_none_from_callers(
    router: Router, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="reach_adapters.langchain"):
        router.register(LangChainAgent(with_history(session_id="s"), agent_id="support:chat:01"))
    assert "session_id" not in caplog.text
    result = await router.route("chat", {"question": "hi"})
    assert (result.ok, result.payload) == (True, "hello"), result.error


async def test_an_alternative_the_runnable_does_not_offer_is_the_callers_mistake(router: Router) -> None:
    other = GenericFakeChatModel(messages=iter([AIMessage("from B")]))
    model = GenericFakeChatModel(messages=iter([AIMessage("from A")] * 4)).configurable_alternatives(
        ConfigurableField(id="llm"), default_key="a", b=other
    )
    chain = ChatPromptTemplate.from_template("{q}") | model | StrOutputParser()
    router.register(LangChainAgent(chain, agent_id="support:answer:01"))
    chosen = await router.route("answer", {"q": "hi"}, configurable={"llm": "b"})
    assert (chosen.ok, chosen.payload) == (True, "from B"), chosen.error
    for _ in range(3):
        result = await router.route("answer", {"q": "hi"}, configurable={"llm": "gpt-9"})
        assert (result.status, result.fault) == (ResultStatus.INVALID, Fault.CALLER)
        assert "one of ['a', 'b']" in (result.error or "")
    assert router.catalog()[0].failures == 0


# -- what the reach tools tell a model ----------------------------------------------------------


class Approvals(typing_extensions.TypedDict, total=False):
    order: int
    answers: Annotated[list[str], operator.add]


def two_approvals() -> Any:
    """A graph that asks two people at once: it waits on two interrupts."""
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Approvals)
    for who in ("manager", "finance"):
        builder.add_node(who, lambda s, who=who: {"answers": [f"{who}: {interrupt(f'{who} approves?')}"]})
        builder.add_edge(START, who)
        builder.add_edge(who, END)
    return builder.compile(checkpointer=InMemorySaver(), name="approvals")


async def test_a_tool_names_each_interrupt_a_model_must_answer(router: Router) -> None:
    router.register(LangChainAgent(two_approvals(), agent_id="shop:approvals:01"))
    tools = {tool.name: tool for tool in ReachToolkit(router).get_tools()}
    thread = RunnableConfig(configurable={"thread_id": "boss-1"})
    call = {"type": "tool_call", "id": "c1", "name": "approvals", "args": {"order": 42}}
    asked = await tools["approvals"].ainvoke(call, thread)
    pending = {item["id"]: item["value"] for item in asked.artifact.extra["interrupts"]}
    assert len(pending) == 2
    for interrupt_id, question in pending.items():
        assert f"{interrupt_id}: {question}" in asked.content
    assert "object that maps each question id to its answer" in asked.content
    # A model that does as it is told:
    resume = dict.fromkeys(pending, "yes")
    args = {"target": "shop:approvals:01", "resume": resume}
    done = await tools["reach_agent"].ainvoke(
        {"type": "tool_call", "id": "c2", "name": "reach_agent", "args": args}, thread
    )
    assert done.status == "success", done.content
    assert sorted(done.artifact.payload["answers"]) == ["finance: yes", "manager: yes"]


# -- LangChain's own dump form of a message --------------------------------------------------


async def test_langchains_dump_form_is_accepted_and_models_are_shown_the_role_form(router: Router) -> None:
    agent = create_agent(scripted(AIMessage("hi back"), repeat=True), tools=[], name="assist")
    router.register(LangChainAgent(agent, agent_id="support:assist:01"))
    for message in ({"type": "human", "content": "hi"}, HumanMessage("hi").model_dump()):
        result = await router.route("assist", {"messages": [message]})
        assert (result.ok, result.payload) == (True, "hi back"), result.error
    refused = await router.route("assist", {"messages": [{"content": "hi"}]})
    assert refused.status is ResultStatus.INVALID
    (tool,) = [tool for tool in ReachToolkit(router).get_tools() if tool.name == "assist"]
    shown = tool.tool_call_schema
    assert isinstance(shown, dict)
    # Optional, so shown as the list or null (a strict-mode model sends every argument).
    listed, null = shown["properties"]["messages"]["anyOf"]
    assert null == {"type": "null"}
    item = listed["items"]
    assert (set(item["properties"]), item["required"], "anyOf" in item) == (
        {"role", "content"},
        ["role", "content"],
        False,
    )
    convert_to_openai_tool(tool, strict=True)


# -- a graph under fallbacks, or first in a chain, is still that graph for its input ------------


class Rag(typing_extensions.TypedDict):
    """LangGraph's RAG tutorial state."""

    question: str
    context: list[str]
    answer: str


def rag(checkpointer: InMemorySaver | None = None) -> Any:
    def generate(state: Rag) -> dict[str, Any]:
        if checkpointer is not None:
            return {"answer": f"{state['question']}: {interrupt('approve?')}"}
        return {"answer": f"{state['question']}: refundable"}

    return one_step(Rag, generate, checkpointer)


WRAPS = {
    "with_fallbacks": lambda graph: graph.with_fallbacks([RunnableLambda(lambda s: {"answer": "sorry"})]),
    "first_in_a_chain": lambda graph: graph | RunnableLambda(lambda s: s),
}


@pytest.mark.parametrize("wrap", WRAPS.values(), ids=list(WRAPS))
async def test_a_wrapped_graph_takes_partial_input(router: Router, wrap: Any) -> None:
    runnable = wrap(rag())
    router.register(LangChainAgent(runnable, agent_id="kb:rag:01"))
    (cap,) = router.reachable().values()
    assert "required" not in cap.input_schema
    result = await router.route(cap.name, {"question": "kettle"})
    assert result.ok, result.error
    assert result.payload == await runnable.ainvoke({"question": "kettle"})


@pytest.mark.parametrize("wrap", WRAPS.values(), ids=list(WRAPS))
async def test_a_wrapped_checkpointed_graph_keeps_its_threads_and_resumes(router: Router, wrap: Any) -> None:
    router.register(LangChainAgent(wrap(rag(InMemorySaver())), agent_id="kb:rag:01"))
    (cap,) = router.reachable().values()
    unthreaded = await router.route(cap.name, {"question": "kettle"})
    assert (unthreaded.status, unthreaded.fault) == (ResultStatus.INVALID, Fault.CALLER)
    thread = {"thread_id": "t-1"}
    asked = await router.route(cap.name, {"question": "kettle"}, configurable=thread)
    assert (asked.status, asked.payload) == (ResultStatus.INPUT_REQUIRED, "approve?"), asked.error
    done = await router.route(cap.name, None, configurable=thread, resume="yes")
    assert (done.ok, done.payload) == (True, {"question": "kettle", "answer": "kettle: yes"}), done.error
    assert router.catalog()[0].failures == 0


# -- a function that declared plain dicts gets plain dicts ----------------------------------------


def by_name(d: dict[str, list[dict[str, str]]]) -> str:
    """Joins each list's contents."""
    return " | ".join(row["content"] for rows in d.values() for row in rows)


def any_dict(d: dict) -> str:  # type: ignore[type-arg]  # as loosely as many functions are typed
    """Joins the rows' contents."""
    return " | ".join(row["content"] for row in d["rows"])


@pytest.mark.parametrize("function", [by_name, any_dict])
async def test_role_content_dicts_reach_a_function_that_declared_plain_dicts_unchanged(
    router: Router, function: Any
) -> None:
    router.register(LangChainAgent(RunnableLambda(function), agent_id="util:join:01"))
    payload = {"rows": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}]}
    result = await router.route(function.__name__, payload)
    assert (result.ok, result.payload) == (True, "hi | yo"), result.error
