"""Reach tools in a checkpointed supervisor: the thread a reach tool gives the agent it calls (one
conversation per calling thread and capability, never the caller's own checkpoint, even when both
share one checkpointer; parallel calls to it take turns), and artifacts that go through the
supervisor's checkpoints."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.serde.event_hooks import SerdeEvent, register_serde_event_listener
from langgraph.checkpoint.serde.jsonplus import JsonPlusSerializer
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt

from examples.langchain_demo.agents import scripted
from middleware import Fault, ReachResult, ResultStatus
from reach_adapters import Capability, FunctionAgent, Router
from reach_adapters.langchain import LangChainAgent, ReachToolkit

pytestmark = pytest.mark.timeout(30)


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


def files_agent(saver: InMemorySaver) -> Any:
    """A sub-agent that asks before it deletes anything."""
    model = scripted(
        AIMessage("", tool_calls=[{"name": "delete_file", "args": {"path": "r.txt"}, "id": "d1"}]),
        AIMessage("file deleted"),
        repeat=True,
    )
    approval = HumanInTheLoopMiddleware(interrupt_on={"delete_file": True})
    return create_agent(model, tools=[delete_file], name="files", middleware=[approval], checkpointer=saver)


def human_texts(state: Any) -> list[str]:
    return [str(message.content) for message in state.values["messages"] if message.type == "human"]


async def test_a_sub_agent_sharing_the_supervisors_checkpointer_keeps_its_own_thread(router: Router) -> None:
    saver = InMemorySaver()  # one checkpointer for the whole app, as LangGraph's docs show
    files = files_agent(saver)
    router.register(LangChainAgent(files, agent_id="ops:files:01"))
    ask = {"messages": [{"role": "user", "content": "delete r.txt"}]}
    resume = {"target": "ops:files:01", "resume": {"decisions": [{"type": "approve"}]}}
    boss_model = scripted(
        AIMessage("", tool_calls=[{"name": "files", "args": ask, "id": "c1"}]),
        AIMessage("The files agent asks for approval. Approve?"),
        AIMessage("", tool_calls=[{"name": "reach_agent", "args": resume, "id": "c2"}]),
        AIMessage("done"),
    )
    boss = create_agent(boss_model, tools=ReachToolkit(router).get_tools(), checkpointer=saver)
    alice: RunnableConfig = {"configurable": {"thread_id": "alice"}}
    first = await boss.ainvoke({"messages": [{"role": "user", "content": "clean up r.txt"}]}, alice)
    asked = [message for message in first["messages"] if message.type == "tool"][-1]
    assert "needs input" in asked.content
    second = await boss.ainvoke({"messages": [{"role": "user", "content": "yes, approve"}]}, alice)
    answered = [message for message in second["messages"] if message.type == "tool"][-1]
    assert (answered.status, answered.content) == ("success", "file deleted")
    # The sub-agent's conversation is its own, on the thread derived from the caller's: it never
    # saw the supervisor's messages, and the supervisor's thread holds none of the sub-agent's.
    sub = await files.aget_state({"configurable": {"thread_id": "alice/files"}})
    assert human_texts(sub) == ["delete r.txt"]
    assert human_texts(await boss.aget_state(alice)) == ["clean up r.txt", "yes, approve"]


async def test_a_failed_calls_artifact_goes_through_a_checkpoint_cleanly(router: Router) -> None:
    async def broken(payload: Any) -> Any:
        raise RuntimeError("the order store is down")

    router.register(
        FunctionAgent(broken, agent_id="shop:orders:01", capabilities=[Capability(name="orders")])
    )
    boss_model = scripted(
        AIMessage("", tool_calls=[{"name": "orders", "args": {}, "id": "c1"}]),
        AIMessage("the order store is down"),
        AIMessage("still down"),
    )
    # LangGraph's strict serializer, the announced default: only the types it knows come back.
    strict = InMemorySaver(serde=JsonPlusSerializer(allowed_msgpack_modules=None))
    boss = create_agent(boss_model, tools=ReachToolkit(router).get_tools(), checkpointer=strict)
    alice: RunnableConfig = {"configurable": {"thread_id": "alice"}}
    events: list[SerdeEvent] = []
    unregister = register_serde_event_listener(events.append)
    try:
        first = await boss.ainvoke({"messages": [{"role": "user", "content": "orders?"}]}, alice)
        second = await boss.ainvoke({"messages": [{"role": "user", "content": "and now?"}]}, alice)
    finally:
        unregister()
    assert events == []
    (failed,) = [message for message in first["messages"] if message.type == "tool"]
    assert isinstance(failed.artifact, ReachResult)
    assert failed.artifact.status is ResultStatus.ERROR
    # Read back from the checkpoint: the same result, as JSON.
    (stored,) = [message for message in second["messages"] if message.type == "tool"]
    assert stored.artifact == failed.artifact.model_dump(mode="json")
    assert ReachResult.model_validate(stored.artifact).error == "the order store is down"


def approval_graph(paid: list[tuple[str, str]]) -> Any:
    """Asks for approval of the refund it is given, then pays it (into `paid`). The question comes
    after a short wait, so two calls sent at once are both running when it is asked."""

    async def ask(state: MessagesState) -> dict[str, Any]:
        await asyncio.sleep(0.05)
        return {"messages": [AIMessage(f"approved: {interrupt('approve?')}")]}

    def pay(state: MessagesState) -> dict[str, Any]:
        asked, answered = state["messages"][-2:]
        paid.append((str(asked.content), str(answered.content)))
        return {}

    builder = StateGraph(MessagesState)
    builder.add_node("ask", ask)
    builder.add_node("pay", pay)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", "pay")
    builder.add_edge("pay", END)
    return builder.compile(checkpointer=InMemorySaver())


def said(text: str) -> Any:
    return {"messages": [{"role": "user", "content": text}]}


def tool_messages(state: dict[str, Any], after: int = 0) -> list[Any]:
    return [message for message in state["messages"][after:] if message.type == "tool"]


async def test_parallel_tool_calls_to_one_checkpointed_sub_agent_lose_no_question(router: Router) -> None:
    """Two calls to one capability in one model turn share the derived thread: the second is
    refused while the first runs (the caller's mistake, not the agent's), and told to come back;
    the first's question is answered on its own, and the second, asked again, is paid too."""
    paid: list[tuple[str, str]] = []
    router.register(LangChainAgent(approval_graph(paid), agent_id="shop:approval:01"))
    resume = {"target": "shop:approval:01", "resume": "yes"}
    boss_model = scripted(
        AIMessage(
            "",
            tool_calls=[
                {"name": "approval", "args": said("refund order 1"), "id": "c1"},
                # The generic tool, by capability, reaches the same conversation.
                {
                    "name": "reach_agent",
                    "args": {"target": "approval", "payload": said("refund order 2")},
                    "id": "c2",
                },
            ],
        ),
        AIMessage("Order 1 needs approval; order 2 must wait for it."),
        AIMessage("", tool_calls=[{"name": "reach_agent", "args": resume, "id": "c3"}]),
        AIMessage("", tool_calls=[{"name": "approval", "args": said("refund order 2"), "id": "c4"}]),
        AIMessage("Order 2 needs approval too."),
        AIMessage("", tool_calls=[{"name": "reach_agent", "args": resume, "id": "c5"}]),
        AIMessage("Both refunded."),
    )
    boss = create_agent(boss_model, tools=ReachToolkit(router).get_tools(), checkpointer=InMemorySaver())
    alice: RunnableConfig = {"configurable": {"thread_id": "alice"}}
    first = await boss.ainvoke(said("refund orders 1 and 2"), alice)
    asked, refused = tool_messages(first)
    assert (asked.tool_call_id, asked.status) == ("c1", "success")
    assert "needs input" in asked.content
    assert (refused.tool_call_id, refused.status) == ("c2", "error")
    assert "is running another call" in refused.content
    assert "answer it first with resume" in refused.content
    assert (refused.artifact.status, refused.artifact.fault) == (ResultStatus.INVALID, Fault.CALLER)
    second = await boss.ainvoke(said("approve order 1"), alice)
    answered, asked_again = tool_messages(second, len(first["messages"]))
    assert (answered.status, answered.content) == ("success", "approved: yes")
    assert asked_again.status == "success"
    assert "needs input" in asked_again.content
    third = await boss.ainvoke(said("approve order 2"), alice)
    (done,) = tool_messages(third, len(second["messages"]))
    assert (done.status, done.content) == ("success", "approved: yes")
    # Each answer met its own question: both orders paid, once each.
    assert paid == [("refund order 1", "approved: yes"), ("refund order 2", "approved: yes")]
    (info,) = router.catalog()
    assert info.failures == 0
