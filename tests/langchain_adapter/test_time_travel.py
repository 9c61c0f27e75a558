"""LangGraph's time travel through the router: a call naming a checkpoint of its thread
(``configurable`` from ``get_state(...).config``) runs as ``ainvoke`` with that config does. With no
input it replays from there (LangGraph's ``ainvoke(None, config)``); and whether the run stopped is
read at the thread's newest checkpoint, which the run wrote, not the one the call named."""

from __future__ import annotations

import asyncio
import operator
from collections.abc import AsyncIterator
from typing import Annotated, Any

import pytest
import typing_extensions
from langchain_core.runnables import RunnableLambda
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from middleware import ResultStatus
from reach_adapters import Router
from reach_adapters.langchain import LangChainAgent

pytestmark = pytest.mark.timeout(30)

THREAD = {"thread_id": "t"}
CONFIG: Any = {"configurable": THREAD}


class Steps(typing_extensions.TypedDict, total=False):
    topic: str
    steps: Annotated[list[str], operator.add]


def two_steps(**compile_options: Any) -> Any:
    """``a`` then ``b``, each noting that it ran, with the topic it saw."""
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Steps)
    builder.add_node("a", lambda state: {"steps": [f"a({state['topic']})"]})
    builder.add_node("b", lambda state: {"steps": [f"b({state['topic']})"]})
    builder.add_edge(START, "a")
    builder.add_edge("a", "b")
    builder.add_edge("b", END)
    return builder.compile(checkpointer=InMemorySaver(), **compile_options)


def asking() -> Any:
    def approve(state: Steps) -> dict[str, Any]:
        return {"steps": [f"approved {interrupt('ok?')}"]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Steps)
    builder.add_node("approve", approve)
    builder.add_edge(START, "approve")
    builder.add_edge("approve", END)
    return builder.compile(checkpointer=InMemorySaver())


async def before_b(graph: Any) -> dict[str, Any]:
    """The configurable naming the checkpoint where ``b`` was next."""
    async with asyncio.timeout(10):
        snapshots = [snapshot async for snapshot in graph.aget_state_history(CONFIG)]
    return dict(next(s for s in snapshots if s.next == ("b",)).config["configurable"])


async def head(graph: Any) -> dict[str, Any]:
    return dict((await graph.aget_state(CONFIG)).config["configurable"])


async def drained(stream: AsyncIterator[Any]) -> list[Any]:
    async with asyncio.timeout(20):
        return [chunk async for chunk in stream]


async def test_a_go_ahead_at_the_checkpoint_a_breakpoint_paused_at_finishes(router: Router) -> None:
    graph = two_steps(interrupt_before=["b"])
    router.register(LangChainAgent(graph, agent_id="t:steps:01"))
    paused = await router.route("steps", {"topic": "x"}, configurable=THREAD)
    assert (paused.status, paused.payload) == (ResultStatus.INPUT_REQUIRED, {"paused_before": ["b"]})
    done = await router.route("steps", None, configurable=await head(graph), resume=True)
    assert (done.status, done.payload) == (ResultStatus.OK, {"topic": "x", "steps": ["a(x)", "b(x)"]})
    assert (await graph.aget_state(CONFIG)).next == ()


async def test_an_answer_streamed_at_the_checkpoint_an_interrupt_waits_at_finishes(router: Router) -> None:
    graph = asking()
    router.register(LangChainAgent(graph, agent_id="t:approve:01"))
    asked = await router.route("approve", {"topic": "x"}, configurable=THREAD)
    assert asked.status is ResultStatus.INPUT_REQUIRED
    chunks = await drained(
        router.stream("approve", None, configurable=await head(graph), resume="yes", stream_mode="updates")
    )
    assert chunks == [{"approve": {"steps": ["approved yes"]}}]


async def test_a_chain_answered_at_that_checkpoint_finishes(router: Router) -> None:
    graph = asking()
    chain = graph | RunnableLambda(lambda state: " / ".join(state["steps"]), name="post")
    router.register(LangChainAgent(chain, agent_id="t:approve:01"))
    await router.route("approve", {"topic": "x"}, configurable=THREAD)
    done = await router.route("approve", None, configurable=await head(graph), resume="yes")
    assert (done.status, done.payload) == (ResultStatus.OK, "approved yes")


@pytest.mark.parametrize("payload", [None, {}], ids=["none", "empty"])
async def test_no_input_at_a_checkpoint_replays_from_there(router: Router, payload: Any) -> None:
    graph = two_steps()
    router.register(LangChainAgent(graph, agent_id="t:steps:01"))
    await router.route("steps", {"topic": "x"}, configurable=THREAD)
    replayed = await router.route("steps", payload, configurable=await before_b(graph))
    # Only b runs again, as with LangGraph's ainvoke(None, config); a(x) twice would be a new run.
    assert (replayed.status, replayed.payload) == (ResultStatus.OK, {"topic": "x", "steps": ["a(x)", "b(x)"]})


async def test_a_fork_made_with_update_state_runs_from_the_fork(router: Router) -> None:
    graph = two_steps()
    router.register(LangChainAgent(graph, agent_id="t:steps:01"))
    await router.route("steps", {"topic": "x"}, configurable=THREAD)
    fork = await graph.aupdate_state({"configurable": await before_b(graph)}, {"topic": "y"})
    chunks = await drained(
        router.stream("steps", None, configurable=fork["configurable"], stream_mode="updates")
    )
    assert chunks == [{"b": {"steps": ["b(y)"]}}]
    assert (await graph.aget_state(CONFIG)).values == {"topic": "y", "steps": ["a(x)", "b(y)"]}


async def test_an_input_at_a_checkpoint_still_starts_a_new_run_there(router: Router) -> None:
    graph = two_steps()
    router.register(LangChainAgent(graph, agent_id="t:steps:01"))
    await router.route("steps", {"topic": "x"}, configurable=THREAD)
    rerun = await router.route("steps", {"topic": "z"}, configurable=await before_b(graph))
    assert rerun.payload == {"topic": "z", "steps": ["a(x)", "a(z)", "b(z)"]}


@pytest.mark.parametrize("checkpoint", ["nope", None], ids=["unknown", "none"])
async def test_a_checkpoint_id_the_thread_lacks_runs_from_an_empty_state(
    router: Router, checkpoint: str | None
) -> None:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Steps)
    builder.add_node("note", lambda state: {"steps": ["noted"]})
    builder.add_edge(START, "note")
    router.register(LangChainAgent(builder.compile(checkpointer=InMemorySaver()), agent_id="t:note:01"))
    await router.route("note", {}, configurable=THREAD)
    # No replay, so no run without input (LangGraph's EmptyInputError, held against the agent).
    result = await router.route("note", {}, configurable={"thread_id": "b", "checkpoint_id": checkpoint})
    assert (result.status, result.payload) == (ResultStatus.OK, {"steps": ["noted"]}), result.error
    assert router.catalog()[0].failures == 0


def approving() -> Any:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Steps)
    builder.add_node("a", lambda state: {"steps": ["a"]})
    builder.add_node("approve", lambda state: {"steps": [f"approved {interrupt('ok?')}"]})
    builder.add_edge(START, "a")
    builder.add_edge("a", "approve")
    builder.add_edge("approve", END)
    return builder.compile(checkpointer=InMemorySaver())


async def test_a_replay_that_stops_asks_again_and_a_stream_watching_sees_it(router: Router) -> None:
    graph = approving()
    router.register(LangChainAgent(graph, agent_id="t:approve:01"))
    await router.route("approve", {"topic": "x"}, configurable=THREAD)
    await router.route("approve", None, configurable=THREAD, resume="yes")
    snapshots = [snapshot async for snapshot in graph.aget_state_history(CONFIG)]
    before = dict(next(s for s in snapshots if s.next == ("approve",)).config["configurable"])
    replayed = await router.route("approve", {}, configurable=before)
    assert (replayed.status, replayed.payload) == (ResultStatus.INPUT_REQUIRED, "ok?")
    # The question waits at the thread's newest checkpoint: the thread alone answers it.
    done = await router.route("approve", None, configurable=THREAD, resume="again")
    assert (done.status, done.payload) == (ResultStatus.OK, {"topic": "x", "steps": ["a", "approved again"]})
