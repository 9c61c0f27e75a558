"""Optional properties of nested objects take null in the schemas models are shown, and that null
(a strict-mode model's "not given") is dropped before the arguments are checked and routed."""

from __future__ import annotations

from typing import Any

import pytest
import typing_extensions
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool

from middleware import ReachResult
from reach_adapters import Capability, FunctionAgent, Router
from reach_adapters.langchain import LangChainAgent, ReachToolkit
from tests.langchain_adapter.test_patterns import chain_graph
from tests.langchain_adapter.test_tool_schemas import call, strict_problems

pytestmark = pytest.mark.timeout(30)

NULL = {"type": "null"}


def echo_tools(router: Router, **schemas: dict[str, Any]) -> dict[str, BaseTool]:
    """The capability tools of an agent that answers each capability with the payload it got."""
    capabilities = [Capability(name=name, input_schema=schema) for name, schema in schemas.items()]
    router.register(FunctionAgent(lambda payload: payload, agent_id="t:echo:01", capabilities=capabilities))
    return {tool.name: tool for tool in ReachToolkit(router, include_generic=False).get_tools()}


async def routed(tool: BaseTool, args: dict[str, Any]) -> Any:
    """What the agent got for a tool call with `args` (the call must succeed)."""
    answer = await tool.ainvoke(call(tool.name, args))
    assert answer.status == "success", answer.content
    assert isinstance(answer.artifact, ReachResult)
    return answer.artifact.payload


async def test_a_nested_optional_object_field_takes_null_and_the_agent_never_gets_it(router: Router) -> None:
    filters = {"type": "object", "properties": {"since": {"type": "string"}, "limit": {"type": "integer"}}}
    properties = {"q": {"type": "string"}, "filters": filters}
    schema = {"type": "object", "properties": properties, "required": ["q"]}
    tool = echo_tools(router, search=schema)["search"]
    assert strict_problems(tool, typed=True) == []
    shown = tool.tool_call_schema
    assert isinstance(shown, dict)
    (nested, _) = shown["properties"]["filters"]["anyOf"]
    assert nested["properties"] == {
        "since": {"anyOf": [{"type": "string"}, NULL]},
        "limit": {"anyOf": [{"type": "integer"}, NULL]},
    }
    strict = convert_to_openai_tool(tool, strict=True)["function"]["parameters"]
    assert strict["properties"]["filters"]["anyOf"][0]["required"] == ["since", "limit"]
    # What a strict-mode model sends: every property of every object.
    got = await routed(tool, {"q": "x", "filters": {"since": None, "limit": None}})
    assert got == {"q": "x", "filters": {}}
    got = await routed(tool, {"q": "x", "filters": {"since": "2024-01-01", "limit": None}})
    assert got == {"q": "x", "filters": {"since": "2024-01-01"}}


class Filters(typing_extensions.TypedDict):
    topic: str
    since: typing_extensions.NotRequired[str]
    limit: typing_extensions.NotRequired[int]


class Search(typing_extensions.TypedDict):
    question: str
    filters: Filters


async def test_a_graph_state_with_a_nested_typed_dict_never_gets_the_nulls(router: Router) -> None:
    seen: list[dict[str, Any]] = []

    def step(state: Search) -> dict[str, Any]:
        seen.append(dict(state))
        return {}

    router.register(LangChainAgent(chain_graph(Search, step).compile(name="search"), agent_id="kb:search:01"))
    tools = {tool.name: tool for tool in ReachToolkit(router, include_generic=False).get_tools()}
    tool = tools["search"]
    assert strict_problems(tool) == []
    args = {"question": "refunds?", "filters": {"topic": "billing", "since": None, "limit": None}}
    await routed(tool, args)
    # The graph's state holds only what the model gave: no null it would read as a value.
    assert seen == [{"question": "refunds?", "filters": {"topic": "billing"}}]


async def test_a_list_of_objects_and_a_shared_definition_drop_the_nulls_everywhere(router: Router) -> None:
    line = {"type": "object", "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}}}
    maybe_line = {"anyOf": [{"$ref": "#/$defs/Line"}, NULL]}
    lines = {"type": "array", "items": {"$ref": "#/$defs/Line"}}
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "lines": lines,
            "gift": {"$ref": "#/$defs/Line"},
            # A map's values are data: a null there is kept, the optionals inside dropped.
            "by_store": {"type": "object", "additionalProperties": maybe_line},
        },
        "required": ["lines", "gift", "by_store"],
        "$defs": {"Line": {**line, "required": ["sku"]}},
    }
    tool = echo_tools(router, order=schema)["order"]
    assert strict_problems(tool) == []
    shown = tool.tool_call_schema
    assert isinstance(shown, dict)
    # The definition is made nullable-aware once, where every reference to it reads it.
    assert shown["$defs"]["Line"]["properties"]["qty"] == {"anyOf": [{"type": "integer"}, NULL]}
    assert shown["$defs"]["Line"]["properties"]["sku"] == {"type": "string"}
    assert shown["properties"]["lines"] == lines
    args = {
        "lines": [{"sku": "a", "qty": None}, {"sku": "b", "qty": 2}],
        "gift": {"sku": "c", "qty": None},
        "by_store": {"north": {"sku": "d", "qty": None}, "south": None},
    }
    assert await routed(tool, args) == {
        "lines": [{"sku": "a"}, {"sku": "b", "qty": 2}],
        "gift": {"sku": "c"},
        "by_store": {"north": {"sku": "d"}, "south": None},
    }


async def test_a_nested_field_that_takes_null_keeps_it_as_a_value(router: Router) -> None:
    contact = {
        "type": "object",
        "properties": {"email": {"type": "string"}, "note": {"type": ["string", "null"]}},
    }
    schema = {"type": "object", "properties": {"contact": contact}, "required": ["contact"]}
    tool = echo_tools(router, save=schema)["save"]
    assert strict_problems(tool) == []
    shown = tool.tool_call_schema
    assert isinstance(shown, dict)
    assert shown["properties"]["contact"]["properties"] == {
        "email": {"anyOf": [{"type": "string"}, NULL]},
        "note": {"type": ["string", "null"]},
    }
    got = await routed(tool, {"contact": {"email": None, "note": None}})
    assert got == {"contact": {"note": None}}


async def test_options_that_disagree_keep_a_null_one_of_them_takes(router: Router) -> None:
    # A pointer to a nullable-made property (as zod-to-json-schema writes a reused schema) still
    # reads the schema without the null; and where anyOf options disagree, the null is a value.
    tree = {"type": "object", "properties": {"name": {"type": "string"}}}
    either = {
        "anyOf": [
            {"type": "object", "properties": {"k": {"type": ["string", "null"]}}, "required": ["k"]},
            {"type": "object", "properties": {"k": {"type": "string"}, "z": {"type": "string"}}},
        ]
    }
    schema = {
        "type": "object",
        "properties": {"tree": tree, "copy": {"$ref": "#/properties/tree"}, "either": either},
        "required": ["copy", "either"],
    }
    tool = echo_tools(router, plant=schema)["plant"]
    assert strict_problems(tool) == []
    shown = tool.tool_call_schema
    assert isinstance(shown, dict)
    assert shown["properties"]["copy"] == {"$ref": "#/properties/tree/anyOf/0"}
    args = {"tree": None, "copy": {"name": None}, "either": {"k": None, "z": None}}
    assert await routed(tool, args) == {"copy": {}, "either": {"k": None}}
