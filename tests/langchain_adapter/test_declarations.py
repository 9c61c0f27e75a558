"""LangChainAgent declarations: derived capabilities, explicit ones, and rejected input."""

from __future__ import annotations

import logging
import typing
import warnings
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from langchain.agents import create_agent
from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_core.messages import SystemMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompt_values import PromptValue
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import Runnable, RunnableLambda, RunnableWithMessageHistory
from langgraph.graph import END, START, StateGraph
from typing_extensions import TypedDict

from examples.langchain_demo.agents import scripted
from middleware import MetaInfo, ReachMessage, ReachResult
from reach_adapters import Capability, InvalidDeclarationError, Router
from reach_adapters.langchain import LangChainAgent, LangChainConverter


def shout(text: str) -> str:
    """Say it louder."""
    return text.upper()


def test_a_runnable_lambda_declares_its_function() -> None:
    (cap,) = LangChainAgent(RunnableLambda(shout), agent_id="util:shout:01").capabilities

    assert cap.name == "shout"
    assert cap.description == "Say it louder."
    assert cap.input_schema == {"type": "string"}
    assert cap.output_schema == {"type": "string"}


def _summary_chain() -> Runnable[Any, Any]:
    prompt = ChatPromptTemplate.from_messages(
        [("system", "You summarise support tickets."), ("human", "{text}")]
    )
    return prompt | scripted()


def _with_history() -> Runnable[Any, Any]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # deprecated, and still what many agents use
        return RunnableWithMessageHistory(
            _summary_chain(), lambda _: InMemoryChatMessageHistory(), input_messages_key="text"
        )


@pytest.mark.parametrize(
    ("wrapped", "said"),
    [
        (lambda: scripted().with_fallbacks([scripted()]), "A chat model (generic-fake-chat-model)"),
        (lambda: _summary_chain().with_fallbacks([RunnableLambda(lambda _: "sorry")]), "You summarise"),
        (lambda: RunnableLambda(shout).with_fallbacks([RunnableLambda(str.lower)]), "Say it louder."),
        (
            _with_history,
            "You summarise support tickets. (a chain: ChatPromptTemplate → ScriptedChatModel)",
        ),
    ],
    ids=["model-with-fallbacks", "chain-with-fallbacks", "lambda-with-fallbacks", "message-history"],
)
def test_a_wrapper_is_described_as_what_it_wraps(wrapped: Any, said: str) -> None:
    (cap,) = LangChainAgent(wrapped(), agent_id="support:summary:01").capabilities

    assert cap.description.startswith(said)
    # Not LangChain's wiring around the history (RunnableAssign<text> → _call_runnable_sync).
    assert "_call_runnable" not in cap.description


def test_an_lcel_chain_is_named_after_the_agent_type_and_takes_the_prompt_variables() -> None:
    chain = ChatPromptTemplate.from_messages([("human", "{question}")]) | scripted() | StrOutputParser()

    (cap,) = LangChainAgent(chain, agent_id="qa:answer:01").capabilities

    assert cap.name == "answer"  # "RunnableSequence" would merge every chain into one capability
    assert cap.input_schema["required"] == ["question"]
    assert cap.output_schema == {"type": "string"}


def said(value: PromptValue) -> str:
    return " / ".join(str(message.content) for message in value.to_messages())


async def test_a_mustache_chat_prompt_takes_the_objects_its_templates_read(router: Router) -> None:
    """``{{user.name}}`` reads an object, as LangChain's own mustache `PromptTemplate` describes
    it; a section (``{{#items}}``) may iterate a list, and a placeholder still takes messages."""
    prompt = ChatPromptTemplate.from_messages(
        [
            ("system", "Greet {{user.name}} from {{user.city}}"),
            MessagesPlaceholder("history", optional=True),
            ("human", "{{question}} {{#items}}[{{.}}]{{/items}}"),
        ],
        template_format="mustache",
    )
    chain = prompt | RunnableLambda(said)
    agent = LangChainAgent(chain.with_retry(), agent_id="chat:greet:01")
    router.register(agent)
    (cap,) = agent.capabilities
    payload = {"user": {"name": "Ann", "city": "Oslo"}, "question": "hi", "items": ["a", "b"]}

    properties = cap.input_schema["properties"]
    assert cap.input_schema["$defs"]["user"]["properties"].keys() == {"name", "city"}
    assert properties["user"] == {"$ref": "#/$defs/user"}
    assert "type" not in properties["items"]
    assert properties["history"]["type"] == "array"
    assert cap.input_schema["required"] == ["items", "question", "user"]
    answered = await router.route("greet", {**payload, "history": [{"role": "user", "content": "before"}]})
    assert answered.payload == await chain.ainvoke({**payload, "history": [("user", "before")]})
    assert answered.payload == "Greet Ann from Oslo / before / hi [a][b]"
    refused = await router.route("greet", {**payload, "user": "Ann"})
    assert "field 'user'" in (refused.error or "")


def test_a_chat_model_chain_pays_out_text() -> None:
    chain = ChatPromptTemplate.from_messages([("human", "{q}")]) | scripted()

    (cap,) = LangChainAgent(chain, agent_id="qa:raw:01").capabilities

    assert cap.output_schema == {"type": ["string", "null"]}  # null: the run added no AI message


def test_a_create_agent_agent_takes_role_content_messages() -> None:
    graph = create_agent(scripted(), tools=[], name="refund")

    (cap,) = LangChainAgent(graph, agent_id="support:refund:01").capabilities

    assert cap.name == "refund"
    assert "$defs" not in cap.input_schema  # LangChain's message classes are gone, not just unused
    validator = Draft202012Validator(cap.input_schema)
    assert validator.is_valid({"messages": [{"role": "user", "content": "refund 42"}]})
    assert validator.is_valid({"messages": "refund 42"})  # add_messages reads a string as well
    assert not validator.is_valid({"messages": 42})
    assert not validator.is_valid({"messages": [{"content": "no role"}]})
    assert cap.output_schema is None  # text, or the structured response when one is asked for


def test_an_unnamed_graph_takes_the_agent_type() -> None:
    graph = create_agent(scripted(), tools=[])

    assert LangChainAgent(graph, agent_id="support:triage:01").capabilities[0].name == "triage"


class State(TypedDict):
    question: str
    answer: str


def test_a_state_graph_declares_its_state() -> None:
    builder = StateGraph(State)
    builder.add_node("answer", lambda state: {"answer": state["question"][::-1]})
    builder.add_edge(START, "answer")
    builder.add_edge("answer", END)

    (cap,) = LangChainAgent(builder.compile(), agent_id="qa:graph:01").capabilities

    assert set(cap.input_schema["properties"]) == {"question", "answer"}
    assert cap.output_schema is not None
    assert set(cap.output_schema["properties"]) == {"question", "answer"}


def test_a_graph_over_a_typing_typed_dict_is_described_all_the_same() -> None:
    class Legacy(typing.TypedDict):  # pydantic refuses this class itself on Python 3.11
        question: str

    builder = StateGraph(Legacy)
    builder.add_node("echo", lambda state: state)
    builder.add_edge(START, "echo")
    builder.add_edge("echo", END)

    (cap,) = LangChainAgent(builder.compile(), agent_id="qa:legacy:01").capabilities

    assert cap.input_schema == {
        "type": "object",
        "properties": {"question": {"title": "Question", "type": "string"}},
    }
    assert cap.output_schema == cap.input_schema


class Mute(RunnableLambda[Any, Any]):
    """A runnable whose schemas cannot be built."""

    def get_input_jsonschema(self, config: Any = None) -> dict[str, Any]:
        raise RuntimeError("no schema here")

    def get_output_jsonschema(self, config: Any = None) -> dict[str, Any]:
        raise RuntimeError("no schema here")


def test_a_runnable_that_cannot_describe_itself_is_left_open_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="reach_adapters.langchain"):
        (cap,) = LangChainAgent(Mute(lambda x: x), agent_id="qa:mute:01").capabilities

    assert cap.input_schema == {}
    assert cap.output_schema is None
    assert "qa:mute:01" in caplog.text
    assert "cannot describe its input" in caplog.text


def test_untyped_lambdas_accept_anything_without_a_check() -> None:
    (cap,) = LangChainAgent(RunnableLambda(lambda x: x), agent_id="util:echo:01").capabilities

    assert cap.name == "echo"
    assert not cap.checks_input


def test_open_object_schemas_are_not_checked_per_call() -> None:
    def take(payload: dict[str, Any]) -> dict[str, Any]:
        return payload

    (cap,) = LangChainAgent(RunnableLambda(take), agent_id="util:take:01").capabilities

    assert cap.input_schema == {"type": "object"}
    assert not cap.checks_input


def test_explicit_capabilities_win() -> None:
    agent = LangChainAgent(
        RunnableLambda(shout),
        agent_id="util:shout:01",
        capabilities=[{"name": "louder", "keywords": ["caps"]}, Capability(name="yell")],
    )

    assert [cap.name for cap in agent.capabilities] == ["louder", "yell"]


class Upper(LangChainConverter):
    def from_middleware(self, message: ReachMessage) -> Any:
        return str(message.raw_payload)


def test_a_custom_converter_gets_an_open_declaration() -> None:
    (cap,) = LangChainAgent(RunnableLambda(shout), agent_id="util:shout:01", converter=_Bare()).capabilities

    assert cap.name == "shout"
    assert cap.input_schema == {}
    assert cap.output_schema is None


def test_a_converter_subclass_keeps_the_derived_schemas() -> None:
    (cap,) = LangChainAgent(RunnableLambda(shout), agent_id="util:shout:01", converter=Upper()).capabilities

    assert cap.input_schema == {"type": "string"}


class _Bare:
    """A converter that is not a LangChainConverter: every direction its own."""

    def to_middleware(self, native: Any, meta: MetaInfo | None = None) -> ReachMessage:
        return ReachMessage(raw_payload=native, meta_info=meta or MetaInfo())

    def from_middleware(self, message: ReachMessage) -> Any:
        return message.raw_payload

    def result_to_middleware(self, native: Any, message: ReachMessage) -> ReachResult:
        return LangChainConverter().result_to_middleware(native, message)

    def result_from_middleware(self, result: ReachResult) -> Any:
        return result.payload


@pytest.mark.parametrize(
    ("kwargs", "problem"),
    [
        ({"runnable": shout}, r"wraps a LangChain Runnable, got function"),
        ({"agent_id": "no-colons"}, r"not 'namespace:type:instance'"),
        ({"converter": object()}, r"lacks the Converter methods"),
        ({"config": {"run_id": "x"}}, r"config keys \['run_id'\] are not allowed"),
        ({"config": {"thread_id": "t"}}, r"config keys \['thread_id'\] are not allowed.*'configurable'"),
        ({"config": ["tags"]}, r"config must be a RunnableConfig dict, got list"),
        ({"capabilities": []}, r"declares no capabilities"),
        ({"capabilities": [{"name": "bad name"}]}, r"capability 'bad name'"),
    ],
)
def test_bad_declarations_say_what_to_fix(kwargs: dict[str, Any], problem: str) -> None:
    arguments: dict[str, Any] = {"runnable": RunnableLambda(shout), "agent_id": "util:shout:01", **kwargs}
    runnable = arguments.pop("runnable")

    with pytest.raises(InvalidDeclarationError, match=problem):
        LangChainAgent(runnable, **arguments)


def test_the_runnable_is_left_unchanged() -> None:
    runnable = RunnableLambda(shout)
    before = (runnable.get_name(), runnable.config_specs, runnable.get_input_jsonschema())

    agent = LangChainAgent(runnable, agent_id="util:shout:01")

    assert agent.runnable is runnable
    assert (runnable.get_name(), runnable.config_specs, runnable.get_input_jsonschema()) == before
    assert runnable.invoke("x") == "X"


def test_prebuilt_agents_without_a_written_prompt_are_described_by_their_prompt_or_tools() -> None:
    """LangGraph's `create_react_agent` keeps its prompt in a step before its model, and an agent
    whose prompt is made per call (`dynamic_prompt`) shows none: what they can do is their tools."""
    from langchain.agents.middleware import ModelRequest, dynamic_prompt
    from langchain_core.tools import tool
    from langgraph.prebuilt import create_react_agent

    @tool
    def lookup(order_id: str) -> str:
        """Look up an order by id.

        Long details the description leaves out."""
        return "shipped"

    @dynamic_prompt
    def persona(request: ModelRequest) -> str:
        return "You are the billing desk."

    def described(agent: Any) -> str:
        (cap,) = LangChainAgent(agent, agent_id="shop:desk:01").capabilities
        return cap.description

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # create_react_agent is deprecated, and still much used
        react = create_react_agent(scripted(), [lookup], prompt="You are the orders desk.")
        message = create_react_agent(scripted(), [lookup], prompt=SystemMessage("You are the returns desk."))
        template = ChatPromptTemplate.from_messages(
            [("system", "You are the {desk} desk."), MessagesPlaceholder("messages")]
        )
        templated = create_react_agent(scripted(), [lookup], prompt=template)
        bare = create_react_agent(scripted(), [lookup])
    assert described(react) == "You are the orders desk."
    assert described(message) == "You are the returns desk."
    assert described(templated) == "You are the {desk} desk."
    assert described(bare) == "An agent using the tools lookup (Look up an order by id.)."
    dynamic = create_agent(scripted(), [lookup], middleware=[persona])
    assert described(dynamic) == "An agent using the tools lookup (Look up an order by id.)."
