"""The sixth review: a successful run never ends in `OutputValidationError`, and what a runnable's
own `ainvoke` takes the routed call takes. Runnables typed on one message, states whose
``messages`` may be missing, pydantic outputs holding messages, nested `typing.TypedDict` states,
optional state keys under strict function calling."""

# No `from __future__ import annotations`: LangChain reads a RunnableLambda's types from its
# function's annotations, and cannot resolve them as strings.
import dataclasses
import datetime
import json
import operator
import typing
from typing import Annotated, Any

import pytest
from langchain_core.messages import AIMessage, AnyMessage, BaseMessage, HumanMessage
from langchain_core.prompts import PromptTemplate
from langchain_core.runnables import RunnableLambda, RunnableParallel
from langchain_core.utils.function_calling import convert_to_openai_tool
from pydantic import BaseModel, RootModel
from typing_extensions import TypedDict

from middleware import Fault, ResultStatus
from reach_adapters import Capability, FunctionAgent, Router
from reach_adapters.langchain import LangChainAgent, ReachToolkit
from reach_adapters.langchain.chat_schemas import MESSAGE_SCHEMA
from tests.langchain_adapter.test_patterns import chain_graph
from tests.langchain_adapter.test_tool_schemas import call

pytestmark = pytest.mark.timeout(30)

CHAT_TEXT = {"type": ["string", "null"]}


def breaker_of(router: Router, agent_id: str) -> str:
    return next(entry.breaker.value for entry in router.catalog() if entry.agent_id == agent_id)


def answer(question: str) -> AIMessage:
    """Answer a question."""
    return AIMessage(f"42 is the answer to {question!r}")


def any_answer(question: str) -> BaseMessage:
    """Answer a question, as any kind of message."""
    return AIMessage(f"it depends on {question!r}")


async def test_a_runnable_typed_to_return_one_message_answers_with_its_text(router: Router) -> None:
    router.register(LangChainAgent(RunnableLambda(answer), agent_id="qa:answer:01"))
    router.register(LangChainAgent(RunnableLambda(any_answer), agent_id="qa:any:01"))
    declared = {cap.name: cap.output_schema for entry in router.catalog() for cap in entry.capabilities}
    assert declared == {"answer": CHAT_TEXT, "any_answer": CHAT_TEXT}
    for _ in range(3):
        result = await router.route("answer", "why")
        assert (result.status, result.error_type) == (ResultStatus.OK, None)
        assert result.payload == "42 is the answer to 'why'"
        assert result.extra["output"] == {"role": "assistant", "content": "42 is the answer to 'why'"}
    assert (await router.route("any_answer", "when")).payload == "it depends on 'when'"
    assert breaker_of(router, "qa:answer:01") == "closed"


def reply(message: HumanMessage) -> str:
    return f"you said {message.content}"


def any_reply(message: AnyMessage) -> str:
    return f"a {message.type} message said {message.content}"


async def test_a_runnable_typed_to_take_one_message_gets_a_message(router: Router) -> None:
    router.register(LangChainAgent(RunnableLambda(reply, name="reply"), agent_id="qa:reply:01"))
    router.register(LangChainAgent(RunnableLambda(any_reply, name="any_reply"), agent_id="qa:any:01"))
    (cap,) = next(entry for entry in router.catalog() if entry.agent_id == "qa:reply:01").capabilities
    assert cap.input_schema == MESSAGE_SCHEMA
    result = await router.route("reply", {"role": "user", "content": "hi"})
    assert (result.status, result.payload) == (ResultStatus.OK, "you said hi")
    # LangChain's own dump form is a message too.
    result = await router.route("any_reply", {"type": "ai", "content": "done"})
    assert (result.status, result.payload) == (ResultStatus.OK, "a ai message said done")


async def test_a_message_the_runnable_cannot_read_is_the_callers_mistake(router: Router) -> None:
    router.register(LangChainAgent(RunnableLambda(reply, name="reply"), agent_id="qa:reply:01"))
    # A tool message without tool_call_id passes the role/content schema, but is no message.
    result = await router.route("reply", {"role": "tool", "content": "42"})
    assert (result.status, result.fault) == (ResultStatus.INVALID, Fault.CALLER)
    assert "tool_call_id" in str(result.error)
    result = await router.route("reply", {"role": "boss", "content": "hi"})
    assert (result.status, result.fault) == (ResultStatus.INVALID, Fault.CALLER)
    assert breaker_of(router, "qa:reply:01") == "closed"


class Summary(TypedDict):
    messages: list[AnyMessage]  # no reducer: a call that does not write it gets none back
    topic: str
    summary: str


class Chat(TypedDict):
    messages: Annotated[list[AnyMessage], operator.add]
    topic: str


def summary_graph(state: type[Any]) -> Any:
    def summarize(s: Any) -> dict[str, Any]:
        if s.get("messages"):
            return {"messages": [*s["messages"], AIMessage(f"summary of {s['messages'][-1].content}")]}
        return {"summary": f"summary of {s.get('topic')}"}

    return chain_graph(state, summarize).compile()


async def test_a_state_that_may_come_back_without_messages_is_described_as_either(router: Router) -> None:
    router.register(LangChainAgent(summary_graph(Summary), agent_id="t:summarize:01"))
    (cap,) = router.catalog()[0].capabilities
    assert cap.output_schema is not None
    assert cap.output_schema["type"] == ["object", "string", "null"]
    for _ in range(3):
        result = await router.route("summarize", {"topic": "kettles"})
        assert (result.status, result.error_type) == (ResultStatus.OK, None)
        assert result.payload == {"topic": "kettles", "summary": "summary of kettles"}
    result = await router.route("summarize", {"messages": [{"role": "user", "content": "kettles"}]})
    assert (result.status, result.payload) == (ResultStatus.OK, "summary of kettles")
    assert breaker_of(router, "t:summarize:01") == "closed"


async def test_a_state_whose_messages_a_reducer_keeps_is_chat(router: Router) -> None:
    # A reducer's channel holds a list from the start: LangGraph always gives it back.
    router.register(LangChainAgent(summary_graph(Chat), agent_id="t:chat:01"))
    (cap,) = router.catalog()[0].capabilities
    assert cap.output_schema == CHAT_TEXT
    result = await router.route("chat", {"topic": "kettles"})
    assert (result.status, result.payload) == (ResultStatus.OK, None)


class Transcript(BaseModel):
    messages: list[BaseMessage]
    resolved: bool = False


@dataclasses.dataclass
class Ticket:
    messages: list[BaseMessage]
    queue: str


def handle(text: str) -> Transcript:
    return Transcript(messages=[HumanMessage(text), AIMessage("refunded")], resolved=True)


def file_ticket(text: str) -> Ticket:
    return Ticket(messages=[HumanMessage(text)], queue="refunds")


async def test_a_model_output_holding_messages_is_given_and_described_whole(router: Router) -> None:
    router.register(LangChainAgent(RunnableLambda(handle), agent_id="t:handle:01"))
    router.register(LangChainAgent(RunnableLambda(file_ticket), agent_id="t:ticket:01"))
    result = await router.route("handle", "kettle broken")
    assert (result.status, result.error_type) == (ResultStatus.OK, None)
    assert result.payload == {
        "messages": [
            {"role": "user", "content": "kettle broken"},
            {"role": "assistant", "content": "refunded"},
        ],
        "resolved": True,
    }
    result = await router.route("file_ticket", "kettle broken")
    assert (result.status, result.error_type) == (ResultStatus.OK, None)
    assert result.payload == {"messages": [{"role": "user", "content": "kettle broken"}], "queue": "refunds"}
    declared = {cap.name: cap.output_schema for entry in router.catalog() for cap in entry.capabilities}
    assert declared["handle"] is not None
    assert declared["handle"]["properties"]["messages"]["items"] == MESSAGE_SCHEMA


class Address(typing.TypedDict):
    city: str


class Handle:
    """A type pydantic has no JSON Schema for."""


class Order(typing.TypedDict):
    address: Address
    stops: list[Address]
    status: str
    handle: Handle


async def test_a_typing_typed_dict_state_is_described_key_by_key(router: Router) -> None:
    # Python 3.11: pydantic refuses typing.TypedDict classes, the state's and the nested ones.
    def ship(s: Any) -> dict[str, Any]:
        return {"status": f"shipping to {s['address']['city']}"}

    router.register(LangChainAgent(chain_graph(Order, ship).compile(), agent_id="shop:ship:01"))
    (cap,) = router.catalog()[0].capabilities
    address = {"$ref": "#/$defs/Address"}
    assert cap.input_schema["properties"] == {
        "address": address,
        "stops": {"type": "array", "items": address, "title": "Stops"},
        "status": {"type": "string", "title": "Status"},
        "handle": {},
    }
    assert cap.input_schema["$defs"]["Address"]["required"] == ["city"]
    tool = next(tool for tool in ReachToolkit(router).get_tools() if tool.name == "ship")
    answer = await tool.ainvoke(call("ship", {"address": {"city": "Oslo"}}))
    assert (answer.status, json.loads(answer.content)["status"]) == ("success", "shipping to Oslo")
    result = await router.route("ship", {"address": {"town": "Oslo"}})
    assert (result.status, result.fault) == (ResultStatus.INVALID, Fault.CALLER)


class Question(typing.TypedDict):
    question: str
    answer: str
    attempts: int
    note: str | None


async def test_a_strict_mode_model_may_leave_optional_state_keys_out_with_null(router: Router) -> None:
    def ask(s: Any) -> dict[str, Any]:
        return {
            "answer": s.get("answer") or f"answer to {s['question']}",
            "attempts": s.get("attempts", 0) + 1,
        }

    router.register(LangChainAgent(chain_graph(Question, ask).compile(), agent_id="qa:ask:01"))
    tool = next(tool for tool in ReachToolkit(router).get_tools() if tool.name == "ask")
    shown = convert_to_openai_tool(tool, strict=True)["function"]["parameters"]
    assert shown["required"] == ["question", "answer", "attempts", "note"]
    assert shown["properties"]["attempts"] == {"anyOf": [{"type": "integer"}, {"type": "null"}]}
    # What a strict-mode model sends: every argument, null for what it does not mean to give.
    args = {"question": "why?", "answer": None, "attempts": None, "note": None}
    answer = await tool.ainvoke(call("ask", args))
    assert answer.status == "success"
    # Null for a key that takes null is a value: it is written, the others are left out.
    assert json.loads(answer.content) == {
        "question": "why?",
        "answer": "answer to why?",
        "attempts": 1,
        "note": None,
    }
    answer = await tool.ainvoke(
        call("ask", {"question": "why?", "answer": None, "attempts": "two", "note": None})
    )
    assert answer.status == "error"
    assert "field 'attempts'" in str(answer.content)


class ChatMessage(BaseModel):
    """A chat app's own message record, named like LangChain's message class."""

    type: typing.Literal["text", "image"]
    content: str
    sender: str


class Patch(BaseModel):
    field: str
    value: int


def last_said(room: str) -> ChatMessage:
    return ChatMessage(type="text", content=f"hello {room}", sender="ada")


def post(message: ChatMessage) -> str:
    return f"{message.sender}: {message.content}"


def apply(patch: Patch) -> str:
    return f"{patch.field}={patch.value}"


async def test_a_model_of_ones_own_is_made_for_the_runnable_and_not_taken_for_a_message(
    router: Router,
) -> None:
    """A runnable typed to take a pydantic model gets the model made of the payload (LangChain
    hands it the input as given, and JSON is no model), and a model named like a LangChain message
    is no message."""
    for function, agent_id in ((last_said, "chat:last:01"), (post, "chat:post:01"), (apply, "ops:apply:01")):
        router.register(LangChainAgent(RunnableLambda(function), agent_id=agent_id))
    said = await router.route("last_said", "lobby")
    assert (said.status, said.payload) == (
        ResultStatus.OK,
        {"type": "text", "content": "hello lobby", "sender": "ada"},
    )
    posted = await router.route("post", {"type": "text", "content": "hi", "sender": "bob"})
    assert (posted.status, posted.payload) == (ResultStatus.OK, "bob: hi"), posted.error
    applied = await router.route("apply", {"field": "size", "value": 3})
    assert (applied.status, applied.payload) == (ResultStatus.OK, "size=3"), applied.error
    for _ in range(2):  # enough failures in a row to quarantine it, were they counted
        refused = await router.route("apply", {"field": "size", "value": "three"})
        assert (refused.status, refused.fault) == (ResultStatus.INVALID, Fault.CALLER), refused.error
    assert breaker_of(router, "ops:apply:01") == "closed"


def history(topic: str) -> list[BaseMessage]:
    return [] if topic == "none" else [AIMessage(f"about {topic}")]


class Settings(BaseModel):
    id: str
    value: Any = "unchanged"


def update(settings: Settings) -> dict[str, Any]:
    return settings.model_dump()


async def test_an_empty_message_list_and_a_null_an_argument_takes_are_given_as_they_are(
    router: Router,
) -> None:
    router.register(LangChainAgent(RunnableLambda(history), agent_id="chat:history:01"))
    router.register(LangChainAgent(RunnableLambda(update), agent_id="ops:update:01"))
    empty = await router.route("history", "none")
    assert (empty.status, empty.payload) == (ResultStatus.OK, []), empty.error
    said = await router.route("history", "kettles")
    assert (said.status, said.payload) == (ResultStatus.OK, "about kettles"), said.error
    # An optional argument of any type takes null as a value: the tool keeps it, as a route does.
    tools = {tool.name: tool for tool in ReachToolkit(router, include_generic=False).get_tools()}
    kept = await tools["update"].ainvoke(call("update", {"id": "1", "value": None}))
    assert json.loads(kept.content) == {"id": "1", "value": None}


class Query(BaseModel):
    question: str


class Visit(BaseModel):
    model_config = {"strict": True}
    when: datetime.datetime


@dataclasses.dataclass
class Point:
    x: int
    y: int


class Scores(RootModel[list[int]]):
    pass


def visit(v: Visit) -> str:
    return v.when.date().isoformat()


def norm(p: Point) -> int:
    return abs(p.x) + abs(p.y)


def total(scores: Scores) -> int:
    return sum(scores.root)


async def test_only_a_functions_own_input_type_is_made_and_any_json_form_of_it(router: Router) -> None:
    """`.with_types(input_type=...)` describes a runnable that takes dicts all the same (LangServe's
    way), so it is given the dict; a function's own type is made whatever its form: a strict
    model (JSON carries a datetime as text), a dataclass, a root model over a list."""
    prompt = PromptTemplate.from_template("Q: {question}") | RunnableLambda(lambda value: value.to_string())
    described = prompt.with_types(input_type=Query)  # type: ignore[arg-type]
    router.register(LangChainAgent(described, agent_id="qa:ask:01"))
    for function, agent_id in ((visit, "cal:visit:01"), (norm, "geo:norm:01"), (total, "stats:total:01")):
        router.register(LangChainAgent(RunnableLambda(function), agent_id=agent_id))
    asked = await router.route("ask", {"question": "hi"})
    assert (asked.status, asked.payload) == (ResultStatus.OK, "Q: hi"), asked.error
    seen = await router.route("visit", {"when": "2024-01-01T10:00:00"})
    assert (seen.status, seen.payload) == (ResultStatus.OK, "2024-01-01"), seen.error
    normed = await router.route("norm", {"x": -3, "y": 4})
    assert (normed.status, normed.payload) == (ResultStatus.OK, 7), normed.error
    summed = await router.route("total", [1, 2, 3])
    assert (summed.status, summed.payload) == (ResultStatus.OK, 6), summed.error


class Note(BaseModel):
    said: AnyMessage
    tag: str


def read(note: Note) -> str:
    return f"{note.tag}: {type(note.said).__name__} {note.said.content}"


def shown(value: Patch) -> str:
    return f"text: {value}"


def checked(patch: Patch) -> str:
    if patch.field == "crash":
        msg = "a bug in the agent's own code"
        raise TypeError(msg)
    return apply(patch)


async def test_a_typed_function_behind_fallbacks_parallel_steps_or_its_own_types_gets_its_input(
    router: Router,
) -> None:
    fallen = RunnableLambda(apply).with_fallbacks([RunnableLambda(lambda _: "fallback")])
    parallel = RunnableParallel(applied=RunnableLambda(apply))
    # Typed to take a model, yet declared (and written) to take any text: the declaration holds.
    declared: Any = RunnableLambda(shown).with_types(input_type=str)  # type: ignore[arg-type]
    for runnable, agent_id in (
        (fallen, "ops:fallen:01"),
        (parallel, "ops:parallel:01"),
        (RunnableLambda(read), "chat:read:01"),
        (RunnableLambda(checked), "ops:checked:01"),
    ):
        router.register(LangChainAgent(runnable, agent_id=agent_id))
    router.register(
        LangChainAgent(declared, agent_id="util:declared:01", capabilities=[{"name": "declared"}])
    )
    patch = {"field": "size", "value": 3}
    assert (await router.route("fallen", patch)).payload == "size=3"
    assert (await router.route("parallel", patch)).payload == {"applied": "size=3"}
    assert (await router.route("declared", "hello")).payload == "text: hello"
    # A message field in the role/content form the schema shows is made a message first.
    said = await router.route("read", {"said": {"role": "assistant", "content": "hi"}, "tag": "a"})
    assert (said.status, said.payload) == (ResultStatus.OK, "a: AIMessage hi"), said.error
    # The agent's own code failing is the agent's, not the caller's.
    crashed = await router.route("checked", {"field": "crash", "value": 1})
    assert (crashed.status, crashed.fault) == (ResultStatus.ERROR, Fault.AGENT), crashed.error


async def test_a_null_is_judged_under_the_draft_the_schema_names(router: Router) -> None:
    """Draft-07 ignores what sits beside a `$ref`: the router's check takes null for `note`, so
    the tool keeps a model's null for it as a value, not as "not given"."""
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"id": {"type": "string"}, "note": {"$ref": "#/definitions/Note", "type": "string"}},
        "required": ["id"],
        "definitions": {"Note": {"type": ["string", "null"]}},
    }
    router.register(
        FunctionAgent(
            lambda payload: payload,
            agent_id="ops:note:01",
            capabilities=[Capability(name="note", input_schema=schema)],
            call_style="payload",
        )
    )
    (tool,) = ReachToolkit(router, include_generic=False).get_tools()
    kept = await tool.ainvoke(call("note", {"id": "1", "note": None}))
    assert json.loads(kept.content) == {"id": "1", "note": None}


class Turns(typing.TypedDict):
    """A `typing.TypedDict`, as LangGraph's docs write them, which pydantic refuses before 3.12."""

    history: list[dict[str, str]]
    topic: str


def count_turns(chat: Turns) -> str:
    kinds = {type(turn).__name__ for turn in chat["history"]}
    return f"{len(chat['history'])} turns of {sorted(kinds)} about {chat['topic']}"


async def test_a_function_over_a_typing_typed_dict_is_described_and_gets_plain_dicts(router: Router) -> None:
    router.register(LangChainAgent(RunnableLambda(count_turns), agent_id="chat:count:01"))
    (capability,) = router.reachable().values()
    assert capability.input_schema is not None
    assert capability.input_schema["required"] == ["history", "topic"]
    turns = [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    counted = await router.route("count_turns", {"history": turns, "topic": "kettles"})
    assert (counted.status, counted.payload) == (ResultStatus.OK, "2 turns of ['dict'] about kettles"), (
        counted.error
    )
    # Described, the input is checked: a payload without its topic is the caller's mistake.
    refused = await router.route("count_turns", {"history": turns})
    assert (refused.status, refused.fault) == (ResultStatus.INVALID, Fault.CALLER), refused.error
