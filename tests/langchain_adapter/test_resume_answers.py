"""Answers to several interrupts at once: checked against each interrupt's ``response_schema``
before any is sent, so a refused answer leaves every question waiting and nothing run; an answer
to an interrupt the thread no longer waits on is refused, not dropped; and when LangGraph refuses
one answer after others were taken, the error says which still wait."""

from __future__ import annotations

import operator
from typing import Annotated, Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.messages import AIMessage
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt
from pydantic import BaseModel, field_validator
from typing_extensions import TypedDict

from examples.langchain_demo.agents import scripted
from middleware import Fault, ResultStatus
from reach_adapters import Router
from reach_adapters.langchain import LangChainAgent

pytestmark = pytest.mark.timeout(30)


class Amount(BaseModel):
    amount: int


class Positive(BaseModel):
    amount: int

    @field_validator("amount")
    @classmethod
    def _positive(cls, value: int) -> int:
        if value <= 0:
            msg = "must be positive"
            raise ValueError(msg)
        return value


class Log(TypedDict, total=False):
    log: Annotated[list[str], operator.add]


AMOUNT_SCHEMA = {"type": "object", "properties": {"amount": {"type": "integer"}}, "required": ["amount"]}


def billing(paid: list[int], schema: Any = Amount) -> Any:
    """Two parallel nodes, each asking; `pay` pays what it is told (a side effect)."""

    def pay(state: Log) -> dict[str, Any]:
        answer = interrupt("how much to pay?", response_schema=schema)
        amount = answer["amount"] if isinstance(answer, dict) else answer.amount
        paid.append(amount)
        return {"log": [f"paid {amount}"]}

    def note(state: Log) -> dict[str, Any]:
        answer = interrupt("how much to note?", response_schema=schema)
        amount = answer["amount"] if isinstance(answer, dict) else answer.amount
        return {"log": [f"noted {amount}"]}

    return side_by_side(pay, note)


def side_by_side(pay: Any, note: Any) -> Any:
    """A checkpointed graph running `pay` and `note` in one step, each able to ask."""
    graph = StateGraph(Log)
    graph.add_node("pay", pay)
    graph.add_node("note", note)
    graph.add_edge(START, "pay")
    graph.add_edge(START, "note")
    graph.add_edge("pay", END)
    graph.add_edge("note", END)
    return graph.compile(checkpointer=InMemorySaver())


async def ask(router: Router, thread: dict[str, str]) -> dict[str, str]:
    asked = await router.send("billing:pay:01", {}, configurable=thread)
    assert asked.status is ResultStatus.INPUT_REQUIRED, asked.error
    entries: Any = asked.extra["interrupts"]
    return {entry["value"]: entry["id"] for entry in entries}


def logged(payload: Any) -> list[str]:
    return list(payload["log"])


def failures(router: Router) -> int:
    return router.catalog()[0].failures


@pytest.mark.parametrize("schema", [Amount, AMOUNT_SCHEMA], ids=["pydantic", "json-schema"])
async def test_answers_one_of_which_its_schema_refuses_run_nothing(router: Router, schema: Any) -> None:
    paid: list[int] = []
    router.register(LangChainAgent(billing(paid, schema), agent_id="billing:pay:01"))
    thread = {"thread_id": "order-7"}
    ids = await ask(router, thread)
    pay, note = ids["how much to pay?"], ids["how much to note?"]

    refused = await router.send(
        "billing:pay:01", None, configurable=thread, resume={pay: {"amount": 100}, note: {"amount": "x"}}
    )
    assert (refused.status, refused.fault, refused.delivered) == (ResultStatus.INVALID, Fault.CALLER, False)
    assert note in (refused.error or "")
    assert "response_schema" in (refused.error or "")
    assert "nothing was saved" in (refused.error or "")
    assert paid == []  # neither answer was sent
    assert failures(router) == 0

    done = await router.send(
        "billing:pay:01", None, configurable=thread, resume={pay: {"amount": 100}, note: {"amount": 1}}
    )
    assert done.status is ResultStatus.OK, done.error
    assert sorted(logged(done.payload)) == ["noted 1", "paid 100"]
    assert paid == [100]


async def test_one_answer_refused_after_another_was_taken_says_which_still_waits(router: Router) -> None:
    paid: list[int] = []
    router.register(LangChainAgent(billing(paid, Positive), agent_id="billing:pay:01"))
    thread = {"thread_id": "order-8"}
    ids = await ask(router, thread)
    pay, note = ids["how much to pay?"], ids["how much to note?"]

    # Past the JSON Schema, LangGraph's own check refuses the note's answer once pay's was taken.
    partly = await router.send(
        "billing:pay:01", None, configurable=thread, resume={pay: {"amount": 100}, note: {"amount": -1}}
    )
    assert (partly.status, partly.fault) == (ResultStatus.INVALID, Fault.CALLER), partly.error
    error = partly.error or ""
    assert "nothing was saved" not in error
    assert f"still waits on {[note]}" in error, error
    assert f"answers to {[pay]} were taken" in error
    assert "nothing was saved" not in error
    assert partly.extra["fix_options"] == {"resume": "<answer>"}  # the one left, answered alone
    assert paid == [100]
    assert failures(router) == 0

    done = await router.send("billing:pay:01", None, configurable=thread, resume={note: {"amount": 1}})
    assert done.status is ResultStatus.OK, done.error
    assert sorted(logged(done.payload)) == ["noted 1", "paid 100"]
    assert paid == [100]


@tool
def send_email(to: str) -> str:
    """Send an email."""
    return f"sent to {to}"


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


async def test_per_call_review_answers_one_refused_send_nothing(router: Router) -> None:
    sent: list[str] = []

    @tool("send_email")
    def send(to: str) -> str:
        """Send an email."""
        sent.append(to)
        return f"sent to {to}"

    calls = [
        {"name": "send_email", "args": {"to": "alice"}, "id": "c1"},
        {"name": "delete_file", "args": {"path": "r.txt"}, "id": "c2"},
    ]
    model = scripted(AIMessage("", tool_calls=calls), AIMessage("all done"))
    review = HumanInTheLoopMiddleware(
        interrupt_on={
            "send_email": {"allowed_decisions": ["approve", "edit", "reject"]},
            "delete_file": {"allowed_decisions": ["approve", "reject"]},
        },
        interrupt_mode="per_call",
    )
    graph = create_agent(model, tools=[send, delete_file], middleware=[review], checkpointer=InMemorySaver())
    router.register(LangChainAgent(graph, agent_id="ops:mail:01"))
    thread = {"thread_id": "t"}
    asked = await router.route(
        "mail", {"messages": [{"role": "user", "content": "tidy up"}]}, configurable=thread
    )
    assert asked.status is ResultStatus.INPUT_REQUIRED, asked.error
    entries: Any = asked.extra["interrupts"]
    first, second = (entry["id"] for entry in entries)
    edit: Any = {"type": "edit", "edited_action": {"name": "delete_file", "args": {"path": "other.txt"}}}

    refused = await router.route(
        "mail", None, configurable=thread, resume={first: {"type": "approve"}, second: edit}
    )
    assert (refused.status, refused.fault) == (ResultStatus.INVALID, Fault.CALLER), refused.error
    assert sent == []
    done = await router.route(
        "mail", None, configurable=thread, resume={first: {"type": "approve"}, second: {"type": "reject"}}
    )
    assert (done.status, done.payload) == (ResultStatus.OK, "all done"), done.error
    assert sent == ["alice"]


async def test_a_retried_resume_of_several_answers_goes_on_where_its_failed_attempt_left(
    router: Router,
) -> None:
    """One node takes its answer and fails once (a retryable failure, the capability safe to
    repeat): the retry sends the answers again, LangGraph drops the one taken, and the run ends."""
    failed: list[str] = []

    def pay(state: Log) -> dict[str, Any]:
        amount = interrupt("how much to pay?")
        if not failed:
            failed.append("once")
            raise ConnectionError("the payment service hung up")
        return {"log": [f"paid {amount}"]}

    def note(state: Log) -> dict[str, Any]:
        return {"log": [f"noted {interrupt('how much to note?')}"]}

    safe: Any = [{"name": "pay", "idempotent": True}]
    router.register(LangChainAgent(side_by_side(pay, note), agent_id="billing:pay:01", capabilities=safe))
    thread = {"thread_id": "order-9"}
    ids = await ask(router, thread)
    answers: Any = {ids["how much to pay?"]: 100, ids["how much to note?"]: 1}
    done = await router.send("billing:pay:01", None, configurable=thread, resume=answers)
    assert failed == ["once"]
    assert done.status is ResultStatus.OK, done.error
    assert sorted(logged(done.payload)) == ["noted 1", "paid 100"]
