"""The LangGraph and LCEL patterns of LangChain's own docs work unchanged (issue 11)."""

from __future__ import annotations

import asyncio
import logging
import typing
import warnings
from collections.abc import AsyncIterator, Iterator
from typing import Any
from unittest.mock import ANY

import pytest
import typing_extensions
from langchain.agents import AgentState, create_agent
from langchain_core.callbacks import CallbackManagerForLLMRun
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding
from langchain_core.language_models import BaseChatModel
from langchain_core.messages import AIMessage, AIMessageChunk, BaseMessage
from langchain_core.outputs import ChatGeneration, ChatGenerationChunk, ChatResult
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableLambda, RunnableParallel, RunnablePassthrough
from langchain_core.vectorstores import InMemoryVectorStore
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt

from examples.langchain_demo.agents import scripted
from middleware import Fault, ResultStatus
from reach_adapters import InputRequiredError, Router
from reach_adapters.langchain import LangChainAgent, ReachToolkit

pytestmark = pytest.mark.timeout(30)

USER = [{"role": "user", "content": "hello"}]


def chain_graph(state: type, node: Any) -> Any:
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(state)
    builder.add_node("step", node)
    builder.add_edge(START, "step")
    builder.add_edge("step", END)
    return builder


# -- 1. state schemas: input channels are optional ------------------------------------------


class PlainState(typing.TypedDict):
    question: str
    answer: str
    notes: list[str]


class ExtState(typing_extensions.TypedDict):
    question: str
    answer: str
    notes: list[str]


@pytest.mark.parametrize("state", [PlainState, ExtState], ids=["typing", "typing_extensions"])
async def test_a_typed_dict_graph_takes_partial_input(router: Router, state: type) -> None:
    graph = chain_graph(state, lambda s: {"answer": f"42 for {s['question']}"}).compile()
    router.register(LangChainAgent(graph, agent_id="qa:answer:01"))
    (cap,) = router.reachable().values()
    assert "required" not in cap.input_schema
    assert set(cap.input_schema["properties"]) == {"question", "answer", "notes"}
    result = await router.route(cap.name, {"question": "life"})
    assert result.ok, result.error
    # Keys the run never set (notes) are not in the output, and the output schema knows it.
    assert result.payload == await graph.ainvoke({"question": "life"})


async def test_a_graph_that_declares_its_input_keeps_it_required(router: Router) -> None:
    class Question(typing_extensions.TypedDict):
        question: str

    builder = StateGraph(ExtState, input_schema=Question)
    builder.add_node("step", lambda s: {"answer": "yes"})
    builder.add_edge(START, "step")
    builder.add_edge("step", END)
    router.register(LangChainAgent(builder.compile(), agent_id="qa:strict:01"))
    assert (await router.route("strict", {})).status is ResultStatus.INVALID
    assert (await router.route("strict", {"question": "why"})).ok


class Profiled(MessagesState):
    user_id: str


async def test_a_messages_state_with_extra_keys_takes_only_messages(router: Router) -> None:
    graph = chain_graph(Profiled, lambda s: {"messages": [AIMessage(f"hi {s.get('user_id', 'stranger')}")]})
    router.register(LangChainAgent(graph.compile(), agent_id="chat:greet:01"))
    result = await router.route("greet", {"messages": USER})
    assert (result.ok, result.payload) == (True, "hi stranger")
    assert (await router.route("greet", {"messages": USER, "user_id": "ada"})).payload == "hi ada"


class Planned(AgentState):
    user_id: str
    plan: typing_extensions.NotRequired[str]


async def test_create_agent_with_an_extended_state_takes_only_messages(router: Router) -> None:
    agent = create_agent(scripted(AIMessage("on it")), tools=[], state_schema=Planned)
    router.register(LangChainAgent(agent, agent_id="ops:assist:01"))
    (cap,) = router.reachable().values()
    assert "required" not in cap.input_schema
    (tool,) = [t for t in ReachToolkit(router).get_tools() if t.name == cap.name]
    assert isinstance(tool.tool_call_schema, dict)
    assert "required" not in tool.tool_call_schema  # what models are shown
    result = await router.route(cap.name, {"messages": USER})
    assert (result.ok, result.payload) == (True, "on it")


# -- 2. RunnableParallel and .assign ---------------------------------------------------------


def retriever() -> Any:
    store = InMemoryVectorStore(DeterministicFakeEmbedding(size=16))
    store.add_documents([Document("refunds take 5 days"), Document("shipping is free")])
    return store.as_retriever(search_kwargs={"k": 1})


async def test_the_rag_with_sources_pattern_routes_what_its_ainvoke_takes(router: Router) -> None:
    prompt = ChatPromptTemplate.from_messages([("system", "Context: {context}"), ("user", "{question}")])
    answer = prompt | scripted(*[AIMessage("5 days")] * 2) | RunnableLambda(lambda m: m.content)
    rag = RunnableParallel(context=retriever(), question=RunnablePassthrough()).assign(answer=answer)
    router.register(LangChainAgent(rag, agent_id="kb:rag:01"))
    (cap,) = router.reachable().values()
    routed = await router.route(cap.name, "how long do refunds take?")
    assert routed.ok, routed.error
    direct = await rag.ainvoke("how long do refunds take?")
    assert routed.payload["answer"] == direct["answer"] == "5 days"  # type: ignore[index, call-overload]
    assert routed.payload["question"] == "how long do refunds take?"  # type: ignore[index, call-overload]
    assert len(routed.payload["context"]) == 1  # type: ignore[index, call-overload, arg-type]


async def test_a_bare_runnable_parallel_routes_any_input(router: Router) -> None:
    both = RunnableParallel(upper=RunnableLambda(str.upper), lower=RunnableLambda(str.lower))
    router.register(LangChainAgent(both, agent_id="text:cases:01"))
    (cap,) = router.reachable().values()
    result = await router.route(cap.name, "Hello")
    assert result.payload == {"upper": "HELLO", "lower": "hello"}


def _counting() -> Any:
    return RunnablePassthrough.assign(n=lambda x: len(x["question"]))


@pytest.mark.parametrize(
    "runnable",
    [
        _counting(),
        _counting().pick("n"),
        _counting().with_retry(stop_after_attempt=2).with_fallbacks([_counting()]),
        RunnablePassthrough() | _counting(),
        RunnablePassthrough(lambda _: None).with_config(run_name="seen") | _counting(),
    ],
)
async def test_assign_and_pick_take_a_dict_so_other_input_is_the_callers_mistake(
    router: Router, runnable: Any
) -> None:
    """Their own `ainvoke` refuses anything but a dict: routed, that is not the agent's failure."""
    router.register(LangChainAgent(runnable, agent_id="text:count:01"))
    (cap,) = router.reachable().values()
    for _ in range(3):
        refused = await router.route(cap.name, "hello")
        assert (refused.status, refused.fault) == (ResultStatus.INVALID, Fault.CALLER)
    assert (await router.route(cap.name, {"question": "cats"})).status == ResultStatus.OK


async def test_assign_with_a_fallback_that_takes_any_input_routes_what_its_ainvoke_takes(
    router: Router,
) -> None:
    counted = RunnablePassthrough.assign(n=lambda x: len(x["question"])).with_fallbacks(
        [RunnableLambda(lambda x: {"question": x, "n": -1})]
    )
    router.register(LangChainAgent(counted, agent_id="text:count:01"))
    (cap,) = router.reachable().values()
    assert (await router.route(cap.name, "hello")).payload == await counted.ainvoke("hello")  # type: ignore[arg-type]


async def test_a_fallback_that_answers_otherwise_than_an_assign_is_not_held_to_its_output(
    router: Router,
) -> None:
    """`.assign()` declares no output; its fallback's lambda none either: nor does the whole."""
    counted = _counting().with_fallbacks([RunnableLambda(lambda x: {"question": str(x)})])
    router.register(LangChainAgent(counted, agent_id="text:count:01"))
    (cap,) = router.reachable().values()
    assert cap.output_schema is None
    result = await router.route(cap.name, "hello")
    assert (result.status, result.payload) == (ResultStatus.OK, {"question": "hello"})


# -- 3. output schemas describe the payload ----------------------------------------------------


async def test_loosely_typed_outputs_that_come_back_chat_shaped_are_ok(router: Router) -> None:
    graph = chain_graph(MessagesState, lambda s: {"messages": [AIMessage("graph says hi")]}).compile()

    async def call_graph(payload: dict[str, Any]) -> dict[str, Any]:
        state: dict[str, Any] = await graph.ainvoke(payload)
        return state

    router.register(LangChainAgent(RunnableLambda(call_graph, name="wrapper"), agent_id="chat:wrap:01"))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from langchain_core.chat_history import InMemoryChatMessageHistory
        from langchain_core.runnables.history import RunnableWithMessageHistory

        histories: dict[str, InMemoryChatMessageHistory] = {}
        prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("user", "{input}")])
        with_history = RunnableWithMessageHistory(
            prompt | scripted(*[AIMessage("remembered")] * 4),
            lambda session_id: histories.setdefault(session_id, InMemoryChatMessageHistory()),
            input_messages_key="input",
            history_messages_key="history",
        )
        router.register(
            LangChainAgent(
                with_history, agent_id="chat:memory:01", config={"configurable": {"session_id": "s"}}
            )
        )
        for _ in range(3):
            wrapped = await router.route("wrapper", {"messages": USER})
            remembered = await router.route("memory", {"input": "hi"})
            assert (wrapped.ok, wrapped.payload) == (True, "graph says hi"), wrapped.error
            assert (remembered.ok, remembered.payload) == (True, "remembered"), remembered.error
    assert all(info.failures == 0 for info in router.catalog())


# -- 5 and 6. threads, interrupts, resume ------------------------------------------------------


def checkpointed_chat() -> Any:
    def reply(state: MessagesState) -> dict[str, Any]:
        said = [m.content for m in state["messages"] if m.type == "human"]
        return {"messages": [AIMessage(" / ".join(str(s) for s in said))]}

    return chain_graph(MessagesState, reply).compile(checkpointer=InMemorySaver())


async def test_each_caller_thread_keeps_its_own_conversation(
    router: Router, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="reach_adapters.langchain"):
        router.register(LangChainAgent(checkpointed_chat(), agent_id="chat:memo:01"))
    assert "configurable={'thread_id': ...}" in caplog.text
    for who, said in (("alice", "a1"), ("bob", "b1"), ("alice", "a2")):
        result = await router.route(
            "memo", {"messages": [{"role": "user", "content": said}]}, configurable={"thread_id": who}
        )
        assert result.ok, result.error
    alice = await router.route(
        "memo", {"messages": [{"role": "user", "content": "a3"}]}, configurable={"thread_id": "alice"}
    )
    bob = await router.route(
        "memo", {"messages": [{"role": "user", "content": "b2"}]}, configurable={"thread_id": "bob"}
    )
    assert alice.payload == "a1 / a2 / a3"
    assert bob.payload == "b1 / b2"


async def test_a_call_without_a_thread_is_the_callers_mistake(router: Router) -> None:
    router.register(LangChainAgent(checkpointed_chat(), agent_id="chat:memo:01"))
    result = await router.route("memo", {"messages": USER})
    assert (result.status, result.fault) == (ResultStatus.INVALID, Fault.CALLER)
    assert "thread_id" in (result.error or "")
    assert router.catalog()[0].failures == 0


def approval_graph() -> Any:
    def review(state: MessagesState) -> dict[str, Any]:
        decision = interrupt({"question": "approve the refund of order 42?"})
        return {"messages": [AIMessage(f"refund {decision}")]}

    return chain_graph(MessagesState, review).compile(checkpointer=InMemorySaver())


async def test_an_interrupt_asks_for_input_and_resume_goes_on(router: Router) -> None:
    router.register(LangChainAgent(approval_graph(), agent_id="support:refund:01"))
    thread = {"thread_id": "t-7"}
    asked = await router.route("refund", {"messages": USER}, configurable=thread)
    assert asked.status is ResultStatus.INPUT_REQUIRED
    assert asked.payload == {"question": "approve the refund of order 42?"}
    assert asked.fault is None
    done = await router.route("refund", None, configurable=thread, resume="approved")
    assert (done.status, done.payload) == (ResultStatus.OK, "refund approved")
    assert router.catalog()[0].failures == 0


async def drained(stream: AsyncIterator[Any], chunks: list[Any]) -> None:
    async with asyncio.timeout(30):
        async for chunk in stream:
            chunks.append(chunk)


async def test_a_stream_that_stops_at_an_interrupt_asks_for_input(router: Router) -> None:
    router.register(LangChainAgent(approval_graph(), agent_id="support:refund:01"))
    thread = {"thread_id": "t-s"}
    chunks: list[Any] = []
    with pytest.raises(InputRequiredError) as asked:
        await drained(router.stream("refund", {"messages": USER}, configurable=thread), chunks)
    assert asked.value.result is not None
    assert asked.value.result.payload == {"question": "approve the refund of order 42?"}
    assert asked.value.result.extra["interrupts"] == [
        {"id": ANY, "value": {"question": "approve the refund of order 42?"}}
    ]
    # Said once, as the stream's end, not also as a chunk in LangGraph's own shape.
    assert not any(isinstance(chunk, dict) and "__interrupt__" in chunk for chunk in chunks)
    assert router.recent_decisions(1)[0].status == "input_required"
    assert router.catalog()[0].failures == 0
    done = await router.route("refund", None, configurable=thread, resume="approved")
    assert (done.status, done.payload) == (ResultStatus.OK, "refund approved")


async def test_a_stream_in_a_mode_asked_keeps_langgraphs_chunks_and_still_asks(router: Router) -> None:
    router.register(LangChainAgent(approval_graph(), agent_id="support:refund:01"))
    chunks: list[Any] = []
    stream = router.stream(
        "refund", {"messages": USER}, configurable={"thread_id": "t-u"}, stream_mode="updates"
    )
    with pytest.raises(InputRequiredError):
        await drained(stream, chunks)
    assert any(isinstance(chunk, dict) and "__interrupt__" in chunk for chunk in chunks)


async def test_a_graph_bound_to_its_thread_is_resumed_on_it(router: Router) -> None:
    bound = approval_graph().with_config(configurable={"thread_id": "bound-1"})
    router.register(LangChainAgent(bound, agent_id="support:refund:01"))
    asked = await router.route("refund", {"messages": USER})
    assert asked.status is ResultStatus.INPUT_REQUIRED
    done = await router.route("refund", None, resume="approved")
    assert (done.status, done.payload) == (ResultStatus.OK, "refund approved")


async def test_resume_on_a_runnable_that_cannot_be_resumed_is_invalid(router: Router) -> None:
    router.register(LangChainAgent(RunnableLambda(str.upper, name="upper"), agent_id="text:upper:01"))
    result = await router.route("upper", "x", resume="yes")
    assert (result.status, result.fault) == (ResultStatus.INVALID, Fault.CALLER)


# -- 7. streaming modes and tool-call chunks ---------------------------------------------------


class ToolCallingStream(BaseChatModel):
    """Streams a few tokens, then a tool call in pieces, as real providers do."""

    @property
    def _llm_type(self) -> str:
        return "tool-calling-stream"

    def _generate(
        self, messages: list[BaseMessage], stop: Any = None, run_manager: Any = None, **kw: Any
    ) -> ChatResult:
        call = {"name": "lookup", "args": {"q": "42"}, "id": "c1"}
        return ChatResult(generations=[ChatGeneration(message=AIMessage("let me check", tool_calls=[call]))])

    def _stream(
        self,
        messages: list[BaseMessage],
        stop: Any = None,
        run_manager: CallbackManagerForLLMRun | None = None,
        **kw: Any,
    ) -> Iterator[ChatGenerationChunk]:
        for token in ("let ", "me ", "check"):
            chunk = ChatGenerationChunk(message=AIMessageChunk(content=token))
            if run_manager is not None:
                run_manager.on_llm_new_token(token, chunk=chunk)
            yield chunk
        for part in (
            {"name": "lookup", "args": '{"q": ', "id": "c1", "index": 0},
            {"args": '"42"}', "index": 0},
        ):
            yield ChatGenerationChunk(message=AIMessageChunk(content="", tool_call_chunks=[part]))


async def collect(chunks: AsyncIterator[Any]) -> list[Any]:
    return [chunk async for chunk in chunks]


async def test_tool_call_chunks_of_a_chat_model_are_not_lost(router: Router) -> None:
    router.register(LangChainAgent(ToolCallingStream(), agent_id="llm:tools:01"))
    (cap,) = router.reachable().values()
    chunks = await collect(router.stream(cap.name, "where is order 42?"))
    text = [c for c in chunks if isinstance(c, str)]
    calls = [c for c in chunks if isinstance(c, dict)]
    assert "".join(text) == "let me check"
    assert [c["tool_call_chunks"][0]["args"] for c in calls] == ['{"q": ', '"42"}']


async def test_a_graph_streams_in_the_mode_asked(router: Router) -> None:
    model = ToolCallingStream()

    async def think(state: MessagesState) -> dict[str, Any]:
        return {"messages": [await model.ainvoke(state["messages"])]}

    router.register(LangChainAgent(chain_graph(MessagesState, think).compile(), agent_id="chat:think:01"))
    tokens = await collect(router.stream("think", {"messages": USER}, stream_mode="messages"))
    message, metadata = tokens[0]
    assert (message["role"], message["content"]) == ("assistant", "let ")
    assert metadata["langgraph_node"] == "step"
    assert any(m.get("tool_call_chunks") for m, _ in tokens)
    updates = await collect(router.stream("think", {"messages": USER}, stream_mode=["updates"]))
    assert updates[0][0] == "updates"
    assert updates[0][1]["step"]["messages"][0]["tool_calls"][0]["name"] == "lookup"


async def test_stream_mode_on_a_runnable_that_is_no_graph_is_the_callers_mistake(router: Router) -> None:
    from reach_adapters import InvalidMessageError

    router.register(LangChainAgent(RunnableLambda(str.upper, name="upper"), agent_id="text:upper:01"))
    with pytest.raises(InvalidMessageError, match="stream_mode is for LangGraph graphs"):
        await collect(router.stream("upper", "x", stream_mode="updates"))
    assert router.catalog()[0].failures == 0


# -- 8. text tasks to chat agents --------------------------------------------------------------


async def test_text_tasks_reach_chat_agents(router: Router) -> None:
    graph = chain_graph(
        MessagesState, lambda s: {"messages": [AIMessage(f"echo: {s['messages'][-1].content}")]}
    )
    router.register(LangChainAgent(graph.compile(), agent_id="chat:echo:01"))
    plain = await router.route("echo", "hello there")
    assert (plain.ok, plain.payload) == (True, "echo: hello there"), plain.error
    matched = await router.route(None, {"messages": [{"role": "user", "content": "please echo this"}]})
    assert (matched.capability, matched.payload) == ("echo", "echo: please echo this")


class TextState(MessagesState):
    text: str


async def test_a2a_text_tasks_reach_chat_graphs_as_a_user_message(router: Router) -> None:
    # An A2A message of text parts arrives as {"text": ...}; a messages graph's state schema
    # is open, so it would take that object and run with no messages at all.
    def echo(s: Any) -> dict[str, Any]:
        return {"messages": [AIMessage(f"echo: {s['messages'][-1].content}")]}

    router.register(LangChainAgent(chain_graph(MessagesState, echo).compile(), agent_id="chat:echo:01"))
    agent = create_agent(scripted(AIMessage("done")), tools=[], system_prompt="You answer.")
    router.register(answering := LangChainAgent(agent, agent_id="chat:answer:01"))
    echoed = await router.route("echo", {"text": "hello there"})
    assert (echoed.ok, echoed.payload) == (True, "echo: hello there"), echoed.error
    answered = await router.route(answering.capabilities[0].name, {"text": "hello there"})
    assert (answered.ok, answered.payload) == (True, "done"), answered.error

    # A state that declares a text key of its own takes the object as its state.
    def said(s: Any) -> dict[str, Any]:
        return {"messages": [AIMessage(f"text={s['text']} messages={len(s['messages'])}")]}

    router.register(LangChainAgent(chain_graph(TextState, said).compile(), agent_id="chat:said:01"))
    kept = await router.route("said", {"text": "hi", "messages": USER})
    assert kept.payload == "text=hi messages=1", kept.error
    alone = await router.route("said", {"text": "hi"})
    assert alone.payload == "text=hi messages=0", alone.error


# -- 9. descriptions ---------------------------------------------------------------------------


def test_derived_capabilities_say_what_they_do() -> None:
    agent = create_agent(scripted(AIMessage("x")), tools=[], system_prompt="You refund orders politely.")
    chain = ChatPromptTemplate.from_messages(
        [("system", "Summarise the text in one line."), ("user", "{text}")]
    )
    described = {
        "a:refund:01": (agent, "You refund orders politely."),
        "m:chat:01": (scripted(AIMessage("x")), "A chat model"),
        "c:summary:01": (chain | scripted(AIMessage("x")), "Summarise the text in one line."),
        "k:docs:01": (retriever(), "Finds the documents relevant to a query"),
        "g:steps:01": (chain_graph(MessagesState, lambda s: s).compile(), "steps step"),
    }
    for agent_id, (runnable, said) in described.items():
        (cap,) = LangChainAgent(runnable, agent_id=agent_id).capabilities
        assert said in cap.description, (agent_id, cap.description)


# -- 10. only message-shaped fields become messages --------------------------------------------


class Audit(typing_extensions.TypedDict):
    log: list[dict[str, str]]
    messages: list[BaseMessage]


async def test_plain_dict_fields_stay_plain_dicts(router: Router) -> None:
    seen: dict[str, Any] = {}

    def inspect_types(payload: Audit) -> str:
        seen.update(
            {"log": type(payload["log"][0]).__name__, "messages": type(payload["messages"][0]).__name__}
        )
        return "seen"

    audit = RunnableLambda(inspect_types, name="audit").with_types(input_type=Audit)
    router.register(LangChainAgent(audit, agent_id="ops:audit:01"))
    result = await router.route("audit", {"log": USER, "messages": USER})
    assert result.ok, result.error
    assert seen == {"log": "dict", "messages": "HumanMessage"}


# -- review: what the first version of these got wrong -----------------------------------------


async def test_resume_is_checked_against_the_interrupts_the_thread_waits_on(router: Router) -> None:
    class Asked(typing_extensions.TypedDict):
        question: str

    def two(state: ExtState) -> dict[str, Any]:
        first = interrupt("first?")
        second = interrupt("second?")
        return {"answer": f"{first}/{second}"}

    builder = StateGraph(ExtState, input_schema=Asked)
    builder.add_node("ask", two)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    router.register(LangChainAgent(builder.compile(checkpointer=InMemorySaver()), agent_id="qa:two:01"))
    thread = {"thread_id": "t-1"}
    nothing = await router.route("two", None, configurable={"thread_id": "fresh"}, resume="x")
    assert (nothing.status, nothing.fault) == (ResultStatus.INVALID, Fault.CALLER)
    assert "waits on no interrupt" in (nothing.error or "")
    assert (await router.route("two", {"question": "q"}, configurable=thread)).payload == "first?"
    empty = await router.route("two", None, configurable=thread, resume=None)
    assert empty.status is ResultStatus.INVALID
    # The input schema requires a question: an answer to an interrupt is not held to it.
    assert (await router.route("two", None, configurable=thread, resume="a")).payload == "second?"
    done = await router.route("two", None, configurable=thread, resume="b")
    assert done.payload == {"question": "q", "answer": "a/b"}
    again = await router.route("two", None, configurable=thread, resume="c")
    assert again.status is ResultStatus.INVALID
    assert router.catalog()[0].failures == 0


async def test_a_thread_named_by_a_binding_serves_every_call(router: Router) -> None:
    bound = checkpointed_chat().with_config(configurable={"thread_id": "fixed"})
    router.register(LangChainAgent(bound, agent_id="chat:fixed:01"))
    assert (await router.route("fixed", {"messages": USER})).ok


async def test_a_graph_routed_from_a_graph_node_runs_as_its_own_graph(router: Router) -> None:
    seen: list[Any] = []

    def child(state: ExtState) -> dict[str, Any]:
        from langchain_core.runnables.config import var_child_runnable_config

        configurable = (var_child_runnable_config.get() or {}).get("configurable", {})
        seen.append((configurable.get("thread_id"), str(configurable.get("checkpoint_ns", ""))))
        return {"answer": "child"}

    async def parent(state: ExtState) -> dict[str, Any]:
        return {"answer": str((await router.route("kid", {"question": "x"})).payload)}

    router.register(LangChainAgent(chain_graph(ExtState, child).compile(), agent_id="qa:kid:01"))
    outer = chain_graph(ExtState, parent).compile(checkpointer=InMemorySaver())
    await outer.ainvoke({"question": "q"}, {"configurable": {"thread_id": "parent-1"}})
    ((thread, namespace),) = seen
    assert thread is None
    assert "|" not in namespace  # not nested under the parent's checkpoint namespace


async def test_pydantic_and_dataclass_states_keep_their_required_keys(router: Router) -> None:
    import dataclasses

    from pydantic import BaseModel

    class Model(BaseModel):
        question: str
        answer: str = ""

    @dataclasses.dataclass
    class Data:
        question: str
        answer: str = ""

    for n, state in enumerate((Model, Data)):
        graph = chain_graph(state, lambda s: {"answer": "yes"}).compile()
        router.register(LangChainAgent(graph, agent_id=f"qa:state{n}:01"))
        missing = await router.route(f"state{n}", {"answer": "x"})
        assert (missing.status, missing.fault) == (ResultStatus.INVALID, Fault.CALLER)
        assert (await router.route(f"state{n}", {"question": "q"})).ok
    assert all(info.failures == 0 for info in router.catalog())


async def test_a_mapped_graph_takes_a_list(router: Router) -> None:
    graph = chain_graph(ExtState, lambda s: {"answer": s["question"] * 2}).compile()
    router.register(LangChainAgent(graph.map(), agent_id="qa:each:01"))
    result = await router.route("each", [{"question": "x"}, {"question": "y"}])
    assert result.ok, result.error
    assert result.payload == [{"question": "x", "answer": "xx"}, {"question": "y", "answer": "yy"}]


async def test_picking_from_a_rag_mapping_is_not_held_to_its_declared_types(router: Router) -> None:
    prompt = ChatPromptTemplate.from_messages([("system", "Context: {context}"), ("user", "{question}")])
    answer = prompt | scripted(*[AIMessage("5 days")] * 3) | RunnableLambda(lambda m: m.content)
    rag = RunnableParallel(context=retriever(), question=RunnablePassthrough()).assign(answer=answer)
    router.register(LangChainAgent(rag.pick(["answer", "context"]), agent_id="kb:picked:01"))
    for _ in range(3):
        result = await router.route("picked", "how long?")
        assert result.ok, result.error
    assert router.catalog()[0].failures == 0


async def test_a_broadcast_counts_a_question_as_an_answer(router: Router) -> None:
    router.register(LangChainAgent(approval_graph(), agent_id="support:refund:01"))
    many = await router.broadcast("refund", {"messages": USER}, configurable={"thread_id": "b-1"})
    assert many.status is ResultStatus.OK
    assert many.payload == {"support:refund:01": {"question": "approve the refund of order 42?"}}
