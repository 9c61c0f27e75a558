"""The fifth review: whose fault it is. A resume that `HumanInTheLoopMiddleware`'s batched
interrupt refuses, one message given to an `add_messages` key, a transient failure after a resume."""

from __future__ import annotations

from typing import Annotated, Any, cast

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt
from typing_extensions import TypedDict

from examples.langchain_demo.agents import scripted
from middleware import Fault, ReachResult, ResultStatus
from reach_adapters import InvalidMessageError, Router
from reach_adapters.langchain import LangChainAgent, ReachToolkit

pytestmark = pytest.mark.timeout(30)


def interrupt_of(result: ReachResult) -> dict[str, Any]:
    """The one interrupt an input_required result reports."""
    (pending,) = cast(list[dict[str, Any]], result.extra["interrupts"])
    return pending


def failures(router: Router, agent_id: str) -> int:
    return next(entry.failures for entry in router.catalog() if entry.agent_id == agent_id)


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


@tool
def rename_file(path: str, to: str) -> str:
    """Rename a file."""
    return f"renamed {path} to {to}"


def reviewed_files_agent() -> Any:
    """A create_agent agent whose model calls two tools at once, each reviewed by a human, in
    HumanInTheLoopMiddleware's default (batched) mode: one interrupt for both calls."""
    model = scripted(
        AIMessage(
            "",
            tool_calls=[
                {"name": "delete_file", "args": {"path": "r.txt"}, "id": "d1"},
                {"name": "rename_file", "args": {"path": "a.txt", "to": "b.txt"}, "id": "m1"},
            ],
        ),
        AIMessage("all done"),
    )
    approval = HumanInTheLoopMiddleware(
        interrupt_on={
            "delete_file": {"allowed_decisions": ["approve", "reject"]},
            "rename_file": {"allowed_decisions": ["approve", "edit"]},
        }
    )
    return create_agent(
        model, tools=[delete_file, rename_file], middleware=[approval], checkpointer=InMemorySaver()
    )


EDIT: dict[str, Any] = {
    "type": "edit",
    "edited_action": {"name": "rename_file", "args": {"path": "a.txt", "to": "c.txt"}},
}


@pytest.mark.parametrize(
    "refused",
    [
        {"decisions": [EDIT, {"type": "approve"}]},  # edit is not allowed for delete_file
        {"decisions": [{"type": "approve"}]},  # one decision for two actions
        {"decisions": [{"type": "approve"}, {"type": "approve"}, {"type": "approve"}]},
        {"decisions": [{"type": "approve"}, {"type": "edit"}]},  # an edit without its action
        {"decisions": [{}, {"type": "approve"}]},
        {"type": "approve"},  # the per_call answer, not the batched one
        "approve",
    ],
)
async def test_a_resume_the_batched_review_refuses_is_the_callers_mistake_and_can_be_answered_again(
    router: Router, refused: Any
) -> None:
    router.register(LangChainAgent(reviewed_files_agent(), agent_id="ops:files:01"))
    thread = {"thread_id": "t"}
    asked = await router.route(
        "files", {"messages": [{"role": "user", "content": "tidy up"}]}, configurable=thread
    )
    assert asked.status == ResultStatus.INPUT_REQUIRED, asked.error
    # The middleware gives its interrupt no response_schema; the one the adapter derives is shown.
    pending = interrupt_of(asked)
    decisions = pending["response_schema"]["properties"]["decisions"]
    assert (decisions["minItems"], decisions["maxItems"]) == (2, 2)

    for _ in range(2):  # enough failures in a row to quarantine the agent, were they counted
        answer = await router.route("files", None, resume=refused, configurable=thread)
        assert (answer.status, answer.fault) == (ResultStatus.INVALID, Fault.CALLER), answer.error
        assert "response_schema" in (answer.error or "")
    with pytest.raises(InvalidMessageError, match="decisions"):
        _ = [chunk async for chunk in router.stream("files", None, resume=refused, configurable=thread)]
    assert failures(router, "ops:files:01") == 0
    # Nothing reached the graph, so the interrupt takes a good answer still.
    done = await router.route(
        "files", None, resume={"decisions": [{"type": "reject"}, EDIT]}, configurable=thread
    )
    assert (done.status, done.payload) == (ResultStatus.OK, "all done"), done.error
    output = cast(dict[str, Any], done.extra["output"])
    said = [message["content"] for message in output["messages"] if message["role"] == "tool"]
    assert said[1].endswith("renamed a.txt to c.txt")


async def test_a_review_answer_keyed_by_the_interrupt_id_is_checked_as_well(router: Router) -> None:
    router.register(LangChainAgent(reviewed_files_agent(), agent_id="ops:files:01"))
    thread = {"thread_id": "t"}
    asked = await router.route(
        "files", {"messages": [{"role": "user", "content": "tidy up"}]}, configurable=thread
    )
    pending = interrupt_of(asked)
    wrong: dict[str, Any] = {pending["id"]: {"decisions": [{"type": "approve"}]}}
    refused = await router.route("files", None, resume=wrong, configurable=thread)
    assert (refused.status, refused.fault) == (ResultStatus.INVALID, Fault.CALLER), refused.error
    assert "each of its 2 actions" in (refused.error or "")
    right: dict[str, Any] = {pending["id"]: {"decisions": [{"type": "approve"}, {"type": "approve"}]}}
    done = await router.route("files", None, resume=right, configurable=thread)
    assert (done.status, done.payload) == (ResultStatus.OK, "all done"), done.error


class Chat(TypedDict):
    messages: Annotated[list[Any], add_messages]


def echo_graph() -> Any:
    """A graph whose add_messages key is typed loosely, as in LangGraph's quickstart; it answers
    with what it was given."""

    def echo(state: Chat) -> dict[str, Any]:
        said = [f"{type(message).__name__}: {message.content}" for message in state["messages"]]
        return {"messages": [AIMessage("; ".join(said))]}

    graph = StateGraph(Chat)
    graph.add_node("echo", echo)
    graph.add_edge(START, "echo")
    graph.add_edge("echo", END)
    return graph.compile(name="echo")


async def test_one_message_given_to_an_add_messages_key_is_read_as_add_messages_reads_it(
    router: Router,
) -> None:
    router.register(LangChainAgent(echo_graph(), agent_id="util:echo:01"))
    # Declared open: the router checks no schema, the converter still reads it.
    declared = [{"name": "loose", "input_schema": {"type": "object"}}]
    loose = LangChainAgent(echo_graph(), agent_id="util:loose:01", capabilities=declared)
    router.register(loose)
    for capability in ("echo", "loose"):
        for one in ({"role": "user", "content": "hi"}, {"type": "human", "content": "hi"}, "hi"):
            answer = await router.route(capability, {"messages": one})
            assert (answer.status, answer.payload) == (ResultStatus.OK, "HumanMessage: hi"), answer.error
        pairs = await router.route(capability, {"messages": [["user", "hi"], ["assistant", "hello"]]})
        assert pairs.payload == "HumanMessage: hi; AIMessage: hello", pairs.error
    (tool,) = [each for each in ReachToolkit(router).get_tools() if each.name == "echo"]
    call = {"name": "echo", "type": "tool_call", "id": "c1"}
    told = await tool.ainvoke({**call, "args": {"messages": {"role": "user", "content": "hi"}}})
    assert (told.status, told.content) == ("success", "HumanMessage: hi")


@pytest.mark.parametrize(
    ("capabilities", "messages", "named"),
    [
        # A tool message LangChain cannot read, though the schema takes it.
        (None, {"role": "tool", "content": "done"}, "payload.messages"),
        ("loose", {"role": "tool", "content": "done"}, "payload.messages"),
        ("loose", {"role": "user"}, "payload.messages"),
        ("loose", {"role": "wizard", "content": "hi"}, "payload.messages"),
        ("loose", [["wizard", "hi"]], "payload.messages[0]"),
        ("loose", [{"role": "user", "content": "hi"}, 7], "payload.messages[1]"),
        ("loose", 7, "payload.messages"),
        (None, {"role": "user"}, "messages.content"),
        (None, {"role": "wizard", "content": "hi"}, "messages.role"),
    ],
)
async def test_a_message_add_messages_cannot_read_is_the_callers_mistake(
    router: Router, capabilities: str | None, messages: Any, named: str
) -> None:
    # Declared open: the adapter's own reading of the messages refuses them, not the schema.
    declared = None if capabilities is None else [{"name": "echo", "input_schema": {"type": "object"}}]
    router.register(LangChainAgent(echo_graph(), agent_id="util:echo:01", capabilities=declared))
    for _ in range(2):  # enough failures in a row to quarantine the agent, were they counted
        refused = await router.route("echo", {"messages": messages})
        assert (refused.status, refused.fault) == (ResultStatus.INVALID, Fault.CALLER), refused.error
        assert named in (refused.error or "")
    assert failures(router, "util:echo:01") == 0


class Refund(TypedDict, total=False):
    order: str
    answer: str
    paid: str


# Declared safe to repeat, so a failed attempt is retried: a graph's failed step may have done
# work before it raised, which the router cannot know (`never_started`).
SAFE = [{"name": "refund", "idempotent": True}]


def refund_graph(failing: int) -> tuple[Any, list[str]]:
    """A checkpointed graph that asks before it pays, whose payment gateway is unreachable for
    the first `failing` calls; and the list of those calls."""
    calls: list[str] = []

    def ask(state: Refund) -> dict[str, Any]:
        return {"answer": interrupt(f"refund order {state['order']}?")}

    def pay(state: Refund) -> dict[str, Any]:
        calls.append(state["answer"])
        if len(calls) <= failing:
            msg = "payment gateway unreachable"
            raise ConnectionError(msg)
        return {"paid": f"paid ({state['answer']})"}

    graph = StateGraph(Refund)
    graph.add_node("ask", ask)
    graph.add_node("pay", pay)
    graph.add_edge(START, "ask")
    graph.add_edge("ask", "pay")
    graph.add_edge("pay", END)
    return graph.compile(checkpointer=InMemorySaver(), name="refund"), calls


async def test_a_retried_resume_goes_on_from_where_its_failed_attempt_left_the_thread(router: Router) -> None:
    graph, calls = refund_graph(failing=1)
    router.register(LangChainAgent(graph, agent_id="shop:refund:01", capabilities=SAFE))
    thread = {"thread_id": "t"}
    asked = await router.route("refund", {"order": "42"}, configurable=thread)
    assert asked.status == ResultStatus.INPUT_REQUIRED, asked.error

    done = await router.route("refund", None, resume="yes", configurable=thread)
    assert (done.status, done.payload) == (
        ResultStatus.OK,
        {"order": "42", "answer": "yes", "paid": "paid (yes)"},
    )
    # The retry ran the failed step with the answer the first attempt gave it.
    assert calls == ["yes", "yes"]
    attempts = router.explain(done.task_id).attempts
    assert [(each.status, each.fault) for each in attempts] == [
        (ResultStatus.ERROR, Fault.AGENT),
        (ResultStatus.OK, None),
    ]


async def test_a_transient_failure_after_a_resume_that_persists_is_the_agents(router: Router) -> None:
    graph, calls = refund_graph(failing=10)
    router.register(LangChainAgent(graph, agent_id="shop:refund:01", capabilities=SAFE))
    thread = {"thread_id": "t"}
    await router.route("refund", {"order": "42"}, configurable=thread)

    failed = await router.route("refund", None, resume="yes", configurable=thread)
    assert (failed.status, failed.fault, failed.error_type) == (
        ResultStatus.ERROR,
        Fault.AGENT,
        "ConnectionError",
    )
    attempts = router.explain(failed.task_id).attempts
    assert len(attempts) > 1
    assert {(each.fault, each.error_type) for each in attempts} == {(Fault.AGENT, "ConnectionError")}
    assert calls == ["yes"] * len(attempts)


async def test_an_edit_into_a_tool_the_agent_lacks_is_refused_before_it_is_saved(router: Router) -> None:
    """The middleware refuses such an edit only once LangGraph has saved it, which would fail the
    agent's run and leave the thread unanswerable; an edit into another tool it has is fine."""
    router.register(LangChainAgent(reviewed_files_agent(), agent_id="ops:files:01"))
    thread = {"thread_id": "t"}
    await router.route("files", {"messages": [{"role": "user", "content": "tidy up"}]}, configurable=thread)
    unknown: dict[str, Any] = {"type": "edit", "edited_action": {"name": "format_disk", "args": {}}}
    refused = await router.route(
        "files", None, resume={"decisions": [{"type": "approve"}, unknown]}, configurable=thread
    )
    assert (refused.status, refused.fault) == (ResultStatus.INVALID, Fault.CALLER), refused.error
    assert "'format_disk', which is not one of its tools (delete_file, rename_file)" in (refused.error or "")
    assert failures(router, "ops:files:01") == 0
    redirected: dict[str, Any] = {
        "type": "edit",
        "edited_action": {"name": "delete_file", "args": {"path": "a.txt"}},
    }
    done = await router.route(
        "files", None, resume={"decisions": [{"type": "reject"}, redirected]}, configurable=thread
    )
    assert (done.status, done.payload) == (ResultStatus.OK, "all done"), done.error


async def test_a_retried_resume_runs_again_the_chain_step_that_failed_after_the_graph(router: Router) -> None:
    graph, _ = refund_graph(failing=0)
    tail: list[str] = []

    def receipt(state: dict[str, Any]) -> str:
        if "paid" not in state:  # the graph stopped at its question: LangChain runs this step anyway
            return "nothing paid yet"
        tail.append(state["paid"])
        if len(tail) == 1:
            msg = "mail server unreachable"
            raise ConnectionError(msg)
        return f"receipt: {state['paid']}"

    router.register(
        LangChainAgent(graph | RunnableLambda(receipt), agent_id="shop:refund:01", capabilities=SAFE)
    )
    thread = {"thread_id": "t"}
    asked = await router.route("refund", {"order": "42"}, configurable=thread)
    assert asked.status == ResultStatus.INPUT_REQUIRED, asked.error

    done = await router.route("refund", None, resume="yes", configurable=thread)
    assert (done.status, done.payload) == (ResultStatus.OK, "receipt: paid (yes)"), done.error
    assert tail == ["paid (yes)", "paid (yes)"]
    attempts = router.explain(done.task_id).attempts
    assert [(each.status, each.fault) for each in attempts] == [
        (ResultStatus.ERROR, Fault.AGENT),
        (ResultStatus.OK, None),
    ]
    # Another task's resume on the finished thread is still the caller's mistake.
    again = await router.route("refund", None, resume="yes", configurable=thread)
    assert (again.status, again.fault) == (ResultStatus.INVALID, Fault.CALLER), again.error
