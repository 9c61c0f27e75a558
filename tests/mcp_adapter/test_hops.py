"""Results and tools survive re-serving: a capability one MCP hop away (a reach router serving
another) takes and gives what it does locally, with its schemas (issue 12, item 2)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
from langchain_core.runnables import RunnableLambda
from mcp import Client
from mcp.server.mcpserver import MCPServer
from pydantic import BaseModel

from middleware import Fault
from reach_adapters import Capability, FunctionAgent, Router
from reach_adapters.langchain import LangChainAgent
from reach_adapters.mcp import MCPServerAgent, RouterMCPServer

pytestmark = pytest.mark.timeout(60)


class Order(BaseModel):
    id: str
    total: float


def shop_server() -> MCPServer:
    shop = MCPServer("shop")

    @shop.tool()
    def list_orders(customer: str) -> list[Order]:
        """The customer's orders."""
        return [Order(id="42", total=39.9)]

    @shop.tool()
    def find_order(id: str) -> Order | None:
        """One order, if any."""
        return Order(id=id, total=1.0) if id != "none" else None

    @shop.tool()
    def total(orders: list[Order]) -> float:
        """What the orders cost together."""
        return sum(order.total for order in orders)

    return shop


@asynccontextmanager
async def one_hop_away(near: Router) -> AsyncIterator[tuple[Router, MCPServerAgent]]:
    """A router reaching `near`'s capabilities through `near` served over MCP."""
    gateway = RouterMCPServer(near, name="gw")
    far = Router()
    hop = await MCPServerAgent.connect("gw", gateway.server)
    far.register(hop)
    try:
        yield far, hop
    finally:
        await far.aclose()
        gateway.close()
        await near.aclose()


def _capability(agent: MCPServerAgent, name: str) -> Any:
    return next(cap for cap in agent.capabilities if cap.name == name)


async def test_tools_returning_models_in_a_list_or_optional_are_offered(router: Router) -> None:
    agent = await MCPServerAgent.connect("shop", shop_server())
    router.register(agent)
    assert sorted(cap.name for cap in agent.capabilities) == ["find_order", "list_orders", "total"]
    listed = _capability(agent, "list_orders").output_schema
    # The value's schema, its references pointing to definitions it carries.
    assert listed["type"] == "array"
    assert listed["items"] == {"$ref": "#/$defs/Order"}
    assert set(listed["$defs"]) == {"Order"}
    orders = await router.route("list_orders", {"customer": "ada"})
    assert (orders.status.value, orders.payload) == ("ok", [{"id": "42", "total": 39.9}])
    found = await router.route("find_order", {"id": "7"})
    assert (found.status.value, found.payload) == ("ok", {"id": "7", "total": 1.0})
    missing = await router.route("find_order", {"id": "none"})
    assert (missing.status.value, missing.payload) == ("ok", None)
    summed = await router.route("total", {"orders": [{"id": "1", "total": 2.5}, {"id": "2", "total": 0.5}]})
    assert (summed.status.value, summed.payload) == ("ok", 3.0)
    # The input's references resolve too: an order without its total is the caller's mistake.
    refused = await router.route("total", {"orders": [{"id": "1"}]})
    assert (refused.status.value, refused.fault) == ("invalid", Fault.CALLER)


def orders_of(customer: str) -> list[Order]:
    return [Order(id="42", total=39.9)]


async def test_a_local_list_of_models_is_offered_one_hop_away() -> None:
    near = Router()
    near.register(LangChainAgent(RunnableLambda(orders_of), agent_id="shop:orders:01"))
    local = (await near.route("orders_of", "ada")).payload
    async with one_hop_away(near) as (far, hop):
        assert [cap.name for cap in hop.capabilities] == ["orders_of"]
        schema = _capability(hop, "orders_of").output_schema
        assert schema["items"] == {"$ref": "#/$defs/Order"}
        routed = await far.route("orders_of", "ada")
        assert (routed.status.value, routed.payload) == ("ok", local)


def count(n: int) -> int:
    return n


def find(id: str) -> Order | None:
    return Order(id=id, total=1.0) if id != "none" else None


async def test_a_bare_result_comes_back_unboxed_whatever_the_capability_is_called() -> None:
    near = Router()
    takes_n = {"type": "object", "properties": {"n": {"type": "integer"}}}
    for i, name in enumerate(("count", "Count", "CountWords")):
        declared = Capability(name=name, input_schema=takes_n, output_schema={"type": "integer"})
        near.register(FunctionAgent(count, agent_id=f"util:count{i}:01", capabilities=[declared]))
    # A model or nothing: an object only sometimes, so boxed too, and the box says it is one.
    near.register(LangChainAgent(RunnableLambda(find), agent_id="shop:find:01"))
    async with one_hop_away(near) as (far, hop):
        for name in ("count", "Count", "CountWords"):
            assert _capability(hop, name).output_schema == {"type": "integer"}
            routed = await far.route(name, {"n": 3})
            assert (routed.status.value, routed.payload) == ("ok", 3)
        schema = _capability(hop, "find").output_schema
        assert set(schema["$defs"]) == {"Order"}
        found = await far.route("find", "7")
        assert (found.status.value, found.payload) == ("ok", {"id": "7", "total": 1.0})
        missing = await far.route("find", "none")
        assert (missing.status.value, missing.payload) == ("ok", None)


def untyped(n):  # type: ignore[no-untyped-def]  # no annotations: no output schema is derived
    """Count."""
    return n


def nothing(n: int):  # type: ignore[no-untyped-def]
    """Says nothing."""


async def test_a_bare_result_without_an_output_schema_keeps_its_value_one_hop_away() -> None:
    near = Router()
    near.register(FunctionAgent(untyped, agent_id="util:count:01"))
    near.register(FunctionAgent(nothing, agent_id="util:nothing:01"))
    takes_text = {"type": "object", "properties": {"text": {"type": "string"}}}
    near.register(
        FunctionAgent(
            lambda text: text.split(),
            agent_id="util:words:01",
            capabilities=[Capability(name="words", input_schema=takes_text)],
        )
    )
    near.register(LangChainAgent(RunnableLambda(lambda x: x["text"].upper()), agent_id="util:shout:01"))
    calls: list[tuple[str, dict[str, Any]]] = [
        ("untyped", {"n": 3}),
        ("nothing", {"n": 3}),
        ("words", {"text": "a b"}),
        ("shout", {"text": "hi"}),
    ]
    local = {name: (await near.route(name, arguments)).payload for name, arguments in calls}
    assert local == {"untyped": 3, "nothing": None, "words": ["a", "b"], "shout": "HI"}
    gateway = RouterMCPServer(near, name="gw")
    try:
        async with Client(gateway.server) as client:
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert tools["untyped"].output_schema is None
            counted = await client.call_tool("untyped", {"n": 3})
            shouted = await client.call_tool("shout", {"text": "hi"})
    finally:
        gateway.close()
    # A plain MCP client reads the value's text, or the value in the box the SDK's servers use.
    assert [(block.type, getattr(block, "text", None)) for block in counted.content] == [("text", "3")]
    assert counted.structured_content == {"result": 3}
    assert [getattr(block, "text", None) for block in shouted.content] == ["HI"]
    assert shouted.structured_content == {"result": "HI"}
    async with one_hop_away(near) as (far, _):
        for name, arguments in calls:
            routed = await far.route(name, arguments)
            assert (name, routed.status.value, routed.payload) == (name, "ok", local[name])


def shout(text: str) -> str:
    return text.upper()


async def test_a_bare_input_is_taken_one_hop_away_as_it_is_locally() -> None:
    near = Router()
    near.register(LangChainAgent(RunnableLambda(shout), agent_id="util:shout:01"))
    skus = {"type": "array", "items": {"$ref": "#/$defs/Sku"}, "$defs": {"Sku": {"type": "string"}}}
    near.register(
        FunctionAgent(
            len,
            agent_id="util:count:01",
            capabilities=[Capability(name="count", input_schema=skus)],
            call_style="payload",
        )
    )
    assert (await near.route("shout", "hi there")).payload == "HI THERE"
    gateway = RouterMCPServer(near, name="gw")
    try:
        async with Client(gateway.server) as client:
            # A plain MCP client sends it as the one argument "input", as before.
            shouted = await client.call_tool("shout", {"input": "hi there"})
    finally:
        gateway.close()
    assert shouted.structured_content == {"result": "HI THERE"}
    async with one_hop_away(near) as (far, hop):
        assert _capability(hop, "shout").input_schema["type"] == "string"
        # The input's references still point to its definitions.
        assert _capability(hop, "count").input_schema == skus
        routed = await far.route("shout", "hi there")
        assert (routed.status.value, routed.payload) == ("ok", "HI THERE")
        counted = await far.route("count", ["kettle", "mug"])
        assert (counted.status.value, counted.payload) == ("ok", 2)
        # The caller's mistake is still refused before the call, as it is locally.
        refused = await far.route("count", [3])
        assert (refused.status.value, refused.fault) == ("invalid", Fault.CALLER)


def described(payload: Any) -> str:
    return f"{type(payload).__name__}: {payload!r}"


async def test_a_capability_that_takes_any_payload_takes_it_one_hop_away() -> None:
    """Served as taking an object (its arguments the payload), as plain MCP clients expect; a
    reach router one hop away sends it a text or a list too, as a local caller may, where it used
    to take the object schema as the capability's and refuse them as the caller's mistake."""
    near = Router()
    near.register(
        FunctionAgent(described, agent_id="util:describe:01", capabilities=[Capability(name="describe")])
    )
    sent: list[Any] = ["hi", 3, [1, "a"], {"input": "kept"}, {"k": 1}]
    local = [(await near.route("describe", payload)).payload for payload in sent]
    gateway = RouterMCPServer(near, name="gw")
    try:
        async with Client(gateway.server) as client:
            (tool,) = [t for t in (await client.list_tools()).tools if t.name == "describe"]
            # A plain client's arguments are the payload, an "input" among them.
            plain = await client.call_tool("describe", {"input": "kept"})
    finally:
        gateway.close()
    assert tool.input_schema == {"type": "object"}
    assert plain.structured_content == {"result": "dict: {'input': 'kept'}"}
    async with one_hop_away(near) as (far, hop):
        assert "input_schema" not in _capability(hop, "describe").model_fields_set
        for payload, expected in zip(sent, local, strict=True):
            routed = await far.route("describe", payload)
            assert (routed.status.value, routed.payload) == ("ok", expected), routed.error


class Tree(BaseModel):
    v: int
    kids: list[Tree] = []


def handle(payload: dict[str, Any] | None) -> str:
    return f"got {payload}"


def grow(payload: Tree) -> int:
    return payload.v + sum(grow(kid) for kid in payload.kids)


async def test_a_boxed_input_takes_only_the_input_argument() -> None:
    """A tool whose input is boxed takes exactly ``{"input": value}``: a plain client's bare
    arguments are refused, not read as a missing input that a nullable one takes as null (the
    function got None and said so, as a success). A recursive model is an object, served as one."""
    near = Router()
    near.register(FunctionAgent(handle, agent_id="util:handle:01"))
    near.register(FunctionAgent(grow, agent_id="util:grow:01"))
    gateway = RouterMCPServer(near, name="gw")
    try:
        async with Client(gateway.server) as client:
            bare = await client.call_tool("handle", {"order_id": 7})
            boxed = await client.call_tool("handle", {"input": {"order_id": 7}})
            grown = await client.call_tool("grow", {"v": 1, "kids": [{"v": 2}]})
    finally:
        gateway.close()
        await near.aclose()
    assert bare.is_error
    assert bare.meta is not None
    assert (bare.meta["agent-reach/status"], bare.meta["agent-reach/fault"]) == ("invalid", "caller")
    assert "takes its input as the one argument 'input'" in str(bare.content)
    assert boxed.structured_content == {"result": "got {'order_id': 7}"}
    assert grown.structured_content == {"result": 3}


async def test_a_boxed_input_schema_says_it_takes_only_the_input_argument() -> None:
    near = Router()
    near.register(FunctionAgent(handle, agent_id="util:handle:01"))
    gateway = RouterMCPServer(near, name="gw")
    try:
        async with Client(gateway.server) as client:
            (tool,) = (await client.list_tools()).tools
            extra = await client.call_tool("handle", {"input": {"a": 1}, "note": 1})
    finally:
        gateway.close()
        await near.aclose()
    # What the server refuses, its schema refuses too.
    assert tool.input_schema["additionalProperties"] is False
    assert extra.is_error
