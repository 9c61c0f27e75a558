"""The run's context (LangGraph's ``context=``, read as ``runtime.context``) as a call option:
given per call, checked against the graph's context schema, and its absence the caller's mistake."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain.tools import ToolRuntime, tool
from langchain_core.messages import AIMessage
from langchain_core.runnables import Runnable, RunnableLambda
from langgraph.graph import END, START, StateGraph
from langgraph.runtime import Runtime
from typing_extensions import TypedDict

from examples.langchain_demo.agents import scripted
from middleware import Fault, ResultStatus
from reach_adapters import InvalidMessageError, Router
from reach_adapters.langchain import LangChainAgent

pytestmark = pytest.mark.timeout(30)

ASKED = {"messages": [{"role": "user", "content": "what did I order?"}]}


@dataclass
class Shopper:
    user_id: str
    limit: int = 3


def shop(seen: list[str]) -> Runnable[Any, Any]:
    """A `create_agent` agent whose tool reads who is asking from the run's context."""

    @tool
    def my_orders(runtime: ToolRuntime[Shopper]) -> str:
        """List the calling user's orders."""
        shopper = runtime.context
        seen.append(f"{type(shopper).__name__} {shopper.user_id}: {shopper.limit} orders")
        return seen[-1]

    model = scripted(
        AIMessage("", tool_calls=[{"name": "my_orders", "args": {}, "id": "c1"}]),
        AIMessage("done"),
    )
    return create_agent(model, tools=[my_orders], context_schema=Shopper)


class Text(TypedDict, total=False):
    text: str


class Locale(TypedDict):
    lang: str


def localised() -> Runnable[Any, Any]:
    def say(state: Text, runtime: Runtime[Locale]) -> dict[str, Any]:
        return {"text": f"{runtime.context['lang']}: {state.get('text')}"}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Text, context_schema=Locale)
    builder.add_node("say", say)
    builder.add_edge(START, "say")
    builder.add_edge("say", END)
    return builder.compile()


def failures(router: Router, agent_id: str) -> int:
    return next(entry.failures for entry in router.catalog() if entry.agent_id == agent_id)


async def test_the_context_reaches_the_agents_tools_shaped_as_its_schema(router: Router) -> None:
    seen: list[str] = []
    router.register(LangChainAgent(shop(seen), agent_id="shop:orders:01"))
    result = await router.route("orders", ASKED, context={"user_id": "alice", "limit": "5"})
    assert (result.status, result.payload) == (ResultStatus.OK, "done"), result.error
    assert seen == ["Shopper alice: 5 orders"]


async def test_a_call_without_the_context_its_schema_requires_is_the_callers_mistake(
    router: Router, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="reach_adapters.langchain"):
        router.register(LangChainAgent(shop([]), agent_id="shop:orders:01"))
    assert "context={'user_id': ...}" in caplog.text
    for _ in range(3):  # enough failures in a row to quarantine the agent, were they counted
        missing = await router.route("orders", ASKED)
        assert (missing.status, missing.fault) == (ResultStatus.INVALID, Fault.CALLER), missing.error
        assert missing.extra["fix_options"] == {"context": {"user_id": "<user_id>"}}
        wrong = await router.route("orders", ASKED, context={"user_id": "alice", "limit": "many"})
        assert (wrong.status, wrong.fault) == (ResultStatus.INVALID, Fault.CALLER), wrong.error
        assert "field 'limit'" in (wrong.error or "")
    assert failures(router, "shop:orders:01") == 0
    assert (await router.route("orders", ASKED, context={"user_id": "bob"})).ok


async def test_a_graphs_context_is_given_to_streams_too(router: Router) -> None:
    router.register(LangChainAgent(localised(), agent_id="util:say:01"))
    french = {"lang": "fr"}
    chunks = [c async for c in router.stream("say", {"text": "hi"}, context=french, stream_mode="updates")]
    assert chunks == [{"say": {"text": "fr: hi"}}]
    with pytest.raises(InvalidMessageError, match="context=\\{'lang'"):
        _ = [c async for c in router.stream("say", {"text": "hi"})]


async def test_a_bound_context_needs_no_call_to_give_it_and_the_calls_fields_go_over_it(
    router: Router, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.WARNING, logger="reach_adapters.langchain"):
        router.register(LangChainAgent(localised().bind(context={"lang": "fr"}), agent_id="util:say:01"))
    assert "context" not in caplog.text
    assert (await router.route("say", {"text": "hi"})).payload == {"text": "fr: hi"}
    assert (await router.route("say", {"text": "hi"}, context={"lang": "de"})).payload == {"text": "de: hi"}


async def test_a_context_for_an_agent_that_takes_none_is_refused(router: Router) -> None:
    router.register(LangChainAgent(RunnableLambda(lambda x: x), agent_id="util:echo:01"))
    result = await router.route("echo", {"a": 1}, context={"user_id": "alice"})
    assert (result.status, result.fault) == (ResultStatus.INVALID, Fault.CALLER)
    assert "takes no context" in (result.error or "")
    # Fallbacks are given the run's keyword arguments too: one that is no graph would fail on it.
    fallbacks = localised().with_fallbacks([RunnableLambda(lambda x: x)])
    router.register(LangChainAgent(fallbacks, agent_id="util:say:01"))
    refused = await router.route("say", {"text": "hi"}, context={"lang": "fr"})
    assert (refused.status, refused.fault) == (ResultStatus.INVALID, Fault.CALLER), refused.error


@dataclass
class Settings:
    lang: str = "en"
    formal: bool = False


def configured() -> Runnable[Any, Any]:
    def say(state: Text, runtime: Runtime[Settings]) -> dict[str, Any]:
        settings = runtime.context
        return {"text": f"{settings.lang}{'!' if settings.formal else ''}: {state.get('text')}"}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Text, context_schema=Settings)
    builder.add_node("say", say)
    builder.add_edge(START, "say")
    builder.add_edge("say", END)
    return builder.compile()


async def test_a_call_without_a_context_gets_the_schemas_defaults_and_a_misspelt_field_is_said(
    router: Router,
) -> None:
    """LangGraph would give the graph None, which its nodes cannot read; and a field the schema
    does not have would be dropped (a dataclass: fail the run), the default used unsaid."""
    router.register(LangChainAgent(configured(), agent_id="util:say:01"))
    for _ in range(3):  # enough failures in a row to quarantine the agent, were they counted
        assert (await router.route("say", {"text": "hi"})).payload == {"text": "en: hi"}
        misspelt = await router.route("say", {"text": "hi"}, context={"formel": True})
        assert (misspelt.status, misspelt.fault) == (ResultStatus.INVALID, Fault.CALLER), misspelt.error
        assert "did you mean 'formal'?" in (misspelt.error or "")
    assert failures(router, "util:say:01") == 0
    assert (await router.route("say", {"text": "hi"}, context={"formal": True})).payload == {
        "text": "en!: hi"
    }
