"""Optional properties of nested objects take null in the schemas models are shown, where the place
is simple, and that null (a strict-mode model's "not given") is dropped before the arguments are
checked and routed; anywhere else the schema is left exactly as it is, its nulls kept."""

from __future__ import annotations

from typing import Any

import pytest
import typing_extensions
from jsonschema import Draft202012Validator
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import BaseTool
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, ConfigDict

from middleware import ReachResult
from reach_adapters import Capability, FunctionAgent, Router
from reach_adapters.langchain import LangChainAgent, ReachToolkit, model_schemas, nested_nulls
from tests.langchain_adapter.test_patterns import chain_graph
from tests.langchain_adapter.test_tool_schemas import call, strict_problems

pytestmark = pytest.mark.timeout(60)

NULL = {"type": "null"}
STRING = {"type": "string"}
NULLABLE_STRING = {"anyOf": [STRING, NULL]}


def echo_tools(router: Router, **schemas: dict[str, Any]) -> dict[str, BaseTool]:
    """The capability tools of an agent that answers each capability with the payload it got."""
    capabilities = [Capability(name=name, input_schema=schema) for name, schema in schemas.items()]
    router.register(FunctionAgent(lambda payload: payload, agent_id="t:echo:01", capabilities=capabilities))
    return {tool.name: tool for tool in ReachToolkit(router, include_generic=False).get_tools()}


def shown_of(tool: BaseTool) -> dict[str, Any]:
    shown = tool.tool_call_schema
    assert isinstance(shown, dict)
    return shown


async def routed(tool: BaseTool, args: dict[str, Any]) -> Any:
    """What the agent got for a tool call with `args`, which the schema shown admits: the call must
    pass the capability's own check once the nulls are dropped."""
    assert Draft202012Validator(shown_of(tool)).is_valid(args), args
    answer = await tool.ainvoke(call(tool.name, args))
    assert answer.status == "success", answer.content
    assert isinstance(answer.artifact, ReachResult)
    return answer.artifact.payload


def refused(tool: BaseTool, args: dict[str, Any]) -> bool:
    """Whether the schema shown refuses `args` (a strict-mode model cannot send them)."""
    return not Draft202012Validator(shown_of(tool)).is_valid(args)


async def test_a_nested_optional_object_field_takes_null_and_the_agent_never_gets_it(router: Router) -> None:
    filters = {"type": "object", "properties": {"since": STRING, "limit": {"type": "integer"}}}
    schema = {"type": "object", "properties": {"q": STRING, "filters": filters}, "required": ["q"]}
    tool = echo_tools(router, search=schema)["search"]
    assert strict_problems(tool, typed=True) == []
    (nested, _) = shown_of(tool)["properties"]["filters"]["anyOf"]
    assert nested["properties"] == {"since": NULLABLE_STRING, "limit": {"anyOf": [{"type": "integer"}, NULL]}}
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
    tool = {tool.name: tool for tool in ReachToolkit(router, include_generic=False).get_tools()}["search"]
    assert strict_problems(tool) == []
    await routed(
        tool, {"question": "refunds?", "filters": {"topic": "billing", "since": None, "limit": None}}
    )
    # The graph's state holds only what the model gave: no null it would read as a value.
    assert seen == [{"question": "refunds?", "filters": {"topic": "billing"}}]


class Window(BaseModel):
    since: str | None = None
    limit: int = 10
    tag: str = "all"


class Query(BaseModel):
    q: str
    window: Window
    more: list[Window] = []


async def test_a_pydantic_argument_model_s_optional_fields_take_null(router: Router) -> None:
    got: list[Query] = []

    def search(query: Query) -> str:
        """Search."""
        got.append(query)
        return "ok"

    router.register(FunctionAgent(search, agent_id="t:search:01"))
    tool = ReachToolkit(router, include_generic=False).get_tools()[0]
    assert strict_problems(tool) == []
    window = shown_of(tool)["$defs"]["Window"]["properties"]
    # `since` takes null of its own: a value, kept; the others' null means "not given".
    assert window["since"]["anyOf"] == [STRING, NULL]
    assert window["limit"] == {"title": "Limit", "anyOf": [{"default": 10, "type": "integer"}, NULL]}
    convert_to_openai_tool(tool, strict=True)
    window_sent = {"since": None, "limit": None, "tag": None}
    args = {"query": {"q": "x", "window": window_sent, "more": [{"since": "2024", "limit": 3, "tag": None}]}}
    await routed(tool, args)
    assert got == [Query(q="x", window=Window(), more=[Window(since="2024", limit=3)])]


async def test_a_list_of_objects_a_map_s_values_and_a_shared_definition(router: Router) -> None:
    line = {"type": "object", "properties": {"sku": STRING, "qty": {"type": "integer"}}, "required": ["sku"]}
    lines = {"type": "array", "items": {"$ref": "#/$defs/Line"}}
    schema: dict[str, Any] = {
        "type": "object",
        "properties": {
            "lines": lines,
            "gift": {"$ref": "#/$defs/Line"},
            # A map's values are data: a null there is kept, the optionals inside dropped.
            "by_store": {
                "type": "object",
                "additionalProperties": {"anyOf": [{"$ref": "#/$defs/Line"}, NULL]},
            },
        },
        "required": ["lines", "gift", "by_store"],
        "$defs": {"Line": line},
    }
    tool = echo_tools(router, order=schema)["order"]
    assert strict_problems(tool) == []
    shown = shown_of(tool)
    # The definition is changed once, in place, where every reference to it reads it.
    assert shown["$defs"] == {
        "Line": {**line, "properties": {"sku": STRING, "qty": {"anyOf": [{"type": "integer"}, NULL]}}}
    }
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
    # Any, a nullable type, a $ref to a nullable type: their nulls are values.
    fields = {
        "email": STRING,
        "note": {"type": ["string", "null"]},
        "extra": {},
        "tag": {"$ref": "#/$defs/Tag"},
    }
    contact = {"type": "object", "properties": fields}
    schema = {
        "type": "object",
        "properties": {"contact": contact},
        "required": ["contact"],
        "$defs": {"Tag": {"type": ["string", "null"]}},
    }
    tool = echo_tools(router, save=schema)["save"]
    assert strict_problems(tool) == []
    assert shown_of(tool)["properties"]["contact"]["properties"] == {**fields, "email": NULLABLE_STRING}
    got = await routed(tool, {"contact": {"email": None, "note": None, "extra": None, "tag": None}})
    assert got == {"contact": {"note": None, "extra": None, "tag": None}}


async def test_tuple_positions_and_open_union_options_keep_their_nulls(router: Router) -> None:
    # Defect 1: a tuple's positions, and anyOf options another of which admits the null as a
    # value (an open object), are left as they are.
    first = {"type": "object", "properties": {"k": STRING, "n": {"type": ["string", "null"]}}}
    second = {"type": "object", "properties": {"k": {"type": ["string", "null"]}, "n": STRING}}
    pair = {"type": "array", "prefixItems": [first, second], "items": False}
    either = {"anyOf": [{"type": "object", "properties": {"k": STRING}}, {"type": "object"}]}
    schema = {
        "type": "object",
        "properties": {"pair": pair, "either": either},
        "required": ["pair", "either"],
    }
    tool = echo_tools(router, mix=schema)["mix"]
    shown = shown_of(tool)
    assert (shown["properties"]["pair"], shown["properties"]["either"]) == (pair, either)
    args = {"pair": [{"n": None}, {"k": None}], "either": {"k": None}}
    assert await routed(tool, args) == args


async def test_what_options_that_disagree_admit_passes_the_check(router: Router) -> None:
    # Defect 2: one option takes a null for `k`, another would be made to: both objects, so the
    # union is left as it is, and a null it admits is a value.
    either = {
        "anyOf": [
            {"type": "object", "properties": {"k": {"type": ["string", "null"]}}, "required": ["k"]},
            {"type": "object", "properties": {"k": STRING, "z": STRING}},
        ]
    }
    # Options a value's type tells apart are looked into: the object's optionals take null.
    apart = {
        "anyOf": [{"type": "object", "properties": {"k": STRING}}, {"type": "array", "items": STRING}, NULL]
    }
    schema = {
        "type": "object",
        "properties": {"either": either, "apart": apart},
        "required": ["either", "apart"],
    }
    tool = echo_tools(router, plant=schema)["plant"]
    assert strict_problems(tool) == []
    shown = shown_of(tool)
    assert shown["properties"]["either"] == either
    assert shown["properties"]["apart"]["anyOf"][0]["properties"] == {"k": NULLABLE_STRING}
    assert refused(tool, {"either": {"z": None}, "apart": None})
    # What the agent gets for calls the schema shown admits: only `apart`'s `k` null is dropped.
    kept: list[dict[str, Any]] = [
        {"either": {"k": "a", "z": None}, "apart": None},
        {"either": {"k": "a", "z": "b"}, "apart": ["x"]},
        {"either": {"k": None}, "apart": None},
    ]
    for args in kept:
        assert await routed(tool, args) == args
    assert await routed(tool, {"either": {"k": None}, "apart": {"k": None}}) == {
        "either": {"k": None},
        "apart": {},
    }


def chain(links: int) -> dict[str, Any]:
    """Arguments holding a chain of `links` definitions, each an object with an optional `v` and
    the next one."""
    defs = {
        f"D{i}": {"type": "object", "properties": {"v": STRING, "next": {"$ref": f"#/$defs/D{i + 1}"}}}
        for i in range(links)
    }
    defs[f"D{links}"] = {"type": "object", "properties": {"v": STRING}}
    return {
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/D0"}},
        "required": ["root"],
        "$defs": defs,
    }


async def test_a_chain_of_1500_definitions_keeps_every_tool(router: Router) -> None:
    # Defect 3: no RecursionError (there was one past 991 links, and 245 with 2e5503a); below the
    # depth looked into, the chain is shown as it is.
    tools = echo_tools(router, deep=chain(1500), plain={"type": "object", "properties": {"a": STRING}})
    assert set(tools) == {"deep", "plain"}
    tool = tools["deep"]
    shown = shown_of(tool)
    assert shown["$defs"]["D0"]["properties"]["v"] == NULLABLE_STRING
    assert shown["$defs"]["D1499"] == chain(1500)["$defs"]["D1499"]
    args = {"root": {"v": None, "next": {"v": "b", "next": {"v": None, "next": None}}}}
    assert await routed(tool, args) == {"root": {"next": {"v": "b", "next": {}}}}


async def test_a_nested_base_uri_is_left_as_it_is_and_its_references_read_in_it(router: Router) -> None:
    # Defect 4: inside `ext` (a base URI of its own), "#/$defs/Maybe" is ext's nullable Maybe, not
    # the root's: its null is a value.
    ext = {
        "$id": "https://example.com/ext",
        "type": "object",
        "properties": {"a": {"$ref": "#/$defs/Maybe"}, "b": STRING},
        "$defs": {"Maybe": {"type": ["string", "null"]}},
    }
    outer = {"type": "object", "properties": {"ext": ext, "c": STRING}, "required": ["ext"]}
    schema = {
        "type": "object",
        "properties": {"outer": outer},
        "required": ["outer"],
        "$defs": {"Maybe": STRING},
    }
    tool = echo_tools(router, based=schema)["based"]
    shown = shown_of(tool)
    assert shown["properties"]["outer"]["properties"] == {"ext": ext, "c": NULLABLE_STRING}
    args = {"outer": {"ext": {"a": None}, "c": None}}
    assert await routed(tool, args) == {"outer": {"ext": {"a": None}}}


async def test_references_from_places_left_as_they_are_still_read_the_original(router: Router) -> None:
    # Defect 5: $refs under patternProperties, not, if/then/else and allOf keep resolving, to what
    # they read before, while the places made nullable read a copy of the definition.
    line = {"type": "object", "properties": {"sku": STRING, "qty": {"type": "integer"}}, "required": ["sku"]}
    odd = {
        "type": "object",
        "patternProperties": {"^x-": {"$ref": "#/$defs/Line"}},
        "not": {"$ref": "#/$defs/Line"},
        "if": {"required": ["x-1"]},
        "then": {"properties": {"x-1": {"$ref": "#/$defs/Line"}}},
        "else": {"properties": {"y": {"allOf": [{"$ref": "#/$defs/Line"}]}}},
    }
    schema = {
        "type": "object",
        "properties": {"line": {"$ref": "#/$defs/Line"}, "odd": odd},
        "required": ["line", "odd"],
        "$defs": {"Line": line},
    }
    tool = echo_tools(router, odd=schema)["odd"]
    convert_to_openai_tool(tool, strict=True)
    shown = shown_of(tool)
    assert shown["properties"]["odd"] == odd
    assert shown["$defs"]["Line"] == line
    assert shown["properties"]["line"] == {"$ref": "#/$defs/Line_nullable"}
    assert shown["$defs"]["Line_nullable"]["properties"]["qty"] == {"anyOf": [{"type": "integer"}, NULL]}
    assert refused(tool, {"line": {"sku": "a"}, "odd": {"x-1": {"sku": "b", "qty": None}}})
    assert refused(tool, {"line": {"sku": "a"}, "odd": {"y": {"sku": "b", "qty": None}}})
    args = {"line": {"sku": "a", "qty": None}, "odd": {"x-1": {"sku": "b"}, "y": {"sku": "c", "qty": 2}}}
    assert await routed(tool, args) == {**args, "line": {"sku": "a"}}


async def test_a_property_required_through_all_of_is_not_made_nullable(router: Router) -> None:
    # Defect 6: an object with allOf is left as it is, the root's too.
    item = {"type": "object", "properties": {"a": STRING, "b": STRING}, "allOf": [{"required": ["a"]}]}
    root = {"type": "object", "properties": {"item": item, "q": STRING}, "allOf": [{"required": ["q"]}]}
    nested = {"type": "object", "properties": {"item": item}, "required": ["item"]}
    tools = echo_tools(router, rooted=root, nested=nested)
    assert shown_of(tools["rooted"])["properties"] == root["properties"]
    assert shown_of(tools["nested"])["properties"]["item"] == item
    assert await routed(tools["nested"], {"item": {"a": "x"}}) == {"item": {"a": "x"}}
    assert refused(tools["nested"], {"item": {"a": None}})


async def test_a_json_pointer_to_a_property_made_nullable_reads_it_without_the_null(router: Router) -> None:
    # zod-to-json-schema's reuse of a schema: a pointer to the place of its first use.
    address = {"type": "object", "properties": {"street": STRING, "city": STRING}, "required": ["city"]}
    schema = {
        "type": "object",
        "properties": {"billing": address, "shipping": {"$ref": "#/properties/billing"}},
        "required": ["shipping"],
    }
    tool = echo_tools(router, ship=schema)["ship"]
    assert strict_problems(tool) == []
    assert refused(tool, {"billing": None, "shipping": None})
    args = {"billing": None, "shipping": {"street": None, "city": "Oslo"}}
    assert await routed(tool, args) == {"shipping": {"city": "Oslo"}}
    args = {"billing": {"street": None, "city": "Bergen"}, "shipping": {"street": "Main", "city": "Oslo"}}
    assert await routed(tool, args) == {
        "billing": {"city": "Bergen"},
        "shipping": {"street": "Main", "city": "Oslo"},
    }


LIMIT = {"type": "integer"}
NULLABLE_LIMIT = {"anyOf": [LIMIT, NULL]}
QUERY: dict[str, Any] = {"type": "object", "properties": {"q": STRING, "limit": LIMIT}, "required": ["q"]}


@pytest.mark.parametrize(
    "extra",
    [
        {"example": {"q": "x"}, "x-operation-id": "search"},
        {"$schema": "http://json-schema.org/draft-04/schema#", "id": "urn:search"},
        {"propertyNames": {"maxLength": 20}},
        {"unevaluatedProperties": False},
        {"patternProperties": {"^x-": STRING}},
        {"discriminator": {"propertyName": "q"}, "nullable": False},
    ],
)
async def test_keywords_a_left_out_key_leaves_true_keep_optionals_nullable(
    router: Router, extra: dict[str, Any]
) -> None:
    # Review defect 1: only keywords that read which keys are present together (or the value
    # another way) keep an object as it is; the root's, and a nested object's alike (which a
    # draft or a base URI of its own would keep as it is).
    nested = {key: value for key, value in extra.items() if key not in ("$schema", "id")}
    schema = {**QUERY, **extra, "properties": {**QUERY["properties"], "inner": {**QUERY, **nested}}}
    tool = echo_tools(router, search=schema)["search"]
    shown = shown_of(tool)
    assert shown["properties"]["limit"] == NULLABLE_LIMIT
    assert shown["properties"]["inner"]["anyOf"][0]["properties"]["limit"] == NULLABLE_LIMIT
    args = {"q": "x", "limit": None, "inner": {"q": "y", "limit": None}}
    assert await routed(tool, args) == {"q": "x", "inner": {"q": "y"}}


class Example(BaseModel):
    model_config = ConfigDict(json_schema_extra={"example": {"question": "hi"}, "x-category": "search"})
    question: str
    lang: str = "en"


async def test_a_pydantic_input_with_an_example_keeps_its_optionals_nullable(router: Router) -> None:
    runnable = RunnableLambda(lambda state: state, name="asker").with_types(input_type=Example)
    router.register(LangChainAgent(runnable, agent_id="r:asker:01"))
    (tool,) = ReachToolkit(router, include_generic=False).get_tools()
    shown = shown_of(tool)
    assert shown["x-category"] == "search"
    assert shown["properties"]["lang"]["anyOf"][-1] == NULL
    answer = await tool.ainvoke(call(tool.name, {"question": "q", "lang": None}))
    assert answer.status == "success", answer.content


async def test_keywords_that_read_the_keys_together_keep_the_object_as_it_is(router: Router) -> None:
    patterns = {"^l": {"minimum": 0}, "^i": {"minProperties": 2}}
    matched = {**QUERY, "patternProperties": patterns, "properties": {**QUERY["properties"], "inner": QUERY}}
    counted = {**QUERY, "minProperties": 2}
    tools = echo_tools(router, matched=matched, counted=counted)
    shown = shown_of(tools["matched"])
    # A key a pattern reads may be left out; nothing inside its value changes.
    assert shown["properties"]["inner"] == {"anyOf": [QUERY, NULL]}
    assert refused(tools["matched"], {"q": "x", "inner": {"q": "y", "limit": None}})
    assert await routed(tools["matched"], {"q": "x", "limit": None, "inner": None}) == {"q": "x"}
    assert shown_of(tools["counted"])["properties"] == QUERY["properties"]


Maybe = typing_extensions.TypeAliasType("Maybe", "Link | None")


class Link(BaseModel):
    v: str
    next: Maybe = None


async def test_a_cycle_cut_for_models_keeps_the_null_its_definition_takes(router: Router) -> None:
    # Review defect 2: for_models shows Link.next (a $ref to the nullable Maybe, closing a cycle)
    # as a plain object; the capability takes its null, which is a value.
    got: list[Any] = []

    def walk(head: Maybe, label: str) -> str:
        """Walk a list."""
        got.append(head)
        return "ok"

    router.register(FunctionAgent(walk, agent_id="t:walk:01"))
    (tool,) = ReachToolkit(router, include_generic=False).get_tools()
    assert shown_of(tool)["$defs"]["Link"]["properties"]["next"] == {"type": "object"}
    answer = await tool.ainvoke(call(tool.name, {"head": {"v": "a", "next": None}, "label": "x"}))
    assert answer.status == "success", answer.content
    assert got == [{"v": "a", "next": None}]


async def test_a_draft_07_reference_reads_no_sibling_type(router: Router) -> None:
    # Review defect 3: draft-07 ignores a $ref's siblings, so both options take objects.
    options = [{"type": "object", "properties": {"k": STRING}}, {"$ref": "#/definitions/B", "type": "string"}]
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"x": {"anyOf": options}},
        "required": ["x"],
        "definitions": {"B": {"type": "object", "properties": {"k": NULL}, "required": ["k"]}},
    }
    tool = echo_tools(router, seven=schema)["seven"]
    assert shown_of(tool)["properties"]["x"] == {"anyOf": options}
    answer = await tool.ainvoke(call(tool.name, {"x": {"k": None}}))
    assert answer.status == "success", answer.content
    assert answer.artifact.payload == {"x": {"k": None}}


async def test_a_pointer_to_a_boolean_schema_still_resolves(router: Router) -> None:
    # Review defect 4: the boolean schema pointed to is copied like any other.
    inner = {
        "type": "object",
        "properties": {"b": {"type": "object", "properties": {"c": True}}, "x": STRING},
    }
    schema = {
        "type": "object",
        "properties": {"a": inner, "d": {"$ref": "#/properties/a/properties/b/properties/c"}},
        "required": ["a"],
    }
    tool = echo_tools(router, pointing=schema)["pointing"]
    convert_to_openai_tool(tool, strict=True)
    assert shown_of(tool)["properties"]["a"]["properties"]["b"]["anyOf"][1] == NULL
    assert await routed(tool, {"a": {"b": None, "x": None}, "d": None}) == {"a": {}, "d": None}


class Item(BaseModel):
    id: int
    label: str | None = None


class Order(BaseModel):
    note: str = ""
    first: Item = Item(id=0)


async def test_data_keywords_are_never_read_as_schemas(router: Router) -> None:
    # Review defect 5: `id` in a default is no base URI; a `$ref` in const data is no reference.
    def place(orders: list[Order]) -> str:
        """Place."""
        return "ok"

    router.register(FunctionAgent(place, agent_id="t:place:01"))
    (tool,) = ReachToolkit(router, include_generic=False).get_tools()
    assert shown_of(tool)["$defs"]["Order"]["properties"]["note"]["anyOf"][-1] == NULL
    marker = {"const": {"$ref": "#/properties/a"}}
    schema = {
        "type": "object",
        "properties": {"a": QUERY, "b": {"$ref": "#/properties/a"}, "marker": marker},
        "required": ["b", "marker"],
    }
    consts = echo_tools(router, consts=schema)["consts"]
    assert shown_of(consts)["properties"]["marker"] == marker
    args = {"a": None, "b": {"q": "x", "limit": None}, "marker": {"$ref": "#/properties/a"}}
    assert await routed(consts, args) == {"b": {"q": "x"}, "marker": {"$ref": "#/properties/a"}}


def test_a_schema_is_worked_out_once_and_each_tool_gets_a_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    # Review defect 6: get_tools works each schema out once (replicas, every get_tools call).
    calls: list[dict[str, Any]] = []
    real = nested_nulls.nullable_optionals

    def counted(schema: dict[str, Any], original: dict[str, Any] | None = None) -> Any:
        calls.append(schema)
        return real(schema, original)

    monkeypatch.setattr(model_schemas, "nullable_optionals", counted)
    schema = {**QUERY, "title": "worked out once"}
    first, nulls = model_schemas.shown_to_models(schema)
    second, again = model_schemas.shown_to_models(dict(schema))
    assert len(calls) == 1
    assert first == second
    assert first is not second
    assert nulls is again
    assert first["properties"]["limit"] == NULLABLE_LIMIT


def test_the_schemas_worked_out_are_bounded_by_their_size(monkeypatch: pytest.MonkeyPatch) -> None:
    """The least recently used go first once the texts kept pass the budget; one larger than the
    whole budget is worked out and not kept."""
    calls: list[str] = []
    real = nested_nulls.nullable_optionals

    def counted(schema: dict[str, Any], original: dict[str, Any] | None = None) -> Any:
        calls.append(str(schema.get("title")))
        return real(schema, original)

    monkeypatch.setattr(model_schemas, "nullable_optionals", counted)
    sized = model_schemas._WorkedOut(budget=2_000)
    monkeypatch.setattr(model_schemas, "_worked_out", sized)
    schemas = [{**QUERY, "title": f"schema {n}"} for n in range(8)]
    for schema in schemas:
        model_schemas.shown_to_models(schema)
        assert sized.size <= sized.budget
    kept = len(sized)
    assert 1 < kept < len(schemas)
    calls.clear()
    model_schemas.shown_to_models(schemas[-1])
    assert calls == []
    model_schemas.shown_to_models(schemas[0])
    assert calls == ["schema 0"]
    huge = {**QUERY, "title": "x" * 3_000}
    shown, _ = model_schemas.shown_to_models(huge)
    assert shown["properties"]["limit"] == NULLABLE_LIMIT
    assert len(sized) <= kept
    assert sized.size <= sized.budget


async def test_a_union_option_cut_for_models_is_not_typed_by_what_is_left_of_it(router: Router) -> None:
    """`for_models` shows a reference that closes a cycle as a plain object; the definition it
    stands for also takes arrays, so the union is not told apart by type, and the array option's
    objects keep the nulls the capability's own schema takes."""
    pair = {"type": "object", "properties": {"c": STRING, "a": {"type": "integer"}}, "required": ["c"]}
    schema = {
        "type": "object",
        "properties": {"p": {"$ref": "#/$defs/B"}},
        "required": ["p"],
        "$defs": {
            "B": {
                "anyOf": [
                    {"type": "array", "items": {}},
                    {"type": "object", "properties": {"x": {"$ref": "#/$defs/A"}}},
                ]
            },
            "A": {"anyOf": [{"$ref": "#/$defs/B"}, {"type": "array", "items": pair}]},
        },
    }
    tool = echo_tools(router, cut=schema)["cut"]
    # The pair's `a` is shown as the capability declares it; a null a model sends there anyway
    # is the capability's own to take, as a value.
    assert shown_of(tool)["$defs"]["A"]["anyOf"][1]["items"] == pair
    args = {"p": {"x": [{"c": "z", "a": None}]}}
    answer = await tool.ainvoke(call(tool.name, args))
    assert isinstance(answer.artifact, ReachResult)
    assert answer.artifact.payload == args
