"""Answering a reach server's LangGraph agent over an A2A hop as over MCP or in process: the
interrupts come back with their ids and schemas, a refused answer leaves the question to answer
again, and a second answer sent at once is the caller's doing, never the agent's failure."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from a2a.types.a2a_pb2 import GetTaskRequest, TaskState
from pydantic import JsonValue

from middleware import Fault, ReachResult, ResultStatus
from reach_adapters import InputRequiredError, InvalidMessageError, ReachError, Router
from reach_adapters.a2a import A2AAgent
from reach_adapters.langchain import LangChainAgent
from tests.a2a_serve.agents import approval_graph, decision_graph, parallel_graph
from tests.a2a_serve.conftest import Serve, Served, message, request, task_of

pytestmark = pytest.mark.timeout(60)

ASK = {"messages": [{"role": "user", "content": "refund order 42"}]}


async def near_and_far(served: Serve) -> tuple[Served, Router, A2AAgent]:
    server = await served()
    far = server.gateway.router
    far.register(LangChainAgent(parallel_graph(), agent_id="ask:both:01"))
    far.register(LangChainAgent(decision_graph(), agent_id="ask:decide:01"))
    far.register(LangChainAgent(approval_graph(), agent_id="support:refund:01"))
    near = Router()
    agent = await A2AAgent.connect(server.url)
    near.register(agent)
    return server, near, agent


def interrupts(result: ReachResult) -> list[dict[str, Any]]:
    pending = result.extra.get("interrupts")
    assert isinstance(pending, list), result.extra
    return [dict(one) for one in pending if isinstance(one, dict)]


def a2a_ids(result: ReachResult) -> dict[str, Any]:
    ids = result.extra["a2a"]
    assert isinstance(ids, dict)
    return ids


def failures(router: Router, agent_id: str) -> int:
    return next(entry.failures for entry in router.catalog() if entry.agent_id == agent_id)


async def test_interrupts_come_back_with_their_ids_and_schemas(served: Serve) -> None:
    server, near, _ = await near_and_far(served)
    async with near, asyncio.timeout(30):
        here = await server.gateway.router.route("decide", {"q": "x"}, configurable={"thread_id": "here"})
        asked = await near.route("decide", {"q": "x"}, configurable={"thread_id": "d"})
        both = await near.route("both", {"q": "x"}, configurable={"thread_id": "p"})
        wrong = await near.route("both", None, configurable={"thread_id": "p"}, resume="yes")
        ids = [one["id"] for one in interrupts(both)]
        answers: dict[str, JsonValue] = dict.fromkeys(ids, "ok")
        done = await near.route("both", None, configurable={"thread_id": "p"}, resume=answers)
    assert asked.status is ResultStatus.INPUT_REQUIRED
    [interrupt], [local] = interrupts(asked), interrupts(here)
    # As a caller in the server's process gets it (its id aside: another thread asked there).
    assert interrupt["value"] == local["value"] == "approve?"
    assert interrupt["response_schema"] == local["response_schema"]
    assert interrupt["response_schema"]["required"] == ["approve", "amount"]
    assert [one["value"] for one in interrupts(both)] == ["left?", "right?"]
    # The refusal says how to answer, in the options that fix the call.
    assert (wrong.status, wrong.fault) == (ResultStatus.INVALID, Fault.CALLER)
    assert wrong.extra["fix_options"] == {"resume": dict.fromkeys(ids, "<answer>")}
    assert (done.status, done.payload) == (ResultStatus.OK, {"q": "x", "answers": ["L=ok", "R=ok"]})
    # What the question and the refusal carried does not outlive them in the task's metadata.
    assert done.extra.keys() == {"a2a"}


async def test_a_refused_answer_leaves_the_question_to_answer_again(served: Serve) -> None:
    server, near, agent = await near_and_far(served)
    thread = {"thread_id": "d"}
    async with near, asyncio.timeout(30):
        asked = await near.route("decide", {"q": "x"}, configurable=thread)
        wrongs: list[JsonValue] = ["yes", {}]
        refused = [await near.route("decide", None, configurable=thread, resume=wrong) for wrong in wrongs]
        async with server.client() as client:
            waiting = await client.get_task(GetTaskRequest(id=a2a_ids(asked)["task_id"]))
        done = await near.route("decide", None, configurable=thread, resume={"approve": True, "amount": 5})
    for result in refused:
        assert (result.status, result.fault) == (ResultStatus.INVALID, Fault.CALLER), result.error
        assert "its question still waits" in (result.error or "")
        assert "does not match what the interrupt of agent ask:decide:01 takes" in (result.error or "")
    assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
    assert (done.status, done.payload) == (ResultStatus.OK, {"q": "x", "answers": ["True:5"]}), done.error
    assert failures(near, agent.agent_id) == 0


async def test_a_second_answer_at_once_is_rejected_as_the_callers(served: Serve) -> None:
    _, near, agent = await near_and_far(served)
    async with near, asyncio.timeout(30):
        rounds: list[list[Any]] = []
        for index in range(3):  # enough failures in a row to quarantine the agent, were they counted
            thread = {"thread_id": f"t-{index}"}
            asked = await near.route("refund", ASK, configurable=thread)
            assert asked.status is ResultStatus.INPUT_REQUIRED
            answers = await asyncio.gather(
                *(near.route("refund", None, configurable=thread, resume=word) for word in ("yes", "no"))
            )
            rounds.append(sorted(answers, key=lambda result: result.status.value))
        [info] = near.catalog()
        fresh = await near.route("refund", ASK, configurable={"thread_id": "fresh"})
    for done, second in rounds:
        assert done.status is ResultStatus.OK, done.error
        assert (second.status, second.fault, second.delivered) == (ResultStatus.REJECTED, Fault.CALLER, False)
        assert second.error_type == "A2ANotTakenError"
    assert info.failures == 0
    assert info.problem is None
    assert fresh.status is ResultStatus.INPUT_REQUIRED, fresh.error
    assert failures(near, agent.agent_id) == 0


async def test_a_call_naming_no_thread_is_refused_as_in_process(served: Serve) -> None:
    """A graph keeping one conversation per thread refuses a call naming none, over the hop too:
    run on a context of the server's making, its question could be answered by nobody. A plain A2A
    client's first message, which names no context either, still starts a conversation."""
    server, near, _ = await near_and_far(served)
    async with near, asyncio.timeout(30):
        here = await server.gateway.router.route("refund", ASK)
        over = await near.route("refund", ASK)
        with pytest.raises(ReachError) as streamed:
            _ = [chunk async for chunk in near.stream("refund", ASK)]
        async with server.client() as client:
            plain = await task_of(client, request(message(ASK, skill="refund")))
    for result in (over, streamed.value.result):
        assert result is not None
        assert (result.status, result.fault, result.delivered) == (ResultStatus.INVALID, Fault.CALLER, False)
        assert result.error_type == here.error_type == "InvalidMessageError"
        assert "keeps one conversation per thread" in (result.error or "")
        assert result.extra["fix_options"] == here.extra["fix_options"]
    assert plain.status.state == TaskState.TASK_STATE_INPUT_REQUIRED


async def test_a_streamed_answer_asking_its_chunks_in_a_stream_mode_is_refused(served: Serve) -> None:
    """A reach server answers a question in one piece: a caller reading ``(mode, chunk)`` pairs
    is told so, instead of getting the answer's text to unpack; the question still waits."""
    _, near, agent = await near_and_far(served)
    thread = {"thread_id": "s"}
    modes = ["updates", "custom"]
    async with near, asyncio.timeout(30):
        with pytest.raises(InputRequiredError):
            _ = [chunk async for chunk in near.stream("refund", ASK, configurable=thread, stream_mode=modes)]
        with pytest.raises(InvalidMessageError) as shaped:
            _ = [
                chunk
                async for chunk in near.stream(
                    "refund", None, configurable=thread, resume="yes", stream_mode=modes
                )
            ]
        with pytest.raises(InvalidMessageError) as nested:
            _ = [
                chunk
                async for chunk in near.stream(
                    "refund", None, configurable=thread, resume="yes", subgraphs=True
                )
            ]
        answered = [chunk async for chunk in near.stream("refund", None, configurable=thread, resume="yes")]
    for refused in (shaped.value.result, nested.value.result):
        assert refused is not None
        assert (refused.status, refused.fault, refused.delivered) == (
            ResultStatus.INVALID,
            Fault.CALLER,
            False,
        )
        assert "answers resume= in one piece" in (refused.error or "")
    assert answered == ["refund yes"]
    assert failures(near, agent.agent_id) == 0
