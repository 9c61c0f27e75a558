"""ReachToolkit: the router as LangChain tools, used by real agents and called directly."""

from __future__ import annotations

import asyncio
import json
import re
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import BaseTool, ToolException

from examples.langchain_demo.agents import scripted
from middleware import ReachMessage, ReachResult, ResultStatus
from reach_adapters import Capability, FunctionAgent, InvalidDeclarationError, Router, SyncCallError
from reach_adapters.langchain import CapabilityTool, LangChainAgent, ReachAnyTool, ReachToolkit
from tests.langchain_adapter.conftest import RunRecorder

ORDER_SCHEMA = {
    "type": "object",
    "properties": {"order_id": {"type": "string"}, "qty": {"type": "integer", "minimum": 1}},
    "required": ["order_id"],
}


class Orders:
    """A real runnable agent that records what reached it."""

    def __init__(self, agent_id: str = "shop:orders:01") -> None:
        self.calls: list[Any] = []
        self.agent = LangChainAgent(
            RunnableLambda(self._run),
            agent_id=agent_id,
            capabilities=[
                Capability(name="orders", description="Look orders up.", input_schema=ORDER_SCHEMA)
            ],
        )

    async def _run(self, order: dict[str, Any]) -> dict[str, Any]:
        self.calls.append(order)
        if order["order_id"] == "boom":
            msg = "order store unreachable"
            raise ValueError(msg)
        return {"order_id": order["order_id"], "state": "shipped", "by": self.agent.agent_id}


def tools_by_name(router: Router, **options: Any) -> dict[str, BaseTool]:
    return {tool.name: tool for tool in ReachToolkit(router, **options).get_tools()}


def call(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "args": args, "id": "call-1", "type": "tool_call"}


async def upper(text: str) -> str:
    """Say it louder."""
    return text.upper()


async def test_one_tool_per_capability_plus_the_generic_one(router: Router) -> None:
    router.register(Orders().agent)
    router.register(LangChainAgent(RunnableLambda(upper), agent_id="util:upper:01"))

    tools = tools_by_name(router)

    assert sorted(tools) == ["orders", "reach_agent", "upper"]
    orders = tools["orders"]
    assert isinstance(orders, CapabilityTool)
    assert orders.description == "Look orders up."
    # Its optional argument is shown nullable: a strict-mode model sends every argument.
    qty = {"anyOf": [{"type": "integer", "minimum": 1}, {"type": "null"}]}
    assert orders.args_schema == {**ORDER_SCHEMA, "properties": {"order_id": {"type": "string"}, "qty": qty}}
    assert orders.response_format == "content_and_artifact"
    # A string input travels as the one argument "input": tool calls always carry an object.
    assert tools["upper"].args == {"input": {"type": "string"}}
    generic = tools["reach_agent"]
    assert isinstance(generic, ReachAnyTool)
    assert "orders, upper" in generic.description


async def test_the_generic_tool_can_be_left_out(router: Router) -> None:
    router.register(Orders().agent)

    assert [t.name for t in ReachToolkit(router, include_generic=False).get_tools()] == ["orders"]


def many(agent_id: str, *names: str) -> LangChainAgent:
    """An agent declaring each of `names` as a capability."""
    return LangChainAgent(
        RunnableLambda(upper), agent_id=agent_id, capabilities=[Capability(name=n) for n in names]
    )


def capability_by_tool(router: Router) -> dict[str, str]:
    tools = ReachToolkit(router).get_tools()
    return {t.name: t.capability.name for t in tools if isinstance(t, CapabilityTool)}


# The tool name rule every common provider accepts: OpenAI's, and no leading digit for Gemini.
PROVIDER_NAME = re.compile(r"[a-zA-Z_][a-zA-Z0-9_-]{0,63}")


async def test_tool_names_are_safe_for_model_providers_and_unique(router: Router) -> None:
    names = ["orders.lookup/v2", "orders_lookup_v2", "reach_agent", "3d-render", "x" * 60 + ".v1", "9" * 128]
    router.register(many("util:many:01", *names))

    tools = ReachToolkit(router).get_tools()

    assert [t.name for t in tools] == [
        "reach_agent",
        "_3d-render",
        "_" + "9" * 63,
        "orders_lookup_v2_2",
        "orders_lookup_v2",
        "reach_agent_2",
        "x" * 60 + "_v1",
    ]
    assert all(PROVIDER_NAME.fullmatch(t.name) for t in tools)
    assert [t.capability.name for t in tools if isinstance(t, CapabilityTool)] == sorted(names)


async def test_a_safe_capability_name_stays_its_tools_name_whatever_registers_later(router: Router) -> None:
    router.register(many("shop:orders:01", "orders_v2", "a_b_2"))
    before = capability_by_tool(router)

    router.register(many("shop:legacy:01", "orders.v2", "a.b", "a/b"))
    after = capability_by_tool(router)

    assert before == {"orders_v2": "orders_v2", "a_b_2": "a_b_2"}
    assert after == before | {"orders_v2_2": "orders.v2", "a_b": "a.b", "a_b_3": "a/b"}


async def test_a_call_answers_with_text_and_the_whole_result_as_artifact(router: Router) -> None:
    orders = Orders()
    router.register(orders.agent)

    message = await tools_by_name(router)["orders"].ainvoke(call("orders", {"order_id": "A-1", "qty": 2}))

    assert isinstance(message, ToolMessage)
    assert json.loads(str(message.content)) == {"order_id": "A-1", "state": "shipped", "by": "shop:orders:01"}
    artifact = message.artifact
    assert isinstance(artifact, ReachResult)
    assert artifact.status is ResultStatus.OK
    assert router.explain(artifact.task_id).chosen == "shop:orders:01"
    assert orders.calls == [{"order_id": "A-1", "qty": 2}]


async def test_text_payloads_reach_the_model_as_they_are(router: Router) -> None:
    router.register(LangChainAgent(RunnableLambda(upper), agent_id="util:upper:01"))
    tool = tools_by_name(router)["upper"]

    assert await tool.ainvoke({"input": "hi"}) == "HI"


@pytest.mark.parametrize(
    ("args", "field"),
    [({"qty": 2}, "field 'order_id'"), ({"order_id": "A", "qty": 0}, "field 'qty'")],
)
async def test_arguments_off_schema_are_a_tool_error_before_any_agent_runs(
    router: Router, args: dict[str, Any], field: str
) -> None:
    orders = Orders()
    router.register(orders.agent)

    message = await tools_by_name(router)["orders"].ainvoke(call("orders", args))

    assert message.status == "error"
    assert "invalid arguments for orders" in message.content
    assert field in message.content
    assert orders.calls == []


async def test_wrapped_arguments_are_checked_as_the_model_sees_them(router: Router) -> None:
    router.register(LangChainAgent(RunnableLambda(upper), agent_id="util:upper:01"))

    message = await tools_by_name(router)["upper"].ainvoke(call("upper", {"input": 5}))

    assert message.status == "error"
    assert "field 'input'" in message.content
    assert "string" in message.content


async def test_an_agent_failure_is_a_tool_error_the_model_sees(router: Router) -> None:
    router.register(Orders().agent)

    message = await tools_by_name(router)["orders"].ainvoke(call("orders", {"order_id": "boom"}))

    assert message.status == "error"
    assert "ValueError: order store unreachable" in message.content


async def test_with_handle_tool_error_off_the_tool_exception_is_raised(router: Router) -> None:
    router.register(Orders().agent)
    tool = tools_by_name(router, handle_tool_error=False)["orders"]

    with pytest.raises(ToolException, match="ValueError: order store unreachable"):
        await tool.ainvoke({"order_id": "boom"})
    with pytest.raises(ToolException, match="invalid arguments"):
        await tool.ainvoke({"qty": 1})


async def test_the_generic_tool_routes_by_capability_and_sends_by_agent_id(router: Router) -> None:
    first, second = Orders("shop:orders:01"), Orders("shop:orders:02")
    router.register(first.agent)
    router.register(second.agent)
    generic = tools_by_name(router)["reach_agent"]

    sent = await generic.ainvoke(
        call("reach_agent", {"target": "shop:orders:02", "payload": {"order_id": "X"}})
    )
    routed = await generic.ainvoke(call("reach_agent", {"target": "orders", "payload": {"order_id": "Y"}}))

    assert json.loads(sent.content)["by"] == "shop:orders:02"
    assert second.calls[0] == {"order_id": "X"}
    assert routed.artifact.ok
    assert len(first.calls) + len(second.calls) == 2


async def test_the_generic_tool_names_the_capability_of_an_agent_with_several(router: Router) -> None:
    async def tell(message: ReachMessage) -> Any:
        return message.meta_info.capability

    router.register(
        FunctionAgent(
            tell, agent_id="text:tools:01", capabilities=[Capability(name="upper"), Capability(name="lower")]
        )
    )
    generic = tools_by_name(router)["reach_agent"]
    assert "capability" in generic.args
    named = await generic.ainvoke(
        call("reach_agent", {"target": "text:tools:01", "capability": "lower", "payload": {}})
    )
    assert named.content == "lower"
    sync = await asyncio.to_thread(
        generic.invoke, call("reach_agent", {"target": "text:tools:01", "capability": "upper"})
    )
    assert sync.content == "upper"
    unnamed = await generic.ainvoke(call("reach_agent", {"target": "text:tools:01", "payload": {}}))
    assert unnamed.status == "error"
    assert "declares several capabilities ['upper', 'lower']" in unnamed.content
    misplaced = await generic.ainvoke(call("reach_agent", {"target": "upper", "capability": "lower"}))
    assert misplaced.status == "error"
    assert "'capability' goes with an agent id" in misplaced.content


@pytest.mark.parametrize(
    ("args", "problem"),
    [
        ({"payload": {}}, "field 'target'"),
        ({"target": ""}, "field 'target'"),
        ({"target": "no_such_skill"}, "no agent declares capability 'no_such_skill'"),
        ({"target": "shop:ghost:01", "payload": {}}, "shop:ghost:01 is not registered"),
        ({"target": "orders", "payload": {"qty": 1}}, "field 'order_id'"),
    ],
)
async def test_the_generic_tool_reports_what_went_wrong(
    router: Router, args: dict[str, Any], problem: str
) -> None:
    router.register(Orders().agent)

    message = await tools_by_name(router)["reach_agent"].ainvoke(call("reach_agent", args))

    assert message.status == "error"
    assert problem in message.content


async def test_agents_registered_later_appear_at_the_next_request(router: Router) -> None:
    toolkit = ReachToolkit(router)
    assert [t.name for t in toolkit.get_tools()] == ["reach_agent"]

    router.register(Orders().agent)

    assert [t.name for t in toolkit.get_tools()] == ["reach_agent", "orders"]


async def test_a_sync_call_on_the_routers_own_loop_is_refused_not_swallowed(router: Router) -> None:
    router.register(Orders().agent)
    await router.route("orders", {"order_id": "bind"})
    tool = tools_by_name(router)["orders"]

    with pytest.raises(SyncCallError, match=r"await router\.route"):
        tool.invoke(call("orders", {"order_id": "A"}))


def test_sync_calls_work_without_any_running_loop_and_still_nest() -> None:
    router = Router()
    orders = Orders()
    router.register(orders.agent)
    recorder = RunRecorder()
    try:
        tool = tools_by_name(router)["orders"]

        message = tool.invoke(call("orders", {"order_id": "S-1"}), {"callbacks": [recorder]})

        assert message.artifact.ok
        assert orders.calls == [{"order_id": "S-1"}]
        routed = recorder.named("orders@shop:orders:01")
        assert recorder.parent(routed) is recorder.named("orders")
    finally:
        router.close()


ODD_NAMES_SCHEMA = {
    "type": "object",
    "properties": {name: {"type": "string"} for name in ("self", "config", "run_manager", "callbacks")},
}


def echo_agent() -> LangChainAgent:
    async def echo(payload: dict[str, Any]) -> dict[str, Any]:
        return payload

    capability = Capability(name="echo", input_schema=ODD_NAMES_SCHEMA)
    return LangChainAgent(RunnableLambda(echo), agent_id="util:echo:01", capabilities=[capability])


# Names that mean something to Python or to LangChain's own calls of `_run` and `_arun`.
ODD_ARGUMENTS = {"self": "S", "config": "C", "run_manager": "R", "callbacks": "B"}


async def test_any_argument_name_reaches_the_agent(router: Router) -> None:
    router.register(echo_agent())

    message = await tools_by_name(router)["echo"].ainvoke(call("echo", ODD_ARGUMENTS))

    assert message.status == "success"
    assert message.artifact.payload == ODD_ARGUMENTS


def test_any_argument_name_reaches_the_agent_in_a_sync_call() -> None:
    router = Router()
    router.register(echo_agent())
    try:
        message = tools_by_name(router)["echo"].invoke(call("echo", ODD_ARGUMENTS))

        assert message.status == "success"
        assert message.artifact.payload == ODD_ARGUMENTS
    finally:
        router.close()


async def test_an_agent_recovers_from_a_tool_error(router: Router) -> None:
    orders = Orders()
    router.register(orders.agent)
    model = scripted(
        AIMessage("", tool_calls=[{"name": "orders", "args": {"id": "A-1"}, "id": "c1"}]),
        AIMessage("", tool_calls=[{"name": "orders", "args": {"order_id": "A-1"}, "id": "c2"}]),
        AIMessage("order A-1 has shipped"),
    )
    agent = create_agent(model, tools=ReachToolkit(router).get_tools())

    state = await agent.ainvoke({"messages": [{"role": "user", "content": "where is A-1?"}]})

    first, second = [m for m in state["messages"] if isinstance(m, ToolMessage)]
    assert first.status == "error"
    assert "field 'order_id'" in first.content
    assert second.status == "success"
    assert state["messages"][-1].content == "order A-1 has shipped"
    assert orders.calls == [{"order_id": "A-1"}]


@pytest.mark.parametrize(
    ("router_arg", "options", "problem"),
    [
        (object(), {}, "needs a Router, got object"),
        (None, {"handle_tool_error": "sometimes"}, "field 'handle_tool_error'"),
    ],
)
def test_bad_toolkit_arguments_say_what_is_wrong(
    router_arg: Any, options: dict[str, Any], problem: str
) -> None:
    with pytest.raises(InvalidDeclarationError, match=problem):
        ReachToolkit(Router() if router_arg is None else router_arg, **options)
