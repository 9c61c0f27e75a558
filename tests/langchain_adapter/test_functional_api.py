"""A workflow of LangGraph's Functional API (``@entrypoint`` / ``@task``) is a graph like a
StateGraph's: a thread per call, interrupts that ``resume`` answers, LangGraph's stream modes. It
has no builder, so it was once taken for a plain runnable: resume refused, a call without a thread
an agent failure, stream modes refused."""

from __future__ import annotations

import logging
from typing import Any
from unittest.mock import ANY

import pytest
from langchain_core.runnables import RunnableLambda
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.config import get_stream_writer
from langgraph.func import entrypoint, task
from langgraph.types import interrupt

from middleware import Fault, ResultStatus
from reach_adapters import InputRequiredError, Router
from reach_adapters.langchain import LangChainAgent
from tests.langchain_adapter.test_patterns import drained

pytestmark = pytest.mark.timeout(30)

ASKED = {"essay": "An essay about cats", "action": "approve?"}


@task
async def write_essay(topic: str) -> str:
    get_stream_writer()({"wrote": topic})
    return f"An essay about {topic}"


def essay_workflow() -> Any:
    """The human-in-the-loop workflow of LangGraph's Functional API docs."""

    @entrypoint(checkpointer=InMemorySaver())
    async def essay(topic: str) -> dict[str, Any]:
        """Writes an essay on a topic, and has it approved."""
        text = await write_essay(topic)
        approved = interrupt({"essay": text, "action": "approve?"})
        return {"essay": text, "approved": approved}

    return essay


async def test_an_entrypoint_asks_and_resume_answers_it(router: Router) -> None:
    router.register(LangChainAgent(essay_workflow(), agent_id="write:essay:01"))
    thread = {"thread_id": "t-1"}
    asked = await router.route("essay", "cats", configurable=thread)
    assert (asked.status, asked.payload) == (ResultStatus.INPUT_REQUIRED, ASKED), asked.error
    assert asked.extra["interrupts"] == [{"id": ANY, "value": ASKED}]
    done = await router.route("essay", None, configurable=thread, resume=True)
    assert (done.status, done.payload) == (
        ResultStatus.OK,
        {"essay": "An essay about cats", "approved": True},
    ), done.error
    # Nothing waits any more: a second answer is the caller's mistake, as for a StateGraph.
    again = await router.route("essay", None, configurable=thread, resume=True)
    assert (again.status, again.fault) == (ResultStatus.INVALID, Fault.CALLER), again.error
    assert "waits on no interrupt" in (again.error or "")
    assert router.catalog()[0].failures == 0


async def test_an_entrypoint_called_without_a_thread_is_the_callers_mistake(
    router: Router, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="reach_adapters.langchain"):
        router.register(LangChainAgent(essay_workflow(), agent_id="write:essay:01"))
    assert "write:essay:01 is a LangGraph graph with a checkpointer" in caplog.text
    for _ in range(2):  # enough failures in a row to quarantine the agent, were they counted
        refused = await router.route("essay", "dogs")
        assert (refused.status, refused.fault) == (ResultStatus.INVALID, Fault.CALLER), refused.error
        assert refused.extra["fix_options"] == {"configurable": {"thread_id": "<thread id>"}}
    assert router.catalog()[0].failures == 0


async def test_an_entrypoint_streams_in_the_modes_asked_and_ends_asking(router: Router) -> None:
    router.register(LangChainAgent(essay_workflow(), agent_id="write:essay:01"))
    thread = {"thread_id": "t-s"}
    chunks: list[Any] = []
    stream = router.stream("essay", "owls", configurable=thread, stream_mode=["updates", "custom"])
    with pytest.raises(InputRequiredError) as asked:
        await drained(stream, chunks)
    assert asked.value.result is not None
    assert asked.value.result.payload == {"essay": "An essay about owls", "action": "approve?"}
    assert ["custom", {"wrote": "owls"}] in chunks
    assert ["updates", {"write_essay": "An essay about owls"}] in chunks
    done = await router.route("essay", None, configurable=thread, resume="yes", stream_mode="updates")
    assert (done.status, done.payload) == (
        ResultStatus.OK,
        {"essay": "An essay about owls", "approved": "yes"},
    ), done.error


async def test_an_entrypoint_is_described_by_its_function(router: Router) -> None:
    agent = LangChainAgent(essay_workflow(), agent_id="write:essay:01")
    (capability,) = agent.capabilities
    assert capability.description == "Writes an essay on a topic, and has it approved."
    # Its input is the function's first parameter, as it is typed; a graph without a state keeps
    # LangChain's description of its output.
    assert capability.input_schema == {"type": "string"}


async def test_an_entrypoint_between_steps_is_resumed_with_the_rest_of_the_chain(router: Router) -> None:
    topic = RunnableLambda(lambda payload: payload["topic"], name="topic")
    verdict = RunnableLambda(lambda out: "approved" if out.get("approved") else "waiting", name="verdict")
    router.register(LangChainAgent(topic | essay_workflow() | verdict, agent_id="write:essay:01"))
    thread = {"thread_id": "t-c"}
    asked = await router.route("essay", {"topic": "cats"}, configurable=thread)
    assert (asked.status, asked.payload) == (ResultStatus.INPUT_REQUIRED, ASKED), asked.error
    done = await router.route("essay", None, configurable=thread, resume=True)
    assert (done.status, done.payload) == (ResultStatus.OK, "approved"), done.error
