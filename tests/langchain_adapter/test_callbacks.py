"""Routed runs in LangChain's callback tree: their ids, their parent, and cancellation."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda

from examples.langchain_demo.agents import scripted
from reach_adapters import Router
from reach_adapters.langchain import LangChainAgent, ReachToolkit
from tests.langchain_adapter.conftest import RunRecorder


async def shout(text: str) -> str:
    return text.upper()


async def test_a_routed_run_is_named_tagged_and_carries_the_task(router: Router) -> None:
    recorder = RunRecorder()
    router.register(
        LangChainAgent(RunnableLambda(shout), agent_id="util:shout:01", config={"callbacks": [recorder]})
    )

    result = await router.route("shout", "hi", trace_id="trace-1")

    run = recorder.named("shout@util:shout:01")
    assert run.parent_run_id is None
    assert run.metadata["reach_task_id"] == result.task_id
    assert run.metadata["reach_trace_id"] == "trace-1"
    assert run.metadata["reach_capability"] == "shout"
    assert run.metadata["reach_agent_id"] == "util:shout:01"
    assert {"agent-reach", "reach:capability:shout", "reach:agent:util:shout:01"} <= set(run.tags)


async def test_a_run_that_calls_the_router_is_the_parent_of_the_routed_run(router: Router) -> None:
    router.register(LangChainAgent(RunnableLambda(shout), agent_id="util:shout:01"))

    async def caller(text: str) -> Any:
        return (await router.route("shout", text)).payload

    recorder = RunRecorder()
    out = await RunnableLambda(caller).ainvoke("hi", {"callbacks": [recorder], "run_name": "caller"})

    assert out == "HI"
    routed = recorder.named("shout@util:shout:01")
    assert recorder.parent(routed) is recorder.named("caller")


async def test_the_agents_own_callbacks_join_the_parents_instead_of_replacing_them(router: Router) -> None:
    own = RunRecorder()
    router.register(
        LangChainAgent(RunnableLambda(shout), agent_id="util:shout:01", config={"callbacks": [own]})
    )

    async def caller(text: str) -> Any:
        return (await router.route("shout", text)).payload

    parents = RunRecorder()
    await RunnableLambda(caller).ainvoke("hi", {"callbacks": [parents], "run_name": "caller"})

    routed = parents.named("shout@util:shout:01")
    assert parents.parent(routed) is parents.named("caller")
    assert own.named("shout@util:shout:01").run_id == routed.run_id  # one run, seen by both


def refund_graph() -> Any:
    return create_agent(scripted(AIMessage("refund approved")), tools=[], name="refund")


async def test_a_supervisor_tool_call_is_the_parent_of_the_routed_agent_run(router: Router) -> None:
    router.register(LangChainAgent(refund_graph(), agent_id="support:refund:01"))
    ask = {"messages": [{"role": "user", "content": "refund 42"}]}
    boss = create_agent(
        scripted(
            AIMessage("", tool_calls=[{"name": "refund", "args": ask, "id": "c1"}]),
            AIMessage("all done"),
        ),
        tools=ReachToolkit(router).get_tools(),
        name="boss",
    )

    recorder = RunRecorder()
    state = await boss.ainvoke(
        {"messages": [{"role": "user", "content": "handle it"}]}, {"callbacks": [recorder]}
    )

    assert state["messages"][-1].content == "all done"
    assert state["messages"][2].content == "refund approved"
    routed = recorder.named("refund@support:refund:01")
    tool_run = recorder.parent(routed)
    assert tool_run is not None
    assert (tool_run.kind, tool_run.name) == ("tool", "refund")
    chain = []
    node = recorder.parent(tool_run)
    while node is not None:
        chain.append(node.name)
        node = recorder.parent(node)
    assert chain[-1] == "boss"  # one tree, rooted at the supervisor's run


async def test_a_sync_tool_call_from_another_thread_nests_too(router: Router) -> None:
    router.register(LangChainAgent(RunnableLambda(shout), agent_id="util:shout:01"))
    await router.route("shout", "bind the router to this loop")
    (tool,) = [t for t in ReachToolkit(router).get_tools() if t.name == "shout"]
    recorder = RunRecorder()

    # The router's loop (this one) keeps running while a worker thread calls the tool synchronously.
    out = await asyncio.to_thread(tool.invoke, {"input": "hi"}, RunnableConfig(callbacks=[recorder]))

    assert out == "HI"
    routed = recorder.named("shout@util:shout:01")
    assert recorder.parent(routed) is recorder.named("shout")


async def test_cancelling_the_caller_cancels_the_routed_run(router: Router) -> None:
    started = asyncio.Event()
    cancelled = asyncio.Event()

    async def slow(text: str) -> str:
        started.set()
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return text

    recorder = RunRecorder()
    router.register(
        LangChainAgent(RunnableLambda(slow), agent_id="util:slow:01", config={"callbacks": [recorder]})
    )

    caller = asyncio.create_task(router.route("slow", "x"))
    async with asyncio.timeout(5):
        await started.wait()
    caller.cancel()
    with pytest.raises(asyncio.CancelledError):
        await caller

    assert cancelled.is_set()
    assert isinstance(recorder.named("slow@util:slow:01").error, asyncio.CancelledError)
