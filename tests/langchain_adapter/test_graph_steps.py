"""A checkpointed graph that is a later step of a chain (`prep | graph | post`): its interrupts
ask for input like those of a graph registered alone, and `resume` continues the chain from the
graph's step, as the run would have gone on had the graph not stopped."""

from __future__ import annotations

from typing import Any
from unittest.mock import ANY

import pytest
from langchain_core.runnables import Runnable, RunnableLambda

from middleware import Fault, ResultStatus
from reach_adapters import InputRequiredError, Router
from reach_adapters.langchain import LangChainAgent
from tests.langchain_adapter.test_fidelity import USER
from tests.langchain_adapter.test_patterns import approval_graph, drained

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
