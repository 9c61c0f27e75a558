"""Patterns of LangChain's how-to guides, routed as they run directly: tools registered as agents,
per-call ``configurable_fields``, errors a tool reports, a reach tool's failed call raised,
``include_raw`` structured output, and a runnable that changes its input in place."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.language_models.fake_chat_models import FakeListChatModel, FakeMessagesListChatModel
from langchain_core.messages import AIMessage
from langchain_core.runnables import ConfigurableField, ConfigurableFieldMultiOption, RunnableLambda
from langchain_core.tools import StructuredTool, Tool, ToolException, tool
from pydantic import BaseModel, JsonValue

from middleware import Fault, ResultStatus
from reach_adapters import Capability, Router
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
