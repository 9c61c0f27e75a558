"""Static breakpoints (``create_agent(..., interrupt_before=["tools"])``, ``compile(interrupt_before=
[...])``, ``interrupt_after``): a graph paused before its next steps asks for input, as one
stopped at ``interrupt()`` does, and ``resume`` lets it go on as LangGraph's ``ainvoke(None,
config)`` does. Its output bears no mark of the pause: it once came back ``ok`` with the run half
done, and no call could continue it."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from examples.langchain_demo.agents import scripted
from middleware import Fault, ResultStatus
from reach_adapters import InputRequiredError, Router
from reach_adapters.langchain import LangChainAgent, ReachToolkit
from tests.langchain_adapter.test_patterns import drained

pytestmark = pytest.mark.timeout(30)

ASK = {"messages": [{"role": "user", "content": "refund order 42"}]}
PAUSED = {"paused_before": ["tools"]}


def refund_agent(refunded: list[int]) -> Any:
    """A `create_agent` agent that pauses before it runs its tools, as LangChain's docs show."""

    @tool
    def refund(order: int) -> str:
        """Refund an order."""
        refunded.append(order)
        return f"refunded {order}"

    model = scripted(
        AIMessage("", tool_calls=[{"name": "refund", "args": {"order": 42}, "id": "c1"}]),
        AIMessage("Refunded order 42."),
        repeat=True,
    )
    return create_agent(model, tools=[refund], checkpointer=InMemorySaver(), interrupt_before=["tools"])


async def test_a_graph_paused_at_a_breakpoint_asks_and_resume_goes_on(router: Router) -> None:
    refunded: list[int] = []
    router.register(LangChainAgent(refund_agent(refunded), agent_id="shop:refund:01"))
    thread = {"thread_id": "t-1"}
    paused = await router.route("refund", ASK, configurable=thread)
    assert (paused.status, paused.payload, paused.fault) == (ResultStatus.INPUT_REQUIRED, PAUSED, None)
    assert paused.extra["paused_before"] == ["tools"]
    # The state so far, as for an interrupt: the tool call waiting to run.
    assert paused.extra["output"]["messages"][-1]["tool_calls"][0]["name"] == "refund"  # type: ignore[index,call-overload]
    assert refunded == []
    done = await router.route("refund", None, configurable=thread, resume=True)
    assert (done.status, done.payload) == (ResultStatus.OK, "Refunded order 42."), done.error
    assert refunded == [42]
    # Nothing is paused any more: a second go-ahead is the caller's mistake.
    again = await router.route("refund", None, configurable=thread, resume=True)
    assert (again.status, again.fault) == (ResultStatus.INVALID, Fault.CALLER), again.error
    assert router.catalog()[0].failures == 0


class Count(TypedDict, total=False):
    n: int
    log: list[str]


def counting_graph(*, failing: int = 0, **breakpoints: Any) -> tuple[Any, list[int]]:
    """`counting_steps` compiled with a checkpointer and `breakpoints`, and the runs of ``double``."""
    builder, runs = counting_steps(failing)
    return builder.compile(checkpointer=InMemorySaver(), name="count", **breakpoints), runs


def counting_steps(failing: int = 0) -> tuple[StateGraph[Any, Any, Any, Any], list[int]]:
    """``add`` then ``double``, which raises `ConnectionError` on its first `failing` runs; and
    the list of the runs of ``double``."""
    runs: list[int] = []

    def add(state: Count) -> dict[str, Any]:
        return {"n": state.get("n", 0) + 1}

    def double(state: Count) -> dict[str, Any]:
        runs.append(state["n"])
        if len(runs) <= failing:
            msg = "calculator unreachable"
            raise ConnectionError(msg)
        return {"n": state["n"] * 2}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Count)
    builder.add_node("add", add)
    builder.add_node("double", double)
    builder.add_edge(START, "add")
    builder.add_edge("add", "double")
    builder.add_edge("double", END)
    return builder, runs


@pytest.mark.parametrize("resume", [True, None, "go"], ids=["true", "none", "text"])
async def test_any_resume_lets_a_graph_paused_after_a_step_go_on(router: Router, resume: Any) -> None:
    graph, runs = counting_graph(interrupt_after=["add"])
    router.register(LangChainAgent(graph, agent_id="util:count:01"))
    thread = {"thread_id": "t-a"}
    paused = await router.route("count", {"n": 1}, configurable=thread)
    assert (paused.status, paused.payload) == (ResultStatus.INPUT_REQUIRED, {"paused_before": ["double"]})
    assert paused.extra["output"] == {"n": 2}
    done = await router.route("count", None, configurable=thread, resume=resume)
    assert (done.status, done.payload) == (ResultStatus.OK, {"n": 4}), done.error
    assert runs == [2]


async def test_a_subgraph_paused_at_its_breakpoint_pauses_the_graph_that_runs_it(router: Router) -> None:
    steps, runs = counting_steps()
    # Compiled without a checkpointer: the subgraph keeps its parent's (LangGraph's way).
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Count)
    builder.add_node("inner", steps.compile(interrupt_before=["double"]))
    builder.add_edge(START, "inner")
    builder.add_edge("inner", END)
    router.register(LangChainAgent(builder.compile(checkpointer=InMemorySaver()), agent_id="util:count:01"))
    thread = {"thread_id": "t-sub"}
    paused = await router.route("count", {"n": 1}, configurable=thread)
    assert (paused.status, paused.payload) == (ResultStatus.INPUT_REQUIRED, {"paused_before": ["inner"]})
    done = await router.route("count", None, configurable=thread, resume=True)
    assert (done.status, done.payload) == (ResultStatus.OK, {"n": 4}), done.error
    assert runs == [2]


async def test_a_paused_stream_ends_asking_for_input(router: Router) -> None:
    refunded: list[int] = []
    router.register(LangChainAgent(refund_agent(refunded), agent_id="shop:refund:01"))
    thread = {"thread_id": "t-s"}
    chunks: list[Any] = []
    with pytest.raises(InputRequiredError) as asked:
        await drained(router.stream("refund", ASK, configurable=thread), chunks)
    assert asked.value.result is not None
    assert (asked.value.result.payload, asked.value.result.extra) == (PAUSED, PAUSED)
    # Said once, as the stream's end, not also as LangGraph's own empty marker.
    assert chunks
    assert not any(isinstance(chunk, dict) and "__interrupt__" in chunk for chunk in chunks)
    assert router.recent_decisions(1)[0].status == "input_required"
    done = await router.route("refund", None, configurable=thread, resume=True)
    assert (done.status, done.payload) == (ResultStatus.OK, "Refunded order 42."), done.error
    assert refunded == [42]


async def test_a_graph_paused_between_steps_goes_on_with_the_rest_of_the_chain(router: Router) -> None:
    graph, _ = counting_graph(interrupt_before=["double"])
    show: RunnableLambda[dict[str, Any], str] = RunnableLambda(lambda state: f"n={state['n']}", name="show")
    router.register(LangChainAgent(graph | show, agent_id="util:count:01"))
    thread = {"thread_id": "t-c"}
    paused = await router.route("count", {"n": 1}, configurable=thread)
    assert (paused.status, paused.payload) == (ResultStatus.INPUT_REQUIRED, {"paused_before": ["double"]})
    # Not the graph's output: the chain's, made of a state half done.
    assert "output" not in paused.extra
    done = await router.route("count", None, configurable=thread, resume=True)
    assert (done.status, done.payload) == (ResultStatus.OK, "n=4"), done.error


async def test_a_go_ahead_that_fails_is_retried_from_the_breakpoint(router: Router) -> None:
    graph, runs = counting_graph(failing=1, interrupt_before=["double"])
    # Declared safe to repeat: a graph's failed step may have done work before it raised.
    safe = [{"name": "count", "idempotent": True}]
    router.register(LangChainAgent(graph, agent_id="util:count:01", capabilities=safe))
    thread = {"thread_id": "t-r"}
    await router.route("count", {"n": 1}, configurable=thread)
    done = await router.route("count", None, configurable=thread, resume=True)
    assert (done.status, done.payload) == (ResultStatus.OK, {"n": 4}), done.error
    assert runs == [2, 2]
    attempts = router.explain(done.task_id).attempts
    assert [(each.status, each.fault) for each in attempts] == [
        (ResultStatus.ERROR, Fault.AGENT),
        (ResultStatus.OK, None),
    ]


async def test_a_run_that_failed_part_way_is_no_pause(router: Router) -> None:
    # Without breakpoints, a thread whose step raised waits on nothing: a resume answers nothing.
    graph, _ = counting_graph(failing=10)
    router.register(LangChainAgent(graph, agent_id="util:count:01"))
    thread = {"thread_id": "t-f"}
    failed = await router.route("count", {"n": 1}, configurable=thread)
    assert (failed.status, failed.fault) == (ResultStatus.ERROR, Fault.AGENT)
    refused = await router.route("count", None, configurable=thread, resume="yes")
    assert (refused.status, refused.fault) == (ResultStatus.INVALID, Fault.CALLER), refused.error
    assert "waits on no interrupt" in (refused.error or "")


async def test_a_graph_that_failed_before_its_breakpoint_is_not_paused_when_a_fallback_answers(
    router: Router,
) -> None:
    graph, runs = counting_graph(failing=10, interrupt_after=["double"])
    spare: RunnableLambda[Any, dict[str, int]] = RunnableLambda(lambda payload: {"n": 0}, name="spare")
    router.register(LangChainAgent(graph.with_fallbacks([spare]), agent_id="util:count:01"))
    done = await router.route("count", {"n": 1}, configurable={"thread_id": "t-b"})
    assert (done.status, done.payload) == (ResultStatus.OK, {"n": 0}), done.error
    assert runs == [2]


async def test_the_reach_tools_tell_the_model_a_paused_agent_waits_on_a_go_ahead(router: Router) -> None:
    refunded: list[int] = []
    router.register(LangChainAgent(refund_agent(refunded), agent_id="shop:refund:01"))
    tools = {each.name: each for each in ReachToolkit(router).get_tools()}
    thread: RunnableConfig = {"configurable": {"thread_id": "supervisor-1"}}
    call = {"name": "refund", "args": ASK, "id": "call-1", "type": "tool_call"}
    asked = await tools["refund"].ainvoke(call, thread)
    assert asked.status == "success"
    assert "shop:refund:01 needs input before it can go on: it paused before its steps tools" in asked.content
    assert "send resume true (with reach_agent: target 'shop:refund:01'" in asked.content
    assert asked.artifact.status is ResultStatus.INPUT_REQUIRED
    go = {"name": "reach_agent", "args": {"target": "shop:refund:01", "resume": True}, "id": "call-2"}
    done = await tools["reach_agent"].ainvoke({**go, "type": "tool_call"}, thread)
    assert (done.status, done.content) == ("success", "Refunded order 42."), done.content
    assert refunded == [42]
