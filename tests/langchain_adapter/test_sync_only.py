"""`create_agent` agents whose middleware has only sync wrap hooks, as LangChain's docs write them
(``@wrap_model_call`` on a plain function): LangChain runs them with ``invoke`` alone, so the
adapter runs them so, in a worker thread, where ``ainvoke`` failed every routed call."""

from __future__ import annotations

import asyncio
import contextvars
import logging
import sqlite3
import threading
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import (
    HumanInTheLoopMiddleware,
    ModelRequest,
    ModelResponse,
    ToolCallRequest,
    wrap_model_call,
    wrap_tool_call,
)
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.tools import tool
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict

from examples.langchain_demo.agents import scripted
from middleware import Fault, ResultStatus
from reach_adapters import InputRequiredError, Router
from reach_adapters.langchain import LangChainAgent
from reach_adapters.langchain.sync_only import stream_in_worker
from tests.langchain_adapter.conftest import RunRecorder

ASK = {"messages": [{"role": "user", "content": "where is order 42?"}]}
LOOKUP = AIMessage("", tool_calls=[{"name": "lookup", "args": {"order_id": "42"}, "id": "call-1"}])


@tool
def lookup(order_id: str) -> str:
    """Look up an order."""
    return f"order {order_id} shipped"


def logged(seen: list[str]) -> list[Any]:
    """The docs' logging middleware: sync wrap hooks for the model and the tools."""

    @wrap_model_call
    def log_model(request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> ModelResponse:
        seen.append(f"model on {threading.current_thread().name}")
        return handler(request)

    @wrap_tool_call
    def log_tool(
        request: ToolCallRequest, handler: Callable[[ToolCallRequest], ToolMessage | Command[Any]]
    ) -> ToolMessage | Command[Any]:
        seen.append(f"tool {request.tool_call['name']}")
        return handler(request)

    return [log_model, log_tool]


def orders(seen: list[str], **options: Any) -> Any:
    model = scripted(LOOKUP, AIMessage("Order 42 has shipped."), repeat=True)
    return create_agent(model, tools=[lookup], middleware=logged(seen), name="orders", **options)


async def test_an_agent_with_sync_wrap_middleware_routes_as_its_invoke_runs(router: Router) -> None:
    seen: list[str] = []
    router.register(LangChainAgent(orders(seen), agent_id="shop:orders:01"))

    result = await router.route("orders", ASK)

    assert result.status is ResultStatus.OK, result.error
    assert result.payload == "Order 42 has shipped."
    assert [entry.split(" on ")[0] for entry in seen] == ["model", "tool lookup", "model"]
    # Run in a worker thread, off the event loop's.
    assert all(threading.main_thread().name not in entry for entry in seen if entry.startswith("model"))


async def test_its_stream_gives_the_chunks_its_own_stream_gives(router: Router) -> None:
    router.register(LangChainAgent(orders([]), agent_id="shop:orders:01"))

    chunks = [chunk async for chunk in router.stream("orders", ASK, stream_mode="updates")]

    direct = list(orders([]).stream(ASK, stream_mode="updates"))
    assert [list(chunk) for chunk in chunks if isinstance(chunk, dict)] == [list(chunk) for chunk in direct]
    assert len(chunks) == 3
    assert [list(chunk) for chunk in chunks if isinstance(chunk, dict)] == [["model"], ["tools"], ["model"]]


async def test_it_asks_and_resumes_on_its_thread(router: Router) -> None:
    review = HumanInTheLoopMiddleware({"lookup": True})
    model = scripted(LOOKUP, AIMessage("Order 42 has shipped."))
    seen: list[str] = []
    graph = create_agent(
        model, tools=[lookup], middleware=[*logged(seen), review], name="orders", checkpointer=InMemorySaver()
    )
    router.register(LangChainAgent(graph, agent_id="shop:orders:01"))
    thread = {"thread_id": "alice"}

    asked = await router.route("orders", ASK, configurable=thread)
    assert asked.status is ResultStatus.INPUT_REQUIRED, asked.error

    answered = await router.route(
        "orders", None, configurable=thread, resume={"decisions": [{"type": "approve"}]}
    )
    assert answered.status is ResultStatus.OK, answered.error
    assert answered.payload == "Order 42 has shipped."
    assert "tool lookup" in seen


async def test_the_run_nests_under_the_run_that_called_the_router(router: Router) -> None:
    router.register(LangChainAgent(orders([]), agent_id="shop:orders:01"))

    async def caller(ask: Any) -> Any:
        return (await router.route("orders", ask)).payload

    recorder = RunRecorder()
    out = await RunnableLambda(caller).ainvoke(ASK, {"callbacks": [recorder], "run_name": "caller"})

    assert out == "Order 42 has shipped."
    routed = recorder.named("orders@shop:orders:01")
    assert recorder.parent(routed) is recorder.named("caller")
    assert routed.metadata["reach_agent_id"] == "shop:orders:01"


async def test_a_timed_out_run_keeps_its_thread_until_it_ends(router: Router) -> None:
    release = threading.Event()
    ended = threading.Event()

    @wrap_model_call
    def slow(request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> ModelResponse:
        release.wait(5)
        try:
            return handler(request)
        finally:
            ended.set()

    model = scripted(AIMessage("done"), repeat=True)
    graph = create_agent(model, tools=[], middleware=[slow], name="orders", checkpointer=InMemorySaver())
    router.register(LangChainAgent(graph, agent_id="shop:orders:01"))
    thread = {"thread_id": "alice"}

    late = await router.route("orders", ASK, configurable=thread, timeout_ms=100)
    assert late.status is ResultStatus.TIMEOUT, late.error

    # The first run still runs in its worker: a second call on the thread would run beside it.
    busy = await router.route("orders", ASK, configurable=thread)
    assert busy.status is ResultStatus.INVALID, busy.error
    assert busy.fault is Fault.CALLER
    assert "running another call" in (busy.error or "")

    release.set()
    assert await asyncio.to_thread(ended.wait, 5)
    for _ in range(100):  # the worker lets go of the thread as its run returns
        later = await router.route("orders", ASK, configurable=thread)
        if later.status is not ResultStatus.INVALID:
            break
        await asyncio.sleep(0.02)
    assert later.status is ResultStatus.OK, later.error


def test_middleware_that_only_one_way_each_warns_at_registration(caplog: pytest.LogCaptureFixture) -> None:
    @wrap_model_call
    async def timed(request: ModelRequest, handler: Any) -> ModelResponse:
        return await handler(request)  # type: ignore[no-any-return]

    graph = create_agent(scripted(AIMessage("hi")), tools=[lookup], middleware=[*logged([]), timed])

    with caplog.at_level(logging.WARNING):
        LangChainAgent(graph, agent_id="shop:orders:01")

    assert "neither with invoke nor with ainvoke" in caplog.text
    assert "log_model.wrap_model_call" in caplog.text
    assert "timed.awrap_model_call" in caplog.text


def test_async_middleware_runs_on_the_loop_without_a_word(caplog: pytest.LogCaptureFixture) -> None:
    @wrap_model_call
    async def timed(request: ModelRequest, handler: Any) -> ModelResponse:
        return await handler(request)  # type: ignore[no-any-return]

    graph = create_agent(scripted(AIMessage("hi")), tools=[lookup], middleware=[timed])

    with caplog.at_level(logging.INFO):
        LangChainAgent(graph, agent_id="shop:orders:01")

    assert "worker thread" not in caplog.text


async def test_a_stream_closed_early_stops_at_its_next_chunk() -> None:
    produced: list[int] = []
    go_on = threading.Event()
    closed = threading.Event()

    def numbers() -> Iterator[int]:
        try:
            for number in range(1, 4):
                if number == 2:
                    go_on.wait(5)
                produced.append(number)
                yield number
        finally:
            closed.set()

    stream = stream_in_worker(numbers)
    assert await anext(stream) == 1
    await stream.aclose()
    go_on.set()

    assert await asyncio.to_thread(closed.wait, 5)
    assert produced == [1, 2]


async def test_a_worker_stream_raises_what_its_stream_raised() -> None:
    def failing() -> Iterator[int]:
        yield 1
        msg = "upstream gone"
        raise ConnectionError(msg)

    stream = stream_in_worker(failing)
    assert await anext(stream) == 1
    with pytest.raises(ConnectionError, match="upstream gone"):
        await anext(stream)


REQUEST: contextvars.ContextVar[str] = contextvars.ContextVar("request", default="none")


async def test_the_worker_runs_in_a_copy_of_the_callers_context() -> None:
    REQUEST.set("alice")
    seen = [item async for item in stream_in_worker(lambda: [(REQUEST.get(), threading.current_thread())])]
    assert seen[0][0] == "alice"
    assert seen[0][1] is not threading.current_thread()


class SyncOnlySaver(BaseCheckpointSaver[str]):
    """A checkpointer written with the sync methods only, as `PostgresSaver` is: LangGraph's base
    class makes its async ones raise `NotImplementedError`."""

    def __init__(self) -> None:
        super().__init__()
        self._saved = InMemorySaver()

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return self._saved.get_tuple(config)

    def list(self, config: RunnableConfig | None, **kwargs: Any) -> Iterator[CheckpointTuple]:
        return self._saved.list(config, **kwargs)

    def put(self, config: RunnableConfig, *args: Any) -> RunnableConfig:
        return self._saved.put(config, *args)

    def put_writes(self, config: RunnableConfig, *args: Any) -> None:
        self._saved.put_writes(config, *args)


def sqlite_saver() -> SqliteSaver:
    return SqliteSaver(sqlite3.connect(":memory:", check_same_thread=False))


SYNC_SAVERS = [pytest.param(sqlite_saver, id="SqliteSaver"), pytest.param(SyncOnlySaver, id="sync-only")]


def user_says(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def chatty(saver: Any) -> Any:
    model = scripted(AIMessage("hello"), AIMessage("hello again"))
    return create_agent(model, tools=[], name="greeter", checkpointer=saver)


@pytest.mark.parametrize("make_saver", SYNC_SAVERS)
async def test_a_graph_saving_to_a_sync_checkpointer_keeps_its_conversation(
    router: Router, make_saver: Callable[[], Any], caplog: pytest.LogCaptureFixture
) -> None:
    graph = chatty(make_saver())
    router.register(LangChainAgent(graph, agent_id="shop:greeter:01"))
    thread = {"thread_id": "alice"}

    with caplog.at_level(logging.WARNING):
        first = await router.route(
            "greeter", {"messages": [{"role": "user", "content": "hi"}]}, configurable=thread
        )
    second = await router.route(
        "greeter", {"messages": [{"role": "user", "content": "hi?"}]}, configurable=thread
    )

    assert first.status is ResultStatus.OK, first.error
    assert (first.payload, second.payload) == ("hello", "hello again")
    said = [message.content for message in graph.get_state({"configurable": thread}).values["messages"]]
    assert said == ["hi", "hello", "hi?", "hello again"]
    assert "has no async methods" in caplog.text


class Ask(TypedDict, total=False):
    order_id: str
    approved: bool


def approval(state: Ask) -> Ask:
    return {"approved": interrupt(f"refund order {state['order_id']}?") == "yes"}


@pytest.mark.parametrize("make_saver", SYNC_SAVERS)
async def test_a_graph_saving_to_a_sync_checkpointer_asks_resumes_and_streams(
    router: Router, make_saver: Callable[[], Any]
) -> None:
    builder = StateGraph(Ask)
    builder.add_node("approval", approval)
    builder.add_edge(START, "approval")
    builder.add_edge("approval", END)
    router.register(
        LangChainAgent(builder.compile(checkpointer=make_saver(), name="refund"), agent_id="shop:refund:01")
    )

    asked = await router.route("refund", {"order_id": "42"}, configurable={"thread_id": "t-1"})
    assert asked.status is ResultStatus.INPUT_REQUIRED, asked.error
    assert asked.payload == "refund order 42?"
    answered = await router.route("refund", None, configurable={"thread_id": "t-1"}, resume="yes")
    assert answered.status is ResultStatus.OK, answered.error
    assert answered.payload == {"order_id": "42", "approved": True}

    chunks: list[Any] = []
    streamed = router.stream(
        "refund", {"order_id": "7"}, configurable={"thread_id": "t-2"}, stream_mode="values"
    )
    with pytest.raises(InputRequiredError, match="resume"):
        await collect(streamed, chunks)
    assert chunks[0] == {"order_id": "7"}


async def collect(stream: AsyncIterator[Any], into: list[Any]) -> None:
    async for chunk in stream:
        into.append(chunk)


async def test_an_async_checkpointer_runs_on_the_loop(
    router: Router, caplog: pytest.LogCaptureFixture
) -> None:
    async with AsyncSqliteSaver.from_conn_string(":memory:") as saver:
        router.register(LangChainAgent(chatty(saver), agent_id="shop:greeter:01"))
        with caplog.at_level(logging.WARNING):
            done = await router.route("greeter", user_says("hi"), configurable={"thread_id": "a"})
    assert done.status is ResultStatus.OK, done.error
    assert "worker thread" not in caplog.text
