"""A graph compiled without a checkpointer whose node calls `interrupt()` asks a question nobody can
ever answer (LangGraph resumes a run from its thread's checkpoint): the agent is misbuilt, and
its run fails as its own fault, in calls and streams alike, instead of asking for a `resume` the
agent then refuses, or ending its stream as if it had finished. Static breakpoints without a
checkpointer are refused as soon as the graph is registered: every run would end at one."""

from __future__ import annotations

import asyncio
import operator
import re
from collections.abc import AsyncIterator
from typing import Annotated, Any

import pytest
import typing_extensions
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt

from middleware import Fault, ResultStatus
from reach_adapters import AgentCallError, InputRequiredError, InvalidDeclarationError, Router
from reach_adapters.langchain import LangChainAgent

pytestmark = pytest.mark.timeout(30)

NEEDS_SAVER = "interrupt() needs a checkpointer"


class Asked(typing_extensions.TypedDict):
    q: str
    answers: Annotated[list[str], operator.add]


def one_node(node: Any) -> StateGraph[Any, Any, Any, Any]:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Asked)
    builder.add_node("node", node)
    builder.add_edge(START, "node")
    builder.add_edge("node", END)
    return builder


def asking(state: Asked) -> dict[str, Any]:
    return {"answers": [str(interrupt("need?"))]}


def answering(state: Asked) -> dict[str, Any]:
    return {"answers": [f"re {state['q']}"]}


def no_saver() -> Any:
    """Compiled as LangGraph's docs compile a graph that needs no memory: no checkpointer."""
    return one_node(asking).compile()


async def drained(stream: AsyncIterator[Any], chunks: list[Any]) -> None:
    async with asyncio.timeout(30):
        async for chunk in stream:
            chunks.append(chunk)


async def test_a_call_fails_as_the_agents_misbuilt_graph(router: Router) -> None:
    router.register(LangChainAgent(no_saver(), agent_id="desk:ask:01"))
    result = await router.route("ask", {"q": "x"})
    assert (result.status, result.fault) == (ResultStatus.ERROR, Fault.AGENT)
    assert result.error_type == "InvalidDeclarationError"
    assert NEEDS_SAVER in (result.error or "")
    assert "InMemorySaver()" in (result.error or "")
    # A replica of the same graph would ask the same question nobody can answer.
    assert result.retryable is False
    assert router.catalog()[0].failures == 1
    with pytest.raises(AgentCallError, match=re.escape(NEEDS_SAVER)):
        result.raise_for_status()


async def test_a_replica_is_not_tried_for_it(router: Router) -> None:
    router.register(LangChainAgent(no_saver(), agent_id="desk:ask:01"))
    router.register(LangChainAgent(no_saver(), agent_id="desk:ask:02"))
    result = await router.route("ask", {"q": "x"})
    assert result.status is ResultStatus.ERROR
    assert len(router.recent_decisions(1)[0].attempts) == 1


async def test_a_chain_around_it_fails_alike(router: Router) -> None:
    chain = RunnableLambda(lambda state: {**state, "q": state["q"] + "!"}, name="prep") | no_saver()
    router.register(LangChainAgent(chain, agent_id="desk:ask:01"))
    result = await router.route("ask", {"q": "x"})
    assert (result.status, result.fault) == (ResultStatus.ERROR, Fault.AGENT)
    assert NEEDS_SAVER in (result.error or "")


@pytest.mark.parametrize("streamed", [False, True], ids=["call", "stream"])
async def test_a_chain_of_a_checkpointed_graph_then_one_without_fails_alike(
    router: Router, streamed: bool
) -> None:
    # The first graph's thread waits on nothing: the question is the unsaved graph's.
    chain = one_node(answering).compile(checkpointer=InMemorySaver()) | no_saver()
    router.register(LangChainAgent(chain, agent_id="desk:ask:01"))
    thread = {"thread_id": "t-1"}
    if streamed:
        with pytest.raises(AgentCallError, match=re.escape(NEEDS_SAVER)) as failed:
            await drained(router.stream("ask", {"q": "x"}, configurable=thread), [])
        assert failed.value.result is not None
        result = failed.value.result
    else:
        result = await router.route("ask", {"q": "x"}, configurable=thread)
    assert (result.status, result.fault) == (ResultStatus.ERROR, Fault.AGENT)
    assert NEEDS_SAVER in (result.error or "")
    assert router.catalog()[0].failures == 1


async def test_the_checkpointed_graph_of_such_a_chain_still_asks(router: Router) -> None:
    chain = one_node(asking).compile(checkpointer=InMemorySaver()) | one_node(answering).compile()
    router.register(LangChainAgent(chain, agent_id="desk:ask:01"))
    thread = {"thread_id": "t-1"}
    asked = await router.route("ask", {"q": "x"}, configurable=thread)
    assert (asked.status, asked.payload) == (ResultStatus.INPUT_REQUIRED, "need?")
    done = await router.route("ask", None, configurable=thread, resume="yes")
    assert (done.status, done.payload) == (ResultStatus.OK, {"q": "x", "answers": ["yes", "re x"]})


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"subgraphs": True},
        {"stream_mode": "values"},
        {"stream_mode": "updates"},
        {"stream_mode": "messages"},
        {"stream_mode": "custom"},
        {"stream_mode": ["values", "custom"]},
        {"stream_mode": "values", "subgraphs": True},
    ],
    ids=["default", "subgraphs", "values", "updates", "messages", "custom", "modes", "values-subgraphs"],
)
async def test_a_stream_ends_with_the_error_not_as_finished(router: Router, options: dict[str, Any]) -> None:
    router.register(LangChainAgent(no_saver(), agent_id="desk:ask:01"))
    chunks: list[Any] = []
    with pytest.raises(AgentCallError, match=re.escape(NEEDS_SAVER)) as failed:
        await drained(router.stream("ask", {"q": "x"}, **options), chunks)
    assert failed.value.result is not None
    assert (failed.value.result.status, failed.value.result.fault) == (ResultStatus.ERROR, Fault.AGENT)
    assert router.recent_decisions(1)[0].status == "error"
    assert router.catalog()[0].failures == 1


async def test_a_stream_in_values_mode_gives_langgraphs_chunks_first(router: Router) -> None:
    router.register(LangChainAgent(no_saver(), agent_id="desk:ask:01"))
    chunks: list[Any] = []
    with pytest.raises(AgentCallError, match=re.escape(NEEDS_SAVER)):
        await drained(router.stream("ask", {"q": "x"}, stream_mode="values"), chunks)
    assert chunks[0] == {"q": "x", "answers": []}
    assert "__interrupt__" in chunks[-1]


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ({}, [{"node": {"answers": ["re x"]}}]),
        ({"stream_mode": "values"}, [{"q": "x", "answers": []}, {"q": "x", "answers": ["re x"]}]),
        (
            {"stream_mode": ["values"]},
            [["values", {"q": "x", "answers": []}], ["values", {"q": "x", "answers": ["re x"]}]],
        ),
        ({"stream_mode": "updates"}, [{"node": {"answers": ["re x"]}}]),
        ({"stream_mode": "custom"}, []),
        ({"stream_mode": "custom", "subgraphs": True}, []),
        (
            {"stream_mode": "values", "subgraphs": True},
            [[[], {"q": "x", "answers": []}], [[], {"q": "x", "answers": ["re x"]}]],
        ),
    ],
    ids=["default", "values", "values-list", "updates", "custom", "custom-subgraphs", "values-subgraphs"],
)
async def test_a_graph_without_a_checkpointer_that_asks_nothing_streams_as_before(
    router: Router, options: dict[str, Any], expected: list[Any]
) -> None:
    router.register(LangChainAgent(one_node(answering).compile(), agent_id="desk:ask:01"))
    chunks: list[Any] = []
    await drained(router.stream("ask", {"q": "x"}, **options), chunks)
    assert chunks == expected
    result = await router.route("ask", {"q": "x"})
    assert (result.status, result.payload) == (ResultStatus.OK, {"q": "x", "answers": ["re x"]})


async def test_a_subgraph_without_one_under_a_checkpointed_graph_still_asks(router: Router) -> None:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Asked)
    builder.add_node("child", no_saver())
    builder.add_edge(START, "child")
    builder.add_edge("child", END)
    router.register(LangChainAgent(builder.compile(checkpointer=InMemorySaver()), agent_id="desk:ask:01"))
    thread = {"thread_id": "t-1"}
    asked = await router.route("ask", {"q": "x"}, configurable=thread)
    assert (asked.status, asked.payload) == (ResultStatus.INPUT_REQUIRED, "need?")
    with pytest.raises(InputRequiredError):
        await drained(
            router.stream("ask", {"q": "y"}, configurable={"thread_id": "t-2"}, stream_mode="values"), []
        )
    done = await router.route("ask", None, configurable=thread, resume="yes")
    assert (done.status, done.payload) == (ResultStatus.OK, {"q": "x", "answers": ["yes"]})


def counting(state: Asked) -> dict[str, Any]:
    return {"answers": ["counted"]}


def two_steps() -> StateGraph[Any, Any, Any, Any]:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Asked)
    builder.add_node("first", answering)
    builder.add_node("second", counting)
    builder.add_edge(START, "first")
    builder.add_edge("first", "second")
    builder.add_edge("second", END)
    return builder


@pytest.mark.parametrize(
    "graph",
    [
        pytest.param(lambda: two_steps().compile(interrupt_before=["second"]), id="interrupt_before"),
        pytest.param(lambda: two_steps().compile(interrupt_after=["first"]), id="interrupt_after"),
        pytest.param(lambda: two_steps().compile().bind(interrupt_before=["second"]), id="bound"),
        pytest.param(
            lambda: one_node(two_steps().compile(interrupt_before=["second"])).compile(), id="subgraph"
        ),
        pytest.param(
            lambda: two_steps().compile(interrupt_before=["second"]) | RunnableLambda(lambda s: s),
            id="first-step-of-a-chain",
        ),
        pytest.param(
            lambda: RunnableLambda(lambda p: p) | two_steps().compile(interrupt_before=["second"]),
            id="later-step-of-a-chain",
        ),
    ],
)
def test_breakpoints_without_a_checkpointer_are_refused_at_registration(graph: Any) -> None:
    # Each run would end at the first breakpoint, answering its partial state as finished.
    with pytest.raises(InvalidDeclarationError, match="no checkpointer to go on from"):
        LangChainAgent(graph(), agent_id="t:paused:01")


async def test_breakpoints_with_a_checkpointer_still_register_and_pause(router: Router) -> None:
    graph = two_steps().compile(checkpointer=InMemorySaver(), interrupt_before=["second"])
    router.register(LangChainAgent(graph, agent_id="t:paused:01"))
    result = await router.route("paused", {"q": "x"}, configurable={"thread_id": "t"})
    assert result.status is ResultStatus.INPUT_REQUIRED, result.error


async def test_a_function_that_answers_its_own_graphs_interrupts_still_asks(router: Router) -> None:
    # The router cannot see the graph a function runs, nor resume it, but the function may: it
    # takes the answer as an ordinary payload and resumes its graph itself.
    graph = one_node(asking).compile(checkpointer=InMemorySaver())

    async def ask(payload: dict[str, Any], config: RunnableConfig) -> Any:
        if "answer" in payload:
            return await graph.ainvoke(Command(resume=payload["answer"]), config)
        return await graph.ainvoke({"q": payload["q"]}, config)

    router.register(
        LangChainAgent(RunnableLambda(ask), agent_id="desk:ask:01", capabilities=[{"name": "ask"}])
    )
    thread = {"thread_id": "t-1"}
    asked = await router.route("ask", {"q": "x"}, configurable=thread)
    assert asked.status is ResultStatus.INPUT_REQUIRED, asked.error
    answered = await router.route("ask", {"answer": "yes"}, configurable=thread)
    assert answered.status is ResultStatus.OK, answered.error
    assert answered.payload == {"q": "x", "answers": ["yes"]}
    assert router.catalog()[0].failures == 0


@pytest.mark.parametrize("mode", ["updates", "custom", "messages"])
async def test_a_fallback_without_one_asks_in_vain_in_every_stream_mode(router: Router, mode: str) -> None:
    # (In "values" mode the primary streams its input before it fails: LangChain falls back only
    # from a stream that gave nothing.)
    def failing(state: Asked) -> dict[str, Any]:
        raise RuntimeError("down")

    agent = one_node(failing).compile(checkpointer=InMemorySaver()).with_fallbacks([no_saver()])
    router.register(LangChainAgent(agent, agent_id="desk:ask:01"))
    with pytest.raises(AgentCallError, match=re.escape(NEEDS_SAVER)):
        await drained(router.stream("ask", {"q": "x"}, configurable={"thread_id": "t"}, stream_mode=mode), [])
