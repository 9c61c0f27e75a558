"""`router.stream` over wrapped runnables: chunks as they come, as JSON."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest
from langchain_core.messages import AIMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableGenerator, RunnableLambda
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt
from typing_extensions import TypedDict

from examples.langchain_demo.agents import scripted
from middleware import Fault, ReachMessage, ResultStatus
from reach_adapters import AgentCallError, InputRequiredError, InvalidMessageError, Router
from reach_adapters.langchain import LangChainAgent
from tests.langchain_adapter.conftest import RunRecorder

REPLY = "the parcel left the depot this morning"


async def collect(chunks: AsyncIterator[Any]) -> list[Any]:
    return [chunk async for chunk in chunks]


async def test_a_streaming_chain_yields_its_tokens(router: Router) -> None:
    chain = (
        ChatPromptTemplate.from_messages([("human", "{q}")]) | scripted(AIMessage(REPLY)) | StrOutputParser()
    )
    router.register(LangChainAgent(chain, agent_id="shop:track:01"))

    chunks = await collect(router.stream("track", {"q": "where is it?"}))

    assert len(chunks) > 1
    assert "".join(chunks) == REPLY


async def test_chat_model_chunks_arrive_as_text(router: Router) -> None:
    chain = ChatPromptTemplate.from_messages([("human", "{q}")]) | scripted(AIMessage(REPLY))
    router.register(LangChainAgent(chain, agent_id="shop:track:01"))

    chunks = await collect(router.stream("track", {"q": "where is it?"}))

    assert all(isinstance(chunk, str) for chunk in chunks)
    assert "".join(chunks) == REPLY


class Steps(TypedDict):
    n: int


async def test_a_graph_streams_its_node_updates_as_json(router: Router) -> None:
    builder = StateGraph(Steps)
    builder.add_node("one", lambda s: {"n": s["n"] + 1})
    builder.add_node("two", lambda s: {"n": s["n"] * 10})
    builder.add_edge(START, "one")
    builder.add_edge("one", "two")
    builder.add_edge("two", END)
    router.register(LangChainAgent(builder.compile(), agent_id="math:steps:01"))

    chunks = await collect(router.stream("steps", {"n": 1}))

    assert chunks == [{"one": {"n": 2}}, {"two": {"n": 20}}]  # what the graph's own astream yields


async def test_a_graph_streams_messages_as_langgraphs_pairs_as_the_guide_reads_them(router: Router) -> None:
    model = scripted(AIMessage(REPLY))

    async def answer(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    builder = StateGraph(MessagesState)
    builder.add_node("model", answer)
    builder.add_edge(START, "model")
    builder.add_edge("model", END)
    router.register(LangChainAgent(builder.compile(name="assist"), agent_id="support:assist:01"))
    payload = {"messages": [{"role": "user", "content": "where is it?"}]}

    tokens: list[Any] = []
    # As docs/langchain.md reads them: LangGraph's (message chunk, metadata), as JSON.
    async for chunk in router.stream("assist", payload, stream_mode="messages"):
        assert isinstance(chunk, list)
        message, metadata = chunk
        assert isinstance(message, dict)
        assert isinstance(metadata, dict)
        assert (message["role"], metadata["langgraph_node"]) == ("assistant", "model")
        tokens.append(message["content"])

    assert len(tokens) > 1
    assert "".join(tokens) == REPLY


async def test_a_runnable_that_does_not_stream_yields_its_answer_once(router: Router) -> None:
    async def shout(text: str) -> str:
        return text.upper()

    router.register(LangChainAgent(RunnableLambda(shout), agent_id="util:shout:01"))

    assert await collect(router.stream("shout", "hi")) == ["HI"]


async def test_a_generator_failing_midway_raises_after_its_first_chunks(router: Router) -> None:
    async def count(inputs: AsyncIterator[Any]) -> AsyncIterator[int]:
        async for _ in inputs:
            pass
        yield 1
        yield 2
        raise RuntimeError("disk full")

    router.register(
        LangChainAgent(RunnableGenerator(count), agent_id="util:count:01", capabilities=[{"name": "count"}])
    )
    seen: list[Any] = []

    async def consume() -> None:
        async for chunk in router.stream("count", {}):
            seen.append(chunk)

    with pytest.raises(AgentCallError, match="RuntimeError: disk full"):
        await consume()

    assert seen == [1, 2]


async def test_a_streamed_run_is_named_and_tagged_like_an_invoked_one() -> None:
    recorder = RunRecorder()
    chain = (
        ChatPromptTemplate.from_messages([("human", "{q}")]) | scripted(AIMessage(REPLY)) | StrOutputParser()
    )
    agent = LangChainAgent(chain, agent_id="shop:track:01", config={"callbacks": [recorder]})
    message = ReachMessage.model_validate({"raw_payload": {"q": "?"}, "meta_info": {"capability": "track"}})

    assert "".join([str(chunk) async for chunk in agent.astream(message)]) == REPLY

    run = recorder.named("track@shop:track:01")
    assert run.metadata["reach_task_id"] == message.meta_info.task_id
    assert "reach:agent:shop:track:01" in run.tags


def nested_steps(*, ask: bool = False) -> Any:
    """A graph whose step ``child`` is a graph of its own (adding one, or first asking whether to);
    the outer graph then doubles."""

    def inc(state: Steps) -> dict[str, int]:
        if ask:
            interrupt("add one?")
        return {"n": state["n"] + 1}

    inner = StateGraph(Steps)
    inner.add_node("inc", inc)
    inner.add_edge(START, "inc")
    inner.add_edge("inc", END)
    outer = StateGraph(Steps)
    outer.add_node("child", inner.compile())
    outer.add_node("double", lambda s: {"n": s["n"] * 2})
    outer.add_edge(START, "child")
    outer.add_edge("child", "double")
    outer.add_edge("double", END)
    return outer.compile(name="steps", checkpointer=InMemorySaver() if ask else None)


async def test_subgraphs_streams_the_nested_graphs_chunks_after_their_namespace(router: Router) -> None:
    router.register(LangChainAgent(nested_steps(), agent_id="math:steps:01"))

    outer_only = await collect(router.stream("steps", {"n": 1}))
    chunks = await collect(router.stream("steps", {"n": 1}, subgraphs=True))
    moded = await collect(router.stream("steps", {"n": 1}, subgraphs=True, stream_mode=["updates"]))

    assert outer_only == [{"child": {"n": 2}}, {"double": {"n": 4}}]
    [(inner, update), *rest] = chunks
    assert inner[0].startswith("child:")
    assert update == {"inc": {"n": 2}}
    assert rest == [[[], {"child": {"n": 2}}], [[], {"double": {"n": 4}}]]
    assert [chunk[1:] for chunk in moded] == [
        ["updates", {"inc": {"n": 2}}],
        *(["updates", c] for c in outer_only),
    ]
    # A unary call answers as without it.
    assert (await router.route("steps", {"n": 1}, subgraphs=True)).payload == {"n": 4}


async def test_a_nested_graphs_question_ends_a_subgraphs_stream_once(router: Router) -> None:
    router.register(LangChainAgent(nested_steps(ask=True), agent_id="math:steps:01"))
    thread = {"thread_id": "t-sub"}

    chunks: list[Any] = []

    async def drain() -> None:
        async for chunk in router.stream("steps", {"n": 1}, subgraphs=True, configurable=thread):
            chunks.append(chunk)

    with pytest.raises(InputRequiredError) as asked:
        await drain()

    # Said once, as the stream's end, not also as LangGraph's own chunk after its namespace.
    assert not any("__interrupt__" in chunk[-1] for chunk in chunks), chunks
    assert asked.value.result is not None
    assert asked.value.result.payload == "add one?"
    done = await router.route("steps", None, configurable=thread, resume="yes")
    assert (done.status, done.payload) == (ResultStatus.OK, {"n": 4})


async def test_subgraphs_for_a_runnable_that_is_no_graph_is_the_callers_mistake(router: Router) -> None:
    router.register(LangChainAgent(RunnableLambda(lambda text: text, name="same"), agent_id="util:same:01"))

    refused = await router.route("same", "hi", subgraphs=True)
    with pytest.raises(InvalidMessageError, match="subgraphs is for LangGraph graphs"):
        _ = [chunk async for chunk in router.stream("same", "hi", subgraphs=True)]

    assert (refused.status, refused.fault) == (ResultStatus.INVALID, Fault.CALLER)
    assert router.catalog()[0].failures == 0
