"""`create_agent` agents whose middleware has only sync wrap hooks, as LangChain's docs write them
(``@wrap_model_call`` on a plain function): LangChain runs them with ``invoke`` alone, so the
adapter runs them so, in a worker thread, where ``ainvoke`` failed every routed call."""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import sqlite3
import threading
import time
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
from langchain_core.runnables import RunnableConfig, RunnableLambda, RunnableParallel, RunnablePassthrough
from langchain_core.tools import StructuredTool, tool
from langgraph.checkpoint.base import BaseCheckpointSaver, CheckpointTuple
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.checkpoint.sqlite import SqliteSaver
from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import Command, interrupt
from typing_extensions import TypedDict

from examples.langchain_demo.agents import scripted
from middleware import Fault, ResultStatus
from reach_adapters import Capability, FunctionAgent, InputRequiredError, ReachTimeoutError, Router
from reach_adapters.langchain import LangChainAgent
from reach_adapters.router import WorkerPool
from tests.core.conftest import agent_info
from tests.langchain_adapter.conftest import RunRecorder
from tests.waiting import eventually

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

    stream = WorkerPool("t:pool:01", 2).stream(numbers)
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

    stream = WorkerPool("t:pool:01", 2).stream(failing)
    assert await anext(stream) == 1
    with pytest.raises(ConnectionError, match="upstream gone"):
        await anext(stream)


REQUEST: contextvars.ContextVar[str] = contextvars.ContextVar("request", default="none")


async def test_the_worker_runs_in_a_copy_of_the_callers_context() -> None:
    REQUEST.set("alice")
    pool = WorkerPool("t:pool:01", 2)
    seen = [item async for item in pool.stream(lambda: [(REQUEST.get(), threading.current_thread())])]
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


def blocked(release: threading.Event) -> Any:
    """A checkpointed agent whose sync model hook waits for `release`."""

    @wrap_model_call
    def wait(request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> ModelResponse:
        release.wait(10)
        return handler(request)

    model = scripted(*(AIMessage(f"answer {n}") for n in range(20)))
    return create_agent(model, tools=[], middleware=[wait], name="orders", checkpointer=InMemorySaver())


@pytest.mark.timeout(30)
async def test_timed_out_runs_keep_their_threads_and_slots_and_starve_no_other_agent(router: Router) -> None:
    release = threading.Event()
    router.register(LangChainAgent(blocked(release), agent_id="shop:orders:01"))
    # A sync RunnableLambda: LangChain runs it in the event loop's default executor.
    router.register(LangChainAgent(RunnableLambda(lambda text: f"{text}!"), agent_id="util:shout:01"))
    hung = 8  # more than the default executor's threads on two cores

    try:
        late = await asyncio.gather(
            *(
                router.route("orders", ASK, configurable={"thread_id": f"t{n}"}, timeout_ms=200)
                for n in range(hung)
            )
        )
        assert {result.status for result in late} == {ResultStatus.TIMEOUT}
        shout = await router.send("util:shout:01", "hi", timeout_ms=3000)
        assert shout.status is ResultStatus.OK, shout.error
        assert agent_info(router, "shop:orders:01").stuck == hung
        busy = await router.route("orders", ASK, configurable={"thread_id": "t7"})
        assert busy.status is ResultStatus.INVALID, busy.error
    finally:
        release.set()
    await eventually(lambda: agent_info(router, "shop:orders:01").stuck == 0, timeout=10, what="runs ending")
    again = await router.route("orders", ASK, configurable={"thread_id": "t7"})
    assert again.status is ResultStatus.OK, again.error


@pytest.mark.timeout(30)
async def test_a_stream_past_its_deadline_keeps_its_thread_until_its_run_ends(router: Router) -> None:
    release = threading.Event()
    graph = blocked(release)
    router.register(LangChainAgent(graph, agent_id="shop:orders:01"))
    thread = {"thread_id": "alice"}

    try:
        with pytest.raises(ReachTimeoutError):
            await collect(router.stream("orders", ASK, configurable=thread, timeout_ms=200), [])
        busy = await router.route("orders", ASK, configurable=thread)
        assert busy.status is ResultStatus.INVALID, busy.error
        assert "running another call" in (busy.error or "")
    finally:
        release.set()
    await eventually(
        lambda: agent_info(router, "shop:orders:01").stuck == 0, timeout=10, what="the run ending"
    )
    turn = await router.route("orders", user_says("and now?"), configurable=thread)
    assert turn.status is ResultStatus.OK, turn.error
    said = [message.content for message in graph.get_state({"configurable": thread}).values["messages"]]
    assert said[-2:] == ["and now?", turn.payload]


@pytest.mark.timeout(30)
async def test_a_sync_agent_called_from_another_agents_run_holds_none_of_its_threads(router: Router) -> None:
    release = threading.Event()

    @wrap_model_call
    def wait(request: ModelRequest, handler: Callable[[ModelRequest], ModelResponse]) -> ModelResponse:
        release.wait(10)
        return handler(request)

    helper = create_agent(scripted(AIMessage("late")), tools=[], middleware=[wait], name="helper")
    router.register(LangChainAgent(helper, agent_id="shop:helper:01"))

    async def ask_helper(state: Ask) -> Ask:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(router.route("helper", user_says("help")), 0.2)
        return {"approved": True}

    builder = StateGraph(Ask)
    builder.add_node("ask_helper", ask_helper)
    builder.add_edge(START, "ask_helper")
    builder.add_edge("ask_helper", END)
    router.register(
        LangChainAgent(
            builder.compile(checkpointer=InMemorySaver(), name="support"), agent_id="shop:support:01"
        )
    )
    thread = {"thread_id": "alice"}

    try:
        first = await router.route("support", {"order_id": "1"}, configurable=thread)
        assert first.status is ResultStatus.OK, first.error
        second = await router.route("support", {"order_id": "2"}, configurable=thread)
        assert second.status is ResultStatus.OK, second.error
    finally:
        release.set()


def wrapped_ways(agent: Any) -> list[Any]:
    """`agent` where only a walk through every runnable finds it: inside a node's chain, under a
    node's retry binding, in a parallel step, in an assign."""
    prep = RunnableLambda(lambda state: state)
    chained = StateGraph(MessagesState)
    chained.add_node("agent", prep | agent)
    chained.add_edge(START, "agent")
    retried = StateGraph(MessagesState)
    retried.add_node("agent", agent.with_retry(stop_after_attempt=1))
    retried.add_edge(START, "agent")
    return [
        chained.compile(),
        retried.compile(),
        RunnableParallel(answer=agent),
        RunnablePassthrough.assign(answer=agent),
    ]


@pytest.mark.parametrize("way", range(4), ids=["node-chain", "node-retry", "parallel", "assign"])
async def test_sync_middleware_is_found_however_the_agent_is_wrapped(router: Router, way: int) -> None:
    runnable = wrapped_ways(orders([]))[way]
    router.register(
        LangChainAgent(runnable, agent_id="shop:orders:01", capabilities=[Capability(name="orders")])
    )

    result = await router.route("orders", ASK)

    assert result.status is ResultStatus.OK, result.error


def test_sync_middleware_beside_a_coroutine_only_tool_warns_that_nothing_runs_it(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def fetch(order_id: str) -> str:
        return order_id

    remote = StructuredTool.from_function(coroutine=fetch, name="fetch", description="Fetch an order.")
    graph = create_agent(scripted(AIMessage("hi")), tools=[remote], middleware=logged([]))

    with caplog.at_level(logging.WARNING):
        LangChainAgent(graph, agent_id="shop:orders:01")

    assert "neither with invoke nor with ainvoke" in caplog.text
    assert "tool fetch" in caplog.text


class Slow(TypedDict, total=False):
    text: str


def slowly(state: Slow) -> Slow:
    time.sleep(1.0)
    return {"text": "done"}


@pytest.mark.timeout(30)
async def test_a_retry_of_a_timed_out_attempt_still_running_keeps_the_timeout_as_the_answer(
    router: Router,
) -> None:
    builder = StateGraph(Slow)
    builder.add_node("slowly", slowly)
    builder.add_edge(START, "slowly")
    builder.add_edge("slowly", END)
    graph = builder.compile(checkpointer=sqlite_saver(), name="slow")
    declared = [{"name": "slow", "timeout_ms": 300, "idempotent": True}]
    router.register(LangChainAgent(graph, agent_id="shop:slow:01", capabilities=declared))

    result = await router.route("slow", {"text": "go"}, configurable={"thread_id": "x"}, timeout_ms=5000)

    assert (result.status, result.fault) == (ResultStatus.TIMEOUT, Fault.AGENT), result.error
    await eventually(lambda: agent_info(router, "shop:slow:01").stuck == 0, timeout=10, what="the run ending")


async def test_first_calls_at_once_wait_for_every_checkpointer_to_be_asked(router: Router) -> None:
    def step(state: Ask) -> Ask:
        return {"approved": True}

    def graph_on(saver: Any, name: str) -> Any:
        builder = StateGraph(Ask)
        builder.add_node("step", step)
        builder.add_edge(START, "step")
        builder.add_edge("step", END)
        return builder.compile(checkpointer=saver, name=name)

    async with AsyncSqliteSaver.from_conn_string(":memory:") as first_saver:
        # The async saver's read suspends the probe before the sync one's is asked.
        chain = (
            graph_on(first_saver, "first")
            | RunnableLambda(lambda state: state)
            | graph_on(sqlite_saver(), "second")
        )
        router.register(
            LangChainAgent(chain, agent_id="shop:chain:01", capabilities=[Capability(name="chain")])
        )

        results = await asyncio.gather(
            *(router.route("chain", {"order_id": "1"}, configurable={"thread_id": f"t{n}"}) for n in range(4))
        )

    assert [result.status for result in results] == [ResultStatus.OK] * 4, [
        result.error for result in results
    ]


@pytest.mark.timeout(30)
async def test_work_that_outlived_its_call_says_how_it_ended(
    router: Router, caplog: pytest.LogCaptureFixture
) -> None:
    def late_failure(payload: Any) -> str:
        time.sleep(0.4)
        msg = "the mail server went away"
        raise ConnectionError(msg)

    router.register(
        FunctionAgent(late_failure, agent_id="svc:mail:01", capabilities=[Capability(name="mail")])
    )

    with caplog.at_level(logging.WARNING, logger="reach_adapters.router.workers"):
        late = await router.route("mail", {}, timeout_ms=100)
        assert late.status is ResultStatus.TIMEOUT, late.error
        await eventually(
            lambda: "failed afterwards" in caplog.text, timeout=10, what="the late failure logged"
        )

    assert "svc:mail:01" in caplog.text
    assert "the mail server went away" in caplog.text


def test_sync_tool_call_middleware_on_an_agent_without_tools_stays_on_the_loop(
    caplog: pytest.LogCaptureFixture,
) -> None:
    tool_hook = logged([])[1]
    graph = create_agent(scripted(AIMessage("hi")), tools=[], middleware=[tool_hook])

    with caplog.at_level(logging.WARNING):
        agent = LangChainAgent(graph, agent_id="shop:chat:01")

    assert "worker thread" not in caplog.text
    assert agent.runnable is graph


@pytest.mark.timeout(30)
async def test_a_stream_its_reader_leaves_keeps_its_slot_until_its_run_ends(router: Router) -> None:
    release = threading.Event()

    @tool
    def slow_lookup(order_id: str) -> str:
        """Look up an order, slowly."""
        release.wait(10)
        return "shipped"

    calls = AIMessage("", tool_calls=[{"name": "slow_lookup", "args": {"order_id": "42"}, "id": "c1"}])
    graph = create_agent(
        scripted(calls, AIMessage("shipped")), tools=[slow_lookup], middleware=logged([]), name="orders"
    )
    router.register(
        LangChainAgent(
            graph, agent_id="shop:orders:01", capabilities=[{"name": "orders", "max_concurrency": 1}]
        )
    )

    try:
        stream = router.stream("orders", ASK, stream_mode="updates")
        first = await anext(stream)
        await stream.aclose()  # type: ignore[attr-defined]
        assert isinstance(first, dict)
        assert list(first) == ["model"]
        agent = agent_info(router, "shop:orders:01")
        assert (agent.stuck, agent.in_flight) == (1, 1)
    finally:
        release.set()
    await eventually(
        lambda: agent_info(router, "shop:orders:01").in_flight == 0, timeout=10, what="the run ending"
    )


async def test_a_broadcast_to_replicas_sharing_a_thread_is_refused_as_any_second_call(router: Router) -> None:
    graph = create_agent(replies_each("hi"), tools=[], name="chat", checkpointer=InMemorySaver())
    router.register(LangChainAgent(graph, agent_id="shop:chat:01"))
    router.register(LangChainAgent(graph, agent_id="shop:chat:02"))

    both = await router.broadcast("chat", user_says("hello"), configurable={"thread_id": "alice"})

    outcomes = sorted(
        (result.status.value, result.fault.value if result.fault else None) for result in both.results or []
    )
    assert outcomes == [("invalid", "caller"), ("ok", None)], [result.error for result in both.results or []]
    assert all("earlier attempt" not in (result.error or "") for result in both.results or [])


def replies_each(text: str) -> Any:
    return scripted(*(AIMessage(text) for _ in range(10)))


async def test_tool_hooks_only_async_on_an_agent_without_tools_let_it_run_sync(router: Router) -> None:
    @wrap_tool_call
    async def audit(request: ToolCallRequest, handler: Any) -> Any:
        return await handler(request)

    graph = create_agent(replies_each("hello"), tools=[], middleware=[logged([])[0], audit], name="chat")
    router.register(LangChainAgent(graph, agent_id="shop:chat:01"))

    result = await router.route("chat", user_says("hi"))

    assert result.status is ResultStatus.OK, result.error


@pytest.mark.timeout(30)
async def test_a_left_stream_whose_run_fails_later_says_so(
    router: Router, caplog: pytest.LogCaptureFixture
) -> None:
    release = threading.Event()

    @tool
    def breaking_lookup(order_id: str) -> str:
        """Look up an order, then break."""
        release.wait(10)
        msg = "the order database went away"
        raise RuntimeError(msg)

    calls = AIMessage("", tool_calls=[{"name": "breaking_lookup", "args": {"order_id": "42"}, "id": "c1"}])
    graph = create_agent(scripted(calls), tools=[breaking_lookup], middleware=logged([]), name="orders")
    router.register(LangChainAgent(graph, agent_id="shop:orders:01"))

    with caplog.at_level(logging.WARNING, logger="reach_adapters.router.workers"):
        stream = router.stream("orders", ASK, stream_mode="updates")
        assert list(await anext(stream)) == ["model"]  # type: ignore[arg-type]
        await stream.aclose()  # type: ignore[attr-defined]
        release.set()
        await eventually(
            lambda: "failed afterwards" in caplog.text, timeout=10, what="the late failure logged"
        )

    assert "the order database went away" in caplog.text


async def test_first_calls_at_once_warn_of_the_checkpointer_once(
    router: Router, caplog: pytest.LogCaptureFixture
) -> None:
    async with AsyncSqliteSaver.from_conn_string(":memory:") as first_saver:
        first = StateGraph(Ask)
        first.add_node("step", lambda state: {"approved": True})
        first.add_edge(START, "step")
        chain = first.compile(checkpointer=first_saver) | chatty(sqlite_saver())
        router.register(
            LangChainAgent(chain, agent_id="shop:chain:01", capabilities=[Capability(name="chain")])
        )

        with caplog.at_level(logging.WARNING):
            await asyncio.gather(
                *(
                    router.route("chain", {"order_id": "1"}, configurable={"thread_id": f"t{n}"})
                    for n in range(4)
                )
            )

    assert caplog.text.count("has no async methods") == 1
