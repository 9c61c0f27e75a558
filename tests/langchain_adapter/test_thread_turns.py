"""One call at a time on a checkpointed thread: a second call on a thread another call is running
on is refused as the caller's mistake (`InvalidMessageError`), whoever sends it (two answers to one
question, two turns at once, replicas sharing a checkpointer, a stream still being read), and the
thread is free again once the first call ends. Agents that keep no thread take calls at once."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator
from typing import Any, cast

import pytest
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableLambda
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt

from middleware import Fault, ReachResult, ResultStatus
from reach_adapters import Router
from reach_adapters.langchain import LangChainAgent

pytestmark = pytest.mark.timeout(30)

BUSY = "is running another call"


def said(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def approval_graph(paid: list[str]) -> Any:
    """Asks for approval, then pays (into `paid`); its steps take a moment, so calls overlap."""

    async def ask(state: MessagesState) -> dict[str, Any]:
        await asyncio.sleep(0.05)
        return {"messages": [AIMessage(f"approved: {interrupt('approve?')}")]}

    async def pay(state: MessagesState) -> dict[str, Any]:
        await asyncio.sleep(0.05)
        paid.append(str(state["messages"][-1].content))
        return {}

    builder = StateGraph(MessagesState)
    builder.add_node("ask", ask)
    builder.add_node("pay", pay)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", "pay")
    builder.add_edge("pay", END)
    return builder.compile(checkpointer=InMemorySaver())


def memo_graph(saver: InMemorySaver) -> Any:
    """Answers with every user message of its thread so far, after a moment."""

    async def reply(state: MessagesState) -> dict[str, Any]:
        await asyncio.sleep(0.05)
        heard = [str(message.content) for message in state["messages"] if message.type == "human"]
        return {"messages": [AIMessage(" / ".join(heard))]}

    builder = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=saver)


def refused(result: ReachResult) -> bool:
    return (result.status, result.fault) == (ResultStatus.INVALID, Fault.CALLER) and BUSY in (
        result.error or ""
    )


async def test_two_answers_to_one_question_sent_at_once_answer_it_once(router: Router) -> None:
    paid: list[str] = []
    router.register(LangChainAgent(approval_graph(paid), agent_id="shop:approval:01"))
    thread = {"thread_id": "order-42"}
    asked = await router.route("approval", said("refund order 42"), configurable=thread)
    assert asked.status is ResultStatus.INPUT_REQUIRED
    first, second = await asyncio.gather(
        router.route("approval", None, configurable=thread, resume="approve"),
        router.route("approval", None, configurable=thread, resume="reject"),
    )
    assert (first.status, first.payload) == (ResultStatus.OK, "approved: approve")
    assert refused(second), second
    assert paid == ["approved: approve"]
    (info,) = router.catalog()
    assert info.failures == 0


async def test_replicas_sharing_a_checkpointer_take_one_call_per_thread_at_a_time(router: Router) -> None:
    saver = InMemorySaver()
    for instance in ("01", "02"):
        router.register(LangChainAgent(memo_graph(saver), agent_id=f"notes:memo:{instance}"))
    alice = {"thread_id": "alice"}
    results = await asyncio.gather(
        *(router.route("memo", said(f"m{n}"), configurable=alice) for n in range(3))
    )
    assert [result.payload for result in results if result.ok] == ["m0"]
    assert all(refused(result) for result in results[1:])
    # Nothing was lost: the thread holds the turn that ran, and the next turn follows it.
    again = await router.route("memo", said("m1"), configurable=alice)
    assert again.payload == "m0 / m1"
    # Other threads are not held up by it.
    others = await asyncio.gather(
        *(router.route("memo", said(name), configurable={"thread_id": name}) for name in ("bob", "carol"))
    )
    assert [result.payload for result in others] == ["bob", "carol"]
    assert all(info.failures == 0 for info in router.catalog())


async def test_a_stream_holds_its_thread_until_it_ends_or_its_reader_leaves(router: Router) -> None:
    router.register(LangChainAgent(memo_graph(InMemorySaver()), agent_id="notes:memo:01"))
    alice = {"thread_id": "alice"}
    stream = cast(
        AsyncGenerator[Any, None], router.stream("memo", said("m0"), configurable=alice, stream_mode="values")
    )
    await anext(stream)  # the input's state: the graph is running now
    assert refused(await router.route("memo", said("m1"), configurable=alice))
    await stream.aclose()  # left early: the thread is free again
    done = await router.route("memo", said("m1"), configurable=alice)
    assert done.ok, done
    chunks = [chunk async for chunk in router.stream("memo", said("m2"), configurable=alice)]
    assert chunks
    assert (await router.route("memo", said("m3"), configurable=alice)).ok


async def test_an_agent_that_keeps_no_thread_takes_calls_on_one_thread_at_once(router: Router) -> None:
    running = 0
    most = 0

    async def echo(text: str) -> str:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.05)
        running -= 1
        return text

    router.register(LangChainAgent(RunnableLambda(echo), agent_id="util:echo:01"))
    thread = {"thread_id": "alice/echo"}
    results = await asyncio.gather(*(router.route("echo", f"t{n}", configurable=thread) for n in range(3)))
    assert [result.payload for result in results] == ["t0", "t1", "t2"]
    assert most == 3
