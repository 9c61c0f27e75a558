"""Runs that LangChain's own rules stopped are not the agent failing (DESIGN §6): a spent call
budget, blocked PII, a model refusing or overflowing stop the task (``error``, fault ``task``),
which no replica would do otherwise; none counts against the agent's breaker."""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import ModelCallLimitMiddleware, PIIMiddleware, ToolCallLimitMiddleware
from langchain_core.exceptions import (
    ContextOverflowError,
    ModelConnectionError,
    ModelRateLimitError,
    ModelRefusalError,
)
from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage, BaseMessage
from langchain_core.outputs import ChatResult
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver

from examples.langchain_demo.agents import scripted
from middleware import Fault, ResultStatus
from reach_adapters import ReachError, Router
from reach_adapters.langchain import LangChainAgent

pytestmark = pytest.mark.timeout(30)

# More failures than the breaker takes before it opens (RoutingPolicy's default, 5).
MANY = 8


def said(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def replies(*texts: str) -> Any:
    """A model that answers each call anew (fresh messages: a reused one keeps its id)."""
    return scripted(*(AIMessage(text) for text in itertools.islice(itertools.cycle(texts), 100)))


@tool
def lookup(order_id: str) -> str:
    """Look up an order."""
    return f"order {order_id} shipped"


def looking_up(*, answers: bool = True) -> Any:
    """A model that looks an order up, then answers (or, without `answers`, looks up again)."""
    calls = (
        AIMessage("", tool_calls=[{"name": "lookup", "args": {"order_id": str(n)}, "id": f"c{n}"}])
        for n in range(100)
    )
    if not answers:
        return scripted(*calls)
    done = (AIMessage(f"done {n}") for n in range(100))
    return scripted(*itertools.chain.from_iterable(zip(calls, done, strict=True)))


async def test_a_spent_thread_budget_stops_the_task_not_the_agent(router: Router) -> None:
    limit = ModelCallLimitMiddleware(thread_limit=1, exit_behavior="error")
    graph = create_agent(
        replies("hi"), tools=[], middleware=[limit], name="chat", checkpointer=InMemorySaver()
    )
    router.register(LangChainAgent(graph, agent_id="shop:chat:01"))

    first = await router.route("chat", said("hello"), configurable={"thread_id": "mallory"})
    assert first.status is ResultStatus.OK, first.error
    spent = [
        await router.route("chat", said("again"), configurable={"thread_id": "mallory"}) for _ in range(MANY)
    ]

    assert {(result.status, result.fault) for result in spent} == {(ResultStatus.ERROR, Fault.TASK)}
    assert "thread limit" in (spent[0].error or "")
    fresh = await router.route("chat", said("hello"), configurable={"thread_id": "alice"})
    assert fresh.status is ResultStatus.OK, fresh.error  # not quarantined


async def test_a_spent_run_budget_stops_the_task(router: Router) -> None:
    limit = ModelCallLimitMiddleware(run_limit=1, exit_behavior="error")
    graph = create_agent(looking_up(answers=False), tools=[lookup], middleware=[limit], name="orders")
    router.register(LangChainAgent(graph, agent_id="shop:orders:01"))

    stopped = [await router.route("orders", said("where is it?")) for _ in range(MANY)]

    assert {(result.status, result.fault) for result in stopped} == {(ResultStatus.ERROR, Fault.TASK)}
    assert stopped[0].error_type == "ModelCallLimitExceededError"


async def test_a_spent_tool_budget_stops_the_task(router: Router) -> None:
    limit = ToolCallLimitMiddleware(thread_limit=1, exit_behavior="error")
    graph = create_agent(
        looking_up(), tools=[lookup], middleware=[limit], name="orders", checkpointer=InMemorySaver()
    )
    router.register(LangChainAgent(graph, agent_id="shop:orders:01"))
    thread = {"thread_id": "t"}

    first = await router.route("orders", said("where is 1?"), configurable=thread)
    second = await router.route("orders", said("and 2?"), configurable=thread)

    assert first.status is ResultStatus.OK, first.error
    assert (second.status, second.fault) == (ResultStatus.ERROR, Fault.TASK), second.error


async def test_pii_in_the_callers_input_stops_the_task(router: Router) -> None:
    graph = create_agent(
        replies("ok"), tools=[], middleware=[PIIMiddleware("email", strategy="block")], name="chat"
    )
    router.register(LangChainAgent(graph, agent_id="shop:chat:01"))

    refused = [await router.route("chat", said("mail me at ann@example.com")) for _ in range(MANY)]

    assert {(result.status, result.fault) for result in refused} == {(ResultStatus.ERROR, Fault.TASK)}
    assert "PIIDetectionError" in (refused[0].error or "")
    clean = await router.route("chat", said("hello"))
    assert clean.status is ResultStatus.OK, clean.error


async def test_pii_in_the_models_answer_stops_the_task(router: Router) -> None:
    block = PIIMiddleware("email", strategy="block", apply_to_input=False, apply_to_output=True)
    graph = create_agent(replies("write to bob@example.com"), tools=[], middleware=[block], name="chat")
    router.register(LangChainAgent(graph, agent_id="shop:chat:01"))

    # The model repeats the address the call carries: still the model's answer that was blocked.
    stopped = [await router.route("chat", said("is bob@example.com right?")) for _ in range(MANY)]

    assert {(result.status, result.fault) for result in stopped} == {(ResultStatus.ERROR, Fault.TASK)}


class Failing(GenericFakeChatModel):
    """A chat model whose provider answers every request with `error`."""

    error: Exception

    def _generate(self, messages: list[BaseMessage], *args: Any, **kwargs: Any) -> ChatResult:
        raise self.error


@pytest.mark.parametrize(
    "error",
    [
        ContextOverflowError("prompt is too long: 250000 tokens > 200000"),
        ModelRefusalError("I can't help with that"),
    ],
    ids=["overflow", "refusal"],
)
async def test_a_model_refusing_or_overflowing_stops_the_task(router: Router, error: Exception) -> None:
    graph = create_agent(Failing(messages=iter([]), error=error), tools=[], name="chat")
    router.register(LangChainAgent(graph, agent_id="shop:chat:01"))

    stopped = [await router.route("chat", said("hello")) for _ in range(MANY)]

    assert {(result.status, result.fault) for result in stopped} == {(ResultStatus.ERROR, Fault.TASK)}


def failing_first(router: Router, error: Exception) -> None:
    """Two replicas of a chat model: the preferred one's provider fails with `error`."""
    failing = Failing(messages=iter([]), error=error)
    router.register(
        LangChainAgent(failing, agent_id="llm:chat:01", capabilities=[{"name": "chat", "weight": 100}])
    )
    answering = GenericFakeChatModel(messages=itertools.repeat(AIMessage("hi")))
    router.register(
        LangChainAgent(answering, agent_id="llm:chat:02", capabilities=[{"name": "chat", "weight": 1}])
    )


async def test_a_models_own_rate_limit_goes_to_the_next_replica(router: Router) -> None:
    failing_first(router, ModelRateLimitError("429 too many requests"))

    result = await router.route("chat", "hello")

    assert (result.ok, result.agent_id) == (True, "llm:chat:02"), result.error
    (first, _) = router.explain(result.task_id).attempts
    assert (first.error_type, first.delivered, first.fault) == ("ModelRateLimitError", False, Fault.AGENT)


async def test_a_stream_stopped_by_a_rule_ends_with_that_rules_result(router: Router) -> None:
    limit = ModelCallLimitMiddleware(thread_limit=1, exit_behavior="error")
    graph = create_agent(
        replies("hi"), tools=[], middleware=[limit], name="chat", checkpointer=InMemorySaver()
    )
    router.register(LangChainAgent(graph, agent_id="shop:chat:01"))
    thread = {"thread_id": "mallory"}
    assert (await router.route("chat", said("hello"), configurable=thread)).ok

    with pytest.raises(ReachError) as raised:
        await drain(router.stream("chat", said("again"), configurable=thread, stream_mode="updates"))

    stopped = raised.value.result
    assert stopped is not None
    assert (stopped.status, stopped.fault) == (ResultStatus.ERROR, Fault.TASK), stopped.error


async def drain(stream: AsyncIterator[Any]) -> None:
    async for _ in stream:
        pass


async def test_a_models_lost_connection_may_have_been_delivered(router: Router) -> None:
    failing_first(router, ModelConnectionError("connection reset mid-response"))

    result = await router.route("chat", "hello")

    assert (result.status, result.agent_id, result.delivered) == (ResultStatus.ERROR, "llm:chat:01", True)
    assert len(router.explain(result.task_id).attempts) == 1  # not sent again: the work may have run
