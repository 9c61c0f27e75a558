"""A checkpointed graph that is a later step of a chain (`prep | graph | post`): its interrupts
ask for input like those of a graph registered alone, and `resume` continues the chain from the
graph's step, as the run would have gone on had the graph not stopped."""

from __future__ import annotations

from typing import Any
from unittest.mock import ANY

import pytest
from langchain_core.callbacks import BaseCallbackHandler
from langchain_core.messages import AIMessage
from langchain_core.runnables import Runnable, RunnableLambda
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import MessagesState
from langgraph.types import interrupt

from middleware import Fault, ResultStatus
from reach_adapters import InputRequiredError, Router
from reach_adapters.langchain import LangChainAgent
from tests.langchain_adapter.test_fidelity import USER
from tests.langchain_adapter.test_patterns import approval_graph, chain_graph, drained

pytestmark = pytest.mark.timeout(30)

QUESTION = {"question": "approve the refund of order 42?"}


def prep() -> Runnable[Any, Any]:
    return RunnableLambda(lambda payload: {"messages": payload["messages"]}, name="prep")


def post() -> Runnable[Any, Any]:
    # Drops the graph's state, interrupt marker included, as a formatting step would. A stream
    # hands it LangGraph's interrupt chunk alone, without the messages.
    def final(state: dict[str, Any]) -> dict[str, Any]:
        return {"final": state["messages"][-1].content if state.get("messages") else None}

    return RunnableLambda(final, name="post")


async def test_a_graph_between_steps_asks_for_input_and_resume_runs_the_rest(router: Router) -> None:
    router.register(LangChainAgent(prep() | approval_graph() | post(), agent_id="support:refund:01"))
    thread = {"thread_id": "t-1"}
    asked = await router.route("refund", {"messages": USER}, configurable=thread)
    assert (asked.status, asked.payload) == (ResultStatus.INPUT_REQUIRED, QUESTION), asked.error
    assert asked.extra["interrupts"] == [{"id": ANY, "value": QUESTION}]
    done = await router.route("refund", None, configurable=thread, resume="approved")
    assert (done.status, done.payload) == (ResultStatus.OK, {"final": "refund approved"}), done.error
    # The next conversation on the thread starts over and asks again.
    again = await router.route("refund", {"messages": USER}, configurable=thread)
    assert again.status is ResultStatus.INPUT_REQUIRED
    assert router.catalog()[0].failures == 0


async def test_a_stream_through_a_graph_between_steps_ends_asking_for_input(router: Router) -> None:
    router.register(LangChainAgent(prep() | approval_graph() | post(), agent_id="support:refund:01"))
    chunks: list[Any] = []
    with pytest.raises(InputRequiredError) as asked:
        await drained(router.stream("refund", {"messages": USER}, configurable={"thread_id": "t-s"}), chunks)
    assert asked.value.result is not None
    assert asked.value.result.payload == QUESTION


async def test_a_graph_step_bound_to_its_thread_is_resumed_on_it(router: Router) -> None:
    bound = approval_graph().with_config(configurable={"thread_id": "bound-2"})
    router.register(LangChainAgent(prep() | bound | post(), agent_id="support:refund:01"))
    asked = await router.route("refund", {"messages": USER})
    assert (asked.status, asked.payload) == (ResultStatus.INPUT_REQUIRED, QUESTION), asked.error
    done = await router.route("refund", None, resume="approved")
    assert (done.status, done.payload) == (ResultStatus.OK, {"final": "refund approved"}), done.error


async def test_resume_of_a_graph_no_call_can_reach_is_invalid_and_says_why(router: Router) -> None:
    fallback = RunnableLambda(lambda payload: payload).with_fallbacks([approval_graph()])
    router.register(LangChainAgent(fallback, agent_id="support:refund:01"))
    refused = await router.route("refund", None, configurable={"thread_id": "t-p"}, resume="approved")
    assert (refused.status, refused.fault) == (ResultStatus.INVALID, Fault.CALLER)
    assert "cannot reach it" in (refused.error or "")


def asking(question: str) -> Any:
    def review(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"{question} {interrupt(question)}")]}

    return chain_graph(MessagesState, review).compile(checkpointer=InMemorySaver())


@pytest.mark.parametrize("with_prep", [False, True], ids=["g1-g2", "prep-g1-g2"])
async def test_two_graphs_that_both_stop_ask_the_first_question_which_resume_answers(
    router: Router, with_prep: bool
) -> None:
    # LangChain hands the first graph's interrupted state on to the second, which stops too.
    graphs = asking("refund?") | asking("email?")
    router.register(LangChainAgent(prep() | graphs if with_prep else graphs, agent_id="support:refund:01"))
    thread = {"thread_id": "t-2"}
    asked = await router.route("refund", {"messages": USER}, configurable=thread)
    assert (asked.status, asked.payload) == (ResultStatus.INPUT_REQUIRED, "refund?"), asked.error
    then = await router.route("refund", None, configurable=thread, resume="yes")
    assert (then.status, then.payload) == (ResultStatus.INPUT_REQUIRED, "email?"), then.error
    done = await router.route("refund", None, configurable=thread, resume="sent")
    assert (done.status, done.payload) == (ResultStatus.OK, "email? sent"), done.error


class Starts(BaseCallbackHandler):
    def __init__(self) -> None:
        self.runs = 0

    def on_chain_start(self, *args: Any, **kwargs: Any) -> None:
        self.runs += 1


async def test_resume_keeps_the_bindings_around_the_chain(router: Router) -> None:
    starts = Starts()
    chain = (prep() | approval_graph() | post()).with_config(
        configurable={"thread_id": "bound-3"}, callbacks=[starts]
    )
    router.register(LangChainAgent(chain, agent_id="support:refund:01"))
    asked = await router.route("refund", {"messages": USER})
    assert asked.status is ResultStatus.INPUT_REQUIRED, asked.error
    runs = starts.runs
    # The thread and the callbacks the binding gives reach the resumed run too.
    done = await router.route("refund", None, resume="approved")
    assert (done.status, done.payload) == (ResultStatus.OK, {"final": "refund approved"}), done.error
    assert starts.runs > runs
    assert router.catalog()[0].failures == 0
