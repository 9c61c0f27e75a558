"""Patterns of LangChain's how-to guides, routed as they run directly: tools registered as agents,
per-call ``configurable_fields``, errors a tool reports, a reach tool's failed call raised,
``include_raw`` structured output, and a runnable that changes its input in place."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel, FakeMessagesListChatModel
from langchain_core.messages import AIMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.runnables import ConfigurableField, ConfigurableFieldMultiOption, RunnableLambda
from langchain_core.tools import StructuredTool, Tool, ToolException, tool
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode
from pydantic import BaseModel, Field, JsonValue

from middleware import Fault, ResultStatus
from reach_adapters import Capability, Router, RoutingPolicy
from reach_adapters.langchain import LangChainAgent, ReachToolkit

pytestmark = pytest.mark.timeout(30)


def _breaker(router: Router, agent_id: str) -> str:
    return next(str(info.breaker) for info in router.catalog() if info.agent_id == agent_id)


async def test_a_single_input_tool_takes_its_string(router: Router) -> None:
    calc = Tool(name="calc", func=lambda text: f"calc({text})", description="Work out a sum.")
    router.register(LangChainAgent(calc, agent_id="t:calc:01"))
    assert router.reachable()["calc"].input_schema == {"type": "string"}
    result = await router.route("calc", "1+1")
    assert (result.status, result.payload) == (ResultStatus.OK, await calc.ainvoke("1+1"))


async def test_a_tool_of_a_json_schema_takes_what_the_schema_says(router: Router) -> None:
    schema = {
        "type": "object",
        "properties": {"id": {"type": "string"}, "depth": {"type": "integer"}},
        "required": ["id"],
    }
    lookup = StructuredTool.from_function(
        lambda **kw: f"looked up {kw}", name="lookup", description="Look up a record.", args_schema=schema
    )
    router.register(LangChainAgent(lookup, agent_id="t:lookup:01"))
    assert router.reachable()["lookup"].input_schema == schema
    ok = await router.route("lookup", {"id": "7", "depth": 2})
    assert ok.payload == await lookup.ainvoke({"id": "7", "depth": 2})
    refused = await router.route("lookup", {"depth": 2})
    assert (refused.status, refused.fault) == (ResultStatus.INVALID, Fault.CALLER)


async def test_a_configurable_field_of_the_wrong_type_is_the_callers_mistake(router: Router) -> None:
    model = FakeListChatModel(responses=["hi", "there"]).configurable_fields(
        sleep=ConfigurableField(id="sleep"),
        responses=ConfigurableFieldMultiOption(
            id="canned", options={"a": "from a", "b": "from b"}, default=["a"]
        ),
    )
    router.register(LangChainAgent(model, agent_id="t:chat:01", capabilities=[Capability(name="chat")]))
    wrong: list[dict[str, JsonValue]] = [{"sleep": "fast"}, {"canned": ["zzz"]}]
    for configurable in wrong * 3:
        refused = await router.route("chat", "hello", configurable=configurable)
        assert (refused.status, refused.fault) == (ResultStatus.INVALID, Fault.CALLER), refused.error
        assert f"configurable[{next(iter(configurable))!r}]" in (refused.error or "")
    assert _breaker(router, "t:chat:01") == "closed"
    ok = await router.route("chat", "hello", configurable={"sleep": 0, "canned": ["b"]})
    assert (ok.status, ok.payload) == (ResultStatus.OK, "from b")


async def test_an_error_a_tool_reports_is_the_tasks(router: Router) -> None:
    @tool
    def order(order_id: str) -> str:
        """Look an order up."""
        msg = f"order {order_id} not found"
        raise ToolException(msg)

    router.register(LangChainAgent(order, agent_id="t:order:01"))
    for _ in range(4):
        result = await router.route("order", {"order_id": "missing"})
        assert (result.status, result.fault, result.error_type) == (
            ResultStatus.ERROR,
            Fault.TASK,
            "ToolException",
        )
        assert "order missing not found" in (result.error or "")
    assert _breaker(router, "t:order:01") == "closed"


async def test_a_reach_tools_failed_call_raised_is_judged_as_the_call(router: Router) -> None:
    def flights(payload: dict[str, Any]) -> str:
        """Find flights."""
        raise RuntimeError("flights backend bug")

    async def plan(payload: dict[str, Any]) -> str:
        """Plan a trip with the flights agent."""
        tools = ReachToolkit(router, handle_tool_error=False, include_generic=False).get_tools()
        found = await next(t for t in tools if t.name == "flights").ainvoke({"city": payload["city"]})
        return f"plan with {found}"

    router.register(LangChainAgent(RunnableLambda(flights), agent_id="t:flights:01"))
    router.register(LangChainAgent(RunnableLambda(plan), agent_id="t:planner:01"))
    for _ in range(3):
        result = await router.route("plan", {"city": "Oslo"})
        # The flights agent failed, not the planner (as with raise_for_status()).
        assert (result.status, result.fault) == (ResultStatus.ERROR, Fault.TASK)
    assert _breaker(router, "t:planner:01") == "closed"


class Joke(BaseModel):
    setup: str
    punchline: str


class _ToolModel(FakeMessagesListChatModel):
    def bind_tools(self, tools: Any, **kwargs: Any) -> Any:
        return self.bind(tools=tools, **kwargs)


async def test_include_raw_answers_its_parsing_error_as_text(router: Router) -> None:
    call = {"name": "Joke", "args": {"setup": "s"}, "id": "c1"}
    model = _ToolModel(responses=[AIMessage(content="", tool_calls=[call])] * 2)
    structured = model.with_structured_output(Joke, include_raw=True)
    direct = await structured.ainvoke("tell me a joke")
    assert isinstance(direct, dict)
    error = direct["parsing_error"]
    router.register(LangChainAgent(structured, agent_id="t:joke:01"))
    result = await router.route("joke", "tell me a joke")
    assert result.status is ResultStatus.OK, result.error
    assert isinstance(result.payload, dict)
    assert result.payload["parsed"] is None
    assert result.payload["parsing_error"] == f"{type(error).__name__}: {error}"


async def test_a_retry_gets_the_task_as_sent_whatever_the_run_did_to_its_input(router: Router) -> None:
    seen: list[dict[str, Any]] = []

    def make(name: str) -> Any:
        def primary(payload: dict[str, Any]) -> str:
            seen.append(dict(payload))
            msg = f"{name}'s backend is unreachable"
            raise ConnectionError(msg)

        def fallback(payload: dict[str, Any]) -> str:
            msg = f"{name}'s fallback is unreachable"
            raise ConnectionError(msg)

        return RunnableLambda(primary).with_fallbacks([RunnableLambda(fallback)], exception_key="error")

    lookup = [Capability(name="lookup", idempotent=True)]
    for name in ("a", "b"):
        router.register(LangChainAgent(make(name), agent_id=f"t:lookup:{name}", capabilities=lookup))
    await router.route("lookup", {"q": "hi"})
    assert len(seen) > 1
    assert all(payload == {"q": "hi"} for payload in seen)


SECRET = "db connect failed: postgres://app:hunter2@db.internal/orders"


@pytest.mark.parametrize("expose", [True, False])
async def test_a_tools_reported_error_is_masked_as_any_agent_error(expose: bool) -> None:
    @tool
    def orders(order_id: str) -> str:
        """Look an order up."""
        raise ToolException(SECRET)

    async with Router(policy=RoutingPolicy(expose_agent_errors=expose)) as router:
        router.register(LangChainAgent(orders, agent_id="t:orders:01"))
        result = await router.route("orders", {"order_id": "1"})
    assert (result.fault, result.error_type) == (Fault.TASK, "ToolException")
    assert "hunter2" not in (result.error or "")
    if not expose:
        assert (result.error or "").startswith("agent error (reference ")


async def test_a_reach_tool_given_wrong_arguments_is_the_calling_agents_mistake(router: Router) -> None:
    def flights(payload: dict[str, str]) -> str:
        """Find flights to a city."""
        return f"flights to {payload['city']}"

    async def plan(payload: dict[str, Any]) -> str:
        """Plan a trip, asking for flights wrongly."""
        tools = ReachToolkit(router, handle_tool_error=False, include_generic=False).get_tools()
        return str(await next(t for t in tools if t.name == "flights").ainvoke({"town": payload["city"]}))

    flights_in = {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}
    router.register(
        LangChainAgent(
            RunnableLambda(flights),
            agent_id="t:flights:01",
            capabilities=[Capability(name="flights", input_schema=flights_in)],
        )
    )
    router.register(LangChainAgent(RunnableLambda(plan), agent_id="t:planner:01"))
    result = await router.route("plan", {"city": "Oslo"})
    assert (result.status, result.fault) == (ResultStatus.ERROR, Fault.AGENT)


class _Two(BaseModel):
    query: str
    limit: int


async def test_tool_exceptions_that_are_the_agents_own_failure_stay_so(router: Router) -> None:
    @tool
    def get_order(order_id: int) -> str:
        """Get an order."""
        return f"order {order_id}"

    def model(state: MessagesState) -> dict[str, Any]:
        call = {"name": "get_order", "args": {"order_id": "seven"}, "id": "c1"}
        return {"messages": [AIMessage("", tool_calls=[call])]}

    graph = StateGraph(MessagesState)
    graph.add_node("model", model)
    graph.add_node("tools", ToolNode([get_order], handle_tool_errors=False))
    graph.add_edge(START, "model")
    graph.add_edge("model", "tools")
    graph.add_edge("tools", END)
    # The model called a tool with arguments it refuses; a tool configured wrongly.
    misconfigured = Tool(name="search", description="Search.", func=lambda q: f"found {q}", args_schema=_Two)
    router.register(LangChainAgent(graph.compile(), agent_id="t:orders:01"))
    router.register(LangChainAgent(misconfigured, agent_id="t:search:01"))
    asked = await router.route("orders", {"messages": [{"role": "user", "content": "order 7"}]})
    searched = await router.route("search", {"query": "x", "limit": 1})
    assert (asked.fault, asked.error_type) == (Fault.AGENT, "ToolInvocationError")
    assert (searched.fault, searched.error_type) == (Fault.AGENT, "ToolException")


async def test_a_tool_whose_output_is_parsed_takes_its_string(router: Router) -> None:
    calc = Tool(name="calc", func=lambda text: f"calc({text})", description="Work out a sum.")
    router.register(LangChainAgent(calc | StrOutputParser(), agent_id="t:calc:01"))
    result = await router.route("calc", "1+1")
    assert (result.status, result.payload) == (ResultStatus.OK, "calc(1+1)")


class _Tempered(FakeListChatModel):
    temperature: float = Field(0.5, ge=0, le=1)


async def test_a_configurable_field_keeps_its_constraints(router: Router) -> None:
    # The field's own type and bounds count, not the annotation the ConfigurableField names.
    model = _Tempered(responses=["hi"]).configurable_fields(
        temperature=ConfigurableField(id="temperature", annotation="Undefinedd")
    )
    router.register(LangChainAgent(model, agent_id="t:chat:01", capabilities=[Capability(name="chat")]))
    refused = await router.route("chat", "hello", configurable={"temperature": 7})
    assert (refused.status, refused.fault) == (ResultStatus.INVALID, Fault.CALLER)
    ok = await router.route("chat", "hello", configurable={"temperature": "0.2"})
    assert ok.status is ResultStatus.OK, ok.error
