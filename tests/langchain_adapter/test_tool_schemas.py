"""Reach tools valid for every model provider, stable, filtered, and honest about threads (issue 11)."""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable
from typing import Any, Literal

import pytest
import typing_extensions
from jsonschema import Draft202012Validator
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware, InterruptOnConfig
from langchain_core.messages import AIMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.tools import BaseTool, tool
from langchain_core.utils.function_calling import convert_to_openai_tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import MessagesState

from examples.langchain_demo.agents import scripted
from middleware import ReachResult, ResultStatus
from reach_adapters import Capability, FunctionAgent, Router
from reach_adapters.langchain import LangChainAgent, ReachToolkit
from reach_adapters.langchain.chat_schemas import MODEL_MESSAGE_SCHEMA
from reach_adapters.langchain.tools import called_thread
from tests.langchain_adapter.test_patterns import USER, approval_graph, chain_graph

pytestmark = pytest.mark.timeout(30)

NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")


# What says a schema node's type; and the arguments of reach_agent that take any JSON value, which
# OpenAI's strict mode cannot describe (docs/langchain.md says so).
TYPED = frozenset({"type", "$ref", "anyOf", "oneOf", "allOf", "enum", "const"})
ANY_JSON = frozenset({"reach_agent/properties/payload", "reach_agent/properties/resume"})
# What a nested object schema holds where its optional properties are shown nullable (a strict
# model sends every property of every object); a subset of nested_nulls' rule, kept apart so that
# the check does not just repeat the code it checks.
SAID = frozenset({"title", "description", "default", "examples"})
PLAIN = SAID | {"type", "properties", "required", "additionalProperties", "items", "minItems", "maxItems"}


def strict_problems(tool: BaseTool, *, typed: bool = False) -> list[str]:
    """What a strict function-calling check (OpenAI strict mode, Gemini) finds wrong with a tool;
    `typed`: also every value without a type and every object of any shape, which OpenAI's strict
    mode refuses (a recursive model's cycle, broken into a plain object, is one)."""
    schema = tool.tool_call_schema if isinstance(tool.tool_call_schema, dict) else tool.get_input_jsonschema()
    problems: list[str] = []
    checker = Draft202012Validator(schema)

    def resolve(ref: str) -> Any:
        """What a local `$ref` points to: the root (``#``), or a definition of either draft."""
        node: Any = schema
        for part in ref.removeprefix("#").strip("/").split("/") if ref != "#" else []:
            node = node.get(part, {}) if isinstance(node, dict) else {}
        return node

    def plain_parts(node: dict[str, Any]) -> list[tuple[str, Any]]:
        """The schemas in a plain place of `node` that are plain places too: where nested optionals
        must take null."""
        if node.keys() <= SAID | {"$ref"} and str(node.get("$ref", "")).startswith(
            ("#/$defs/", "#/definitions/")
        ):
            return [("$ref", resolve(node["$ref"]))]
        for key in ("anyOf", "oneOf"):
            options = [option for option in node.get(key, []) if option != {"type": "null"}]
            if node.keys() <= SAID | {key} and len(options) == 1:
                return [(key, options[0])]
        if not node.keys() <= PLAIN:
            return []
        parts = [(f"properties/{name}", field) for name, field in node.get("properties", {}).items()]
        return parts + [(key, node[key]) for key in ("items", "additionalProperties") if key in node]

    def nested_optionals(node: Any, path: str, seen: tuple[str, ...]) -> None:
        if not isinstance(node, dict) or len(seen) > 20:
            return
        if path != tool.name and node.keys() <= PLAIN:
            for name, field in node.get("properties", {}).items():
                takes_null = next(checker.descend(None, field), None) is None
                if name not in node.get("required", []) and not takes_null:
                    problems.append(f"{path}/properties/{name}: optional, yet strict models cannot send null")
        for where, part in plain_parts(node):
            nested_optionals(part, f"{path}/{where}", (*seen, where))

    def walk(node: Any, path: str, seen: tuple[str, ...]) -> None:
        if typed and isinstance(node, dict) and path not in ANY_JSON:
            # OpenAI's strict mode takes neither a value of any type nor an object of any shape.
            if not TYPED.intersection(node):
                problems.append(f"{path}: no type")
            if node.get("type") == "object" and "properties" not in node:
                problems.append(f"{path}: an object of any shape")
        if isinstance(node, dict):
            kinds = node.get("type")
            is_array = kinds == "array" or (isinstance(kinds, list) and "array" in kinds)
            if is_array and "items" not in node:
                problems.append(f"{path}: an array without items")
            properties = node.get("properties", {})
            unknown = sorted(set(node.get("required", [])) - set(properties))
            if unknown:
                problems.append(f"{path}: required {unknown} not among the properties")
            ref = node.get("$ref")
            if isinstance(ref, str):
                if ref in seen:
                    problems.append(f"{path}: a $ref cycle through {ref}")
                else:
                    walk(resolve(ref), f"{path}->{ref}", (*seen, ref))
            for key, value in node.items():
                if key in ("properties", "patternProperties") and isinstance(value, dict):
                    for name, field in value.items():  # names, not keywords: "definitions" is one
                        walk(field, f"{path}/{key}/{name}", seen)
                elif key not in ("$defs", "definitions"):
                    walk(value, f"{path}/{key}", seen)
        elif isinstance(node, list):
            for i, item in enumerate(node):
                walk(item, f"{path}[{i}]", seen)

    walk(schema, tool.name, ("#",))
    nested_optionals(schema, tool.name, ())
    # A strict-mode model sends every argument: an optional one must take null ("not given").
    required = set(schema.get("required", []))
    for name, field in schema.get("properties", {}).items():
        takes_null = next(Draft202012Validator(schema).descend(None, field), None) is None
        if name not in required and not takes_null:
            problems.append(f"{tool.name}/properties/{name}: optional, yet a strict model cannot send null")
    if not NAME.fullmatch(tool.name):
        problems.append(f"{tool.name}: a name model providers refuse")
    try:
        convert_to_openai_tool(tool, strict=True)
    except Exception as exc:
        problems.append(f"{tool.name}: strict conversion failed: {exc}")
    return problems


def test_every_derived_tool_passes_a_strict_function_calling_check(router: Router) -> None:
    prompt = ChatPromptTemplate.from_messages(
        [("system", "be brief"), MessagesPlaceholder("history"), ("user", "{q}")]
    )
    agent = create_agent(scripted(AIMessage("x")), tools=[], name="assist")
    runnables = {
        "llm:chat:01": scripted(AIMessage("x")),
        "p:prompt:01": prompt,
        "c:chain:01": prompt | scripted(AIMessage("x")),
        "a:assist:01": agent,
        "g:graph:01": chain_graph(MessagesState, lambda s: s).compile(),
    }
    for agent_id, runnable in runnables.items():
        router.register(LangChainAgent(runnable, agent_id=agent_id))
    tools = ReachToolkit(router).get_tools()
    assert len(tools) == 1 + len(runnables)
    problems = {tool.name: strict_problems(tool, typed=True) for tool in tools}
    assert problems == {tool.name: [] for tool in tools}


def test_an_object_of_any_shape_is_shown_with_its_properties(router: Router) -> None:
    """LangChain reads a tool's arguments from ``properties`` (`BaseTool.args`), which a schema
    of an object of any shape, the default for a capability declared without one, leaves out."""
    counts = {"type": "object", "additionalProperties": {"type": "integer"}}
    router.register(FunctionAgent(len, agent_id="t:ping:01", capabilities=[Capability(name="ping")]))
    count = Capability(name="count", input_schema=counts)
    router.register(FunctionAgent(len, agent_id="t:count:01", capabilities=[count]))
    tools = {tool.name: tool for tool in ReachToolkit(router, include_generic=False).get_tools()}
    assert (tools["ping"].args, tools["count"].args) == ({}, {})
    # As LangChain shows a tool of no arguments (`@tool def f()`): OpenAI refuses an object
    # schema without `properties`.
    assert tools["count"].args_schema == {**counts, "properties": {}}
    assert convert_to_openai_tool(tools["ping"])["function"]["parameters"] == {
        "type": "object",
        "properties": {},
    }
    assert [strict_problems(tool) for tool in tools.values()] == [[], []]


def test_models_are_shown_a_graphs_messages_as_a_plain_message_list(router: Router) -> None:
    router.register(LangChainAgent(create_agent(scripted(AIMessage("x")), tools=[]), agent_id="a:assist:01"))
    (tool,) = ReachToolkit(router, include_generic=False).get_tools()

    shown = tool.tool_call_schema
    assert isinstance(shown, dict)
    # The strings, single messages and pairs callers may send too are no form a model needs.
    # Optional, so null too: a strict-mode model sends every argument.
    assert shown["properties"]["messages"] == {
        "title": "Messages",
        "anyOf": [{"type": "array", "items": MODEL_MESSAGE_SCHEMA}, {"type": "null"}],
    }


def test_a_capability_registered_later_never_takes_an_existing_tools_name(router: Router) -> None:
    def tool_agent(agent_id: str, capability: str) -> FunctionAgent:
        return FunctionAgent(
            lambda payload: payload, agent_id=agent_id, capabilities=[Capability(name=capability)]
        )

    router.register(tool_agent("shop:a:01", "orders.v2"))
    toolkit = ReachToolkit(router)
    before = {tool.name for tool in toolkit.get_tools()}
    assert "orders_v2" in before
    router.register(tool_agent("shop:b:01", "orders_v2"))
    tools = {tool.name: tool for tool in toolkit.get_tools()}
    assert tools["orders_v2"].capability.name == "orders.v2"  # type: ignore[attr-defined]
    assert tools["orders_v2_2"].capability.name == "orders_v2"  # type: ignore[attr-defined]


def call(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "args": args, "id": "call-1", "type": "tool_call"}


async def test_the_reach_tools_tell_the_model_input_is_needed_and_resume_on_its_thread(
    router: Router,
) -> None:
    router.register(LangChainAgent(approval_graph(), agent_id="support:refund:01"))
    tools = {tool.name: tool for tool in ReachToolkit(router).get_tools()}
    thread: RunnableConfig = {"configurable": {"thread_id": "supervisor-1"}}
    asked = await tools["refund"].ainvoke(call("refund", {"messages": USER}), thread)
    assert asked.status == "success"
    assert "support:refund:01 needs input before it can go on" in asked.content
    assert "approve the refund of order 42?" in asked.content
    assert asked.artifact.status is ResultStatus.INPUT_REQUIRED
    args = {"target": "support:refund:01", "resume": "approved"}
    done = await tools["reach_agent"].ainvoke(call("reach_agent", args), thread)
    assert (done.status, done.content) == ("success", "refund approved")


async def test_the_calling_thread_travels_with_a_tool_call(router: Router) -> None:
    def reply(state: MessagesState) -> dict[str, Any]:
        said = [str(m.content) for m in state["messages"] if m.type == "human"]
        return {"messages": [AIMessage(" / ".join(said))]}

    graph = chain_graph(MessagesState, reply).compile(checkpointer=InMemorySaver())
    router.register(LangChainAgent(graph, agent_id="chat:memo:01"))
    (tool,) = ReachToolkit(router, include_generic=False).get_tools()
    for thread, said in (("alice", "a1"), ("bob", "b1"), ("alice", "a2")):
        args = {"messages": [{"role": "user", "content": said}]}
        config: RunnableConfig = {"configurable": {"thread_id": thread}}
        answer = await tool.ainvoke(call(tool.name, args), config)
    assert answer.content == "a1 / a2"
    no_thread = await tool.ainvoke(call(tool.name, {"messages": USER}))
    assert no_thread.status == "error"
    assert "thread_id" in no_thread.content


async def test_a_failed_tool_call_keeps_its_reach_result(router: Router) -> None:
    async def broken(payload: Any) -> Any:
        raise RuntimeError("the order store is down")

    router.register(
        FunctionAgent(broken, agent_id="shop:orders:01", capabilities=[Capability(name="orders")])
    )
    tools = {tool.name: tool for tool in ReachToolkit(router).get_tools()}
    for message in (
        await tools["orders"].ainvoke(call("orders", {})),
        await asyncio.to_thread(tools["reach_agent"].invoke, call("reach_agent", {"target": "orders"})),
    ):
        assert isinstance(message, ToolMessage)
        assert message.status == "error"
        assert isinstance(message.artifact, ReachResult)
        assert message.artifact.error == "the order store is down"


async def test_a_tool_call_refused_before_routing_keeps_a_reach_result(router: Router) -> None:
    calls: list[Any] = []

    async def lookup(order_id: str) -> str:
        calls.append(order_id)
        return "shipped"

    schema = {"type": "object", "properties": {"order_id": {"type": "string"}}, "required": ["order_id"]}
    orders = Capability(name="orders", input_schema=schema)
    router.register(FunctionAgent(lookup, agent_id="shop:orders:01", capabilities=[orders]))
    payroll = Capability(name="payroll")
    router.register(FunctionAgent(lambda payload: "paid", agent_id="hr:payroll:01", capabilities=[payroll]))
    # Any payload: its tool boxes it as the argument `input`, which a model may leave out.
    anything = Capability(name="anything", input_schema={})
    router.register(
        FunctionAgent(lambda payload: "seen", agent_id="shop:anything:01", capabilities=[anything])
    )
    tools = {tool.name: tool for tool in ReachToolkit(router, namespace="shop").get_tools()}
    refusals = {
        # A payload the capability's schema refuses, in async code and from a sync caller: as the
        # router says it of the same payload.
        (ResultStatus.INVALID, "PayloadValidationError"): [
            await tools["orders"].ainvoke(call("orders", {"order_id": 7})),
            await asyncio.to_thread(tools["orders"].invoke, call("orders", {"order_id": 7})),
        ],
        # The tools' own arguments: the box of a payload that is no object, and the generic tool's.
        (ResultStatus.INVALID, "InvalidMessageError"): [
            await tools["anything"].ainvoke(call("anything", {})),
            await tools["reach_agent"].ainvoke(
                call("reach_agent", {"target": "orders", "capability": "payroll"})
            ),
        ],
        # A target outside the toolkit's namespace.
        (ResultStatus.REJECTED, "PermissionDeniedError"): [
            await tools["reach_agent"].ainvoke(call("reach_agent", {"target": "payroll"}))
        ],
    }
    for (status, error_type), messages in refusals.items():
        for message in messages:
            assert isinstance(message, ToolMessage)
            assert message.status == "error"
            artifact = message.artifact
            assert isinstance(artifact, ReachResult)
            assert (artifact.status, artifact.error_type, artifact.fault) == (status, error_type, "caller")
            assert artifact.error is not None
            assert artifact.error in message.content
            assert not artifact.delivered
    assert calls == []
    routed = await router.route("orders", {"order_id": 7})
    assert (routed.status, routed.error_type) == (ResultStatus.INVALID, "PayloadValidationError")


async def test_a_tool_call_the_closed_router_refuses_keeps_a_reach_result() -> None:
    router = Router()
    router.register(
        FunctionAgent(
            lambda payload: "ok", agent_id="shop:orders:01", capabilities=[Capability(name="orders")]
        )
    )
    (tool,) = [tool for tool in ReachToolkit(router).get_tools() if tool.name == "orders"]
    await router.aclose()
    message = await tool.ainvoke(call("orders", {}))
    assert message.status == "error"
    assert isinstance(message.artifact, ReachResult)
    assert (message.artifact.status, message.artifact.fault) == (ResultStatus.ERROR, "router")
    assert message.artifact.error_type == "RouterClosedError"


async def test_the_toolkit_offers_the_subset_it_is_asked_for(router: Router) -> None:
    for agent_id, capability in (
        ("shop:orders:01", "orders_lookup"),
        ("shop:refunds:01", "orders_refund"),
        ("hr:payroll:01", "payroll"),
        ("hr:orders:01", "orders_audit"),
    ):
        router.register(
            FunctionAgent(
                lambda payload: "done", agent_id=agent_id, capabilities=[Capability(name=capability)]
            )
        )
    globbed = [t.name for t in ReachToolkit(router, capabilities=["orders_*"]).get_tools()]
    assert globbed == ["reach_agent", "orders_audit", "orders_lookup", "orders_refund"]
    shop = ReachToolkit(router, namespace="shop").get_tools()
    assert [t.name for t in shop] == ["reach_agent", "orders_lookup", "orders_refund"]
    capped = ReachToolkit(router, max_tools=2).get_tools()
    assert [t.name for t in capped] == ["reach_agent", "orders_audit", "orders_lookup"]
    generic = shop[0]
    # A capability only other namespaces declare is refused by the toolkit, as an agent of theirs
    # is: not the router's no_candidate, which reads as "try later" and names all capabilities.
    refused = await generic.ainvoke(call("reach_agent", {"target": "payroll"}))
    assert refused.status == "error"
    assert refused.content == "reach_agent may not reach 'payroll': no agent of namespace 'shop' declares it"
    outside = await generic.ainvoke(call("reach_agent", {"target": "hr:payroll:01"}))
    assert "only agents of namespace 'shop'" in outside.content
    inside = await generic.ainvoke(call("reach_agent", {"target": "orders_lookup"}))
    assert inside.content == "done"
    # A name the other namespace shares is reached in the toolkit's namespace only.
    router.register(
        FunctionAgent(
            lambda payload: "hr", agent_id="hr:lookup:01", capabilities=[Capability(name="orders_lookup")]
        )
    )
    answers = {
        (await generic.ainvoke(call("reach_agent", {"target": "orders_lookup"}))).content for _ in range(6)
    }
    assert answers == {"done"}
    orders_only = ReachToolkit(router, capabilities=["orders_*"]).get_tools()[0]
    by_name = await orders_only.ainvoke(call("reach_agent", {"target": "payroll"}))
    by_id = await orders_only.ainvoke(call("reach_agent", {"target": "hr:payroll:01"}))
    for message in (by_name, by_id):
        assert message.status == "error"
        assert "toolkit offers" in message.content


def test_bad_toolkit_filters_say_what_is_wrong(router: Router) -> None:
    from reach_adapters import InvalidDeclarationError

    with pytest.raises(InvalidDeclarationError, match="max_tools"):
        ReachToolkit(router, max_tools=-1)
    with pytest.raises(InvalidDeclarationError, match="namespace"):
        ReachToolkit(router, namespace="")
    # A misspelt option is named, with the right ones, rather than dropped.
    for misspelt in ("max_tool", "capabilites", "handle_tool_errors", "bogus"):
        with pytest.raises(InvalidDeclarationError) as raised:
            ReachToolkit(router, **{misspelt: 1})
        assert f"field '{misspelt}': Extra inputs are not permitted" in str(raised.value)
        assert "the options are ['capabilities', 'handle_tool_error'," in str(raised.value)


async def test_sync_lambdas_keep_working(router: Router) -> None:
    router.register(LangChainAgent(RunnableLambda(str.upper, name="upper"), agent_id="text:upper:01"))
    assert (await router.route("upper", "x")).payload == "X"


def test_tuples_and_recursive_inputs_pass_the_strict_check_too(router: Router) -> None:
    from pydantic import BaseModel

    class Node(BaseModel):
        name: str
        children: list[Node] = []

    class Chat(typing_extensions.TypedDict):
        chat_history: list[tuple[str, str]]

    def tree(node: Node) -> str:
        return node.name

    def pairs(state: Chat) -> int:
        return len(state["chat_history"])

    router.register(LangChainAgent(RunnableLambda(tree).with_types(input_type=Node), agent_id="t:tree:01"))
    router.register(LangChainAgent(RunnableLambda(pairs).with_types(input_type=Chat), agent_id="t:pairs:01"))
    tools = ReachToolkit(router).get_tools()
    assert {tool.name: strict_problems(tool) for tool in tools} == {tool.name: [] for tool in tools}


def test_a_field_named_like_a_schema_keyword_is_shown_to_models(router: Router) -> None:
    from pydantic import BaseModel

    class Glossary(BaseModel):
        term: str
        definitions: list[str]
        properties: dict[str, str] = {}

    glossary = RunnableLambda(lambda entry: entry["term"], name="glossary").with_types(input_type=Glossary)
    router.register(LangChainAgent(glossary, agent_id="kb:glossary:01"))
    tool = next(tool for tool in ReachToolkit(router).get_tools() if tool.name == "glossary")
    assert isinstance(tool.tool_call_schema, dict)
    assert set(tool.tool_call_schema["properties"]) == {"term", "definitions", "properties"}
    assert strict_problems(tool) == []
    strict = convert_to_openai_tool(tool, strict=True)["function"]["parameters"]
    assert strict["properties"]["definitions"] == {"type": "array", "items": {"type": "string"}}


def test_draft_07_definitions_and_root_references_pass_the_strict_check_too(router: Router) -> None:
    kids = {"type": "array", "items": {"$ref": "#/definitions/Node"}}
    node = {"type": "object", "properties": {"name": {"type": "string"}, "kids": kids}}
    draft_07 = {
        "type": "object",
        "properties": {"node": {"$ref": "#/definitions/Node"}},
        "definitions": {"Node": node},
    }
    rooted = {
        "type": "object",
        "properties": {"name": {"type": "string"}, "kids": {"type": "array", "items": {"$ref": "#"}}},
    }
    capabilities = [
        Capability(name="tree_draft07", input_schema=draft_07),
        Capability(name="tree_root", input_schema=rooted),
    ]
    router.register(FunctionAgent(lambda payload: "ok", agent_id="fs:tree:01", capabilities=capabilities))
    tools = ReachToolkit(router).get_tools()
    assert {tool.name: strict_problems(tool) for tool in tools} == {tool.name: [] for tool in tools}


def test_references_to_any_json_pointer_pass_the_strict_check_too(router: Router) -> None:
    # zod-to-json-schema's default: a recursive part is referred to by its path.
    kids = {"type": "array", "items": {"$ref": "#/properties/tree"}}
    tree = {"type": "object", "properties": {"name": {"type": "string"}, "kids": kids}}
    zod = {"type": "object", "properties": {"tree": tree}, "required": ["tree"]}
    # A pointer into a definition, from inside what it points to.
    child = {"type": "object", "properties": {"again": {"$ref": "#/$defs/Part/properties/child"}}}
    inner = {
        "type": "object",
        "properties": {"part": {"$ref": "#/$defs/Part"}, "name": {"type": "string"}},
        "$defs": {"Part": {"type": "object", "properties": {"child": child}}},
    }
    capabilities = [
        Capability(name="tree_zod", input_schema=zod),
        Capability(name="tree_inner", input_schema=inner),
    ]
    router.register(FunctionAgent(lambda payload: "ok", agent_id="fs:tree:01", capabilities=capabilities))
    tools = {tool.name: tool for tool in ReachToolkit(router).get_tools()}
    assert {name: strict_problems(tool) for name, tool in tools.items()} == {name: [] for name in tools}
    # Only the reference that closes the cycle is cut: the way into it stays.
    shown = tools["tree_inner"].tool_call_schema
    assert isinstance(shown, dict)
    assert shown["properties"]["part"] == {"anyOf": [{"$ref": "#/$defs/Part"}, {"type": "null"}]}
    # The cut reference is a plain object; `child` and `again`, optional, take null (a strict model
    # sends them).
    again = {"anyOf": [{"type": "object"}, {"type": "null"}]}
    child_shown = {"type": "object", "properties": {"again": again}}
    assert shown["$defs"]["Part"]["properties"]["child"] == {"anyOf": [child_shown, {"type": "null"}]}


async def test_reach_agent_takes_nulls_for_what_it_does_not_need(router: Router) -> None:
    router.register(LangChainAgent(RunnableLambda(str.upper, name="upper"), agent_id="text:upper:01"))
    generic = ReachToolkit(router).get_tools()[0]
    # What a strict-mode model sends: every argument, the unused ones null.
    args = {"target": "upper", "payload": "hi", "capability": None, "resume": None}
    answer = await generic.ainvoke(call("reach_agent", args))
    assert (answer.status, answer.content) == ("success", "HI")


def files_agent(mode: Literal["batched", "per_call"] = "batched") -> Any:
    """A create_agent agent that asks a human before it deletes a file."""

    @tool
    def delete_file(path: str) -> str:
        """Delete a file."""
        return f"deleted {path}"

    model = scripted(
        AIMessage("", tool_calls=[{"name": "delete_file", "args": {"path": "r.txt"}, "id": "d1"}]),
        AIMessage("file deleted"),
        repeat=True,
    )
    allowed: InterruptOnConfig = {"allowed_decisions": ["approve", "reject"]}
    approval = HumanInTheLoopMiddleware(interrupt_on={"delete_file": allowed}, interrupt_mode=mode)
    return create_agent(
        model, tools=[delete_file], name="files", middleware=[approval], checkpointer=InMemorySaver()
    )


DELETE = {"messages": [{"role": "user", "content": "delete r.txt"}]}


async def test_the_model_is_shown_the_shape_an_answer_must_take(router: Router) -> None:
    router.register(LangChainAgent(files_agent("per_call"), agent_id="ops:files:01"))
    tools = {tool.name: tool for tool in ReachToolkit(router).get_tools()}
    thread: RunnableConfig = {"configurable": {"thread_id": "boss-1"}}
    asked = await tools["files"].ainvoke(call("files", DELETE), thread)
    (pending,) = asked.artifact.extra["interrupts"]
    decisions = [option["$ref"] for option in pending["response_schema"]["oneOf"]]
    assert decisions == ["#/$defs/ApproveDecision", "#/$defs/RejectDecision"]
    assert "The answer must match this JSON Schema: " in asked.content
    assert '"const": "approve"' in asked.content
    # A model that answers in that shape:
    args = {"target": "ops:files:01", "resume": {"type": "approve"}}
    done = await tools["reach_agent"].ainvoke(call("reach_agent", args), thread)
    assert (done.status, done.content) == ("success", "file deleted")


async def test_without_reach_agent_the_model_is_not_told_to_resume_with_it(router: Router) -> None:
    router.register(LangChainAgent(files_agent(), agent_id="ops:files:01"))
    (files,) = ReachToolkit(router, include_generic=False).get_tools()
    thread: RunnableConfig = {"configurable": {"thread_id": "boss-1"}}
    asked = await files.ainvoke(call("files", DELETE), thread)
    assert asked.artifact.status is ResultStatus.INPUT_REQUIRED
    assert "reach_agent" not in asked.content
    assert "None of your tools can answer it" in asked.content
    # Whoever runs the model answers, on the thread the tool gave the agent.
    done = await router.route(
        "files",
        None,
        resume={"decisions": [{"type": "approve"}]},
        configurable={"thread_id": called_thread("boss-1", "files")},
    )
    assert (done.status, done.payload) == (ResultStatus.OK, "file deleted")
    # With reach_agent offered, the model is told to answer through it.
    offered = (
        await ReachToolkit(router)
        .get_tools()[1]
        .ainvoke(call("files", DELETE), {"configurable": {"thread_id": "boss-2"}})
    )
    assert "(with reach_agent: target 'ops:files:01', capability 'files')" in offered.content


async def test_max_tools_keeps_the_tools_an_agent_was_given(router: Router) -> None:
    def serving(agent_id: str, capability: str) -> FunctionAgent:
        return FunctionAgent(
            lambda payload: "done", agent_id=agent_id, capabilities=[Capability(name=capability)]
        )

    for agent_id, capability in (("shop:orders:01", "orders"), ("hr:payroll:01", "payroll")):
        router.register(serving(agent_id, capability))
    toolkit = ReachToolkit(router, max_tools=2)
    assert [tool.name for tool in toolkit.get_tools()] == ["reach_agent", "orders", "payroll"]
    # A capability registered later, first by name, waits for a free place.
    router.register(serving("ops:audit:01", "audit"))
    assert [tool.name for tool in toolkit.get_tools()] == ["reach_agent", "orders", "payroll"]
    await router.deregister("hr:payroll:01")
    assert [tool.name for tool in toolkit.get_tools()] == ["reach_agent", "audit", "orders"]
    router.register(serving("hr:payroll:01", "payroll"))
    assert [tool.name for tool in toolkit.get_tools()] == ["reach_agent", "audit", "orders"]


def said(text: str) -> Callable[[Any], str]:
    """An agent function that answers with `text`, whatever it is asked."""
    return lambda payload: text


async def test_the_toolkit_keeps_to_several_namespaces(router: Router) -> None:
    for agent_id, capability in (
        ("shop:orders:01", "orders_lookup"),
        ("billing:invoice:01", "invoice"),
        ("billing:lookup:01", "orders_lookup"),
        ("hr:payroll:01", "payroll"),
    ):
        router.register(
            FunctionAgent(said(agent_id), agent_id=agent_id, capabilities=[Capability(name=capability)])
        )
    tools = {tool.name: tool for tool in ReachToolkit(router, namespaces=["shop", "billing"]).get_tools()}
    assert sorted(tools) == ["invoice", "orders_lookup", "reach_agent"]
    generic = tools["reach_agent"]
    # A capability both declare is reached in the first namespace listed, by either tool.
    for _ in range(4):
        assert (await tools["orders_lookup"].ainvoke(call("orders_lookup", {}))).content == "shop:orders:01"
        by_name = await generic.ainvoke(call("reach_agent", {"target": "orders_lookup"}))
        assert by_name.content == "shop:orders:01"
    invoice = await generic.ainvoke(call("reach_agent", {"target": "invoice"}))
    assert invoice.content == "billing:invoice:01"
    # The namespace is chosen at each call, not when the tool was made: once shop's agent has
    # left, the tool the model holds reaches billing's.
    await router.deregister("shop:orders:01", drain_timeout=5)
    assert (await tools["orders_lookup"].ainvoke(call("orders_lookup", {}))).content == "billing:lookup:01"
    outside = await generic.ainvoke(call("reach_agent", {"target": "hr:payroll:01"}))
    assert "only agents of namespaces ['shop', 'billing'] are offered" in outside.content
    # A capability only other namespaces declare is refused by the toolkit, as an agent of theirs
    # is: not the router's no_candidate, which reads as "try later" and names all capabilities.
    refused = await generic.ainvoke(call("reach_agent", {"target": "payroll"}))
    assert refused.status == "error"
    assert (
        refused.content
        == "reach_agent may not reach 'payroll': no agent of namespaces ['shop', 'billing'] declares it"
    )
    single = {tool.name: tool for tool in ReachToolkit(router, namespace="billing").get_tools()}
    unknown = await single["reach_agent"].ainvoke(call("reach_agent", {"target": "nothing"}))
    assert (
        unknown.content == "reach_agent may not reach 'nothing': no agent of namespace 'billing' declares it"
    )
    from reach_adapters import InvalidDeclarationError

    with pytest.raises(InvalidDeclarationError, match="namespace \\(one\\) or namespaces \\(several\\)"):
        ReachToolkit(router, namespace="shop", namespaces=["billing"])
    with pytest.raises(InvalidDeclarationError, match="namespaces"):
        ReachToolkit(router, namespaces=[])


async def test_a_namespace_tool_shows_the_schema_its_namespace_declares(router: Router) -> None:
    """Two namespaces declaring one capability name with different schemas: the toolkit kept to
    one shows (and checks arguments against) that namespace's schema, not the first registered."""
    skus = {"type": "object", "properties": {"sku": {"type": "string"}}, "required": ["sku"]}
    orders = {"type": "object", "properties": {"order_id": {"type": "integer"}}, "required": ["order_id"]}

    def order(order_id: int) -> str:
        return f"order {order_id}"

    router.register(
        FunctionAgent(
            said("sku"),
            agent_id="shop:lookup:01",
            capabilities=[Capability(name="lookup", input_schema=skus)],
        )
    )
    router.register(
        FunctionAgent(
            order, agent_id="billing:lookup:01", capabilities=[Capability(name="lookup", input_schema=orders)]
        )
    )
    for options in ({"namespace": "billing"}, {"namespaces": ["billing", "shop"]}):
        tools = {tool.name: tool for tool in ReachToolkit(router, **options).get_tools()}
        assert tools["lookup"].args == {"order_id": {"type": "integer"}}, options
        assert (await tools["lookup"].ainvoke(call("lookup", {"order_id": 7}))).content == "order 7"
    # With no usable agent of its namespaces declaring it, the capability is not offered.
    await router.deregister("billing:lookup:01", drain_timeout=5)
    assert "lookup" not in {tool.name for tool in ReachToolkit(router, namespace="billing").get_tools()}
    shop = {tool.name: tool for tool in ReachToolkit(router, namespaces=["billing", "shop"]).get_tools()}
    assert shop["lookup"].args == {"sku": {"type": "string"}}


async def shout(payload: str) -> str:
    """Shout a text."""
    return payload.upper()


async def test_a_function_of_a_text_payload_is_shown_taking_text_and_gets_text(router: Router) -> None:
    """The tool of a ``payload: str`` function takes the text as its ``input`` argument, as for
    any capability whose input is not an object; it used to take any object, which the function
    got as a dict and failed on, as the agent's fault."""
    router.register(FunctionAgent(shout, agent_id="t:shout:01"))
    (shouting,) = ReachToolkit(router, include_generic=False).get_tools()
    assert shouting.tool_call_schema == {
        "type": "object",
        "properties": {"input": {"type": "string"}},
        "required": ["input"],
        "description": "Shout a text.",
    }
    assert strict_problems(shouting, typed=True) == []
    answer = await shouting.ainvoke(call("shout", {"input": "hi"}))
    assert (answer.status, answer.content) == ("success", "HI")
