"""Regressions from the adapter review: bad caller messages, prompt outputs, wrapped runnables'
names, str enums, stale answers, OpenAI null content and config values."""

from __future__ import annotations

import dataclasses
import datetime
from enum import Enum
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from langchain.agents import create_agent
from langchain_core.callbacks import CallbackManager
from langchain_core.messages import AIMessage, BaseMessage, HumanMessage, ToolMessage
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable, RunnableConfig, RunnableLambda
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.types import interrupt
from pydantic import BaseModel, RootModel, field_serializer

from examples.langchain_demo.agents import scripted
from middleware import ReachMessage, ResultStatus
from reach_adapters import InvalidDeclarationError, InvalidMessageError, Router
from reach_adapters.langchain import LangChainAgent, LangChainConverter
from tests.langchain_adapter.conftest import RunRecorder

CONVERT = LangChainConverter()


def info(router: Router, agent_id: str) -> Any:
    return next(entry for entry in router.catalog() if entry.agent_id == agent_id)


# --- malformed caller messages -------------------------------------------------------------------


@pytest.mark.parametrize(
    ("bad", "named"),
    [
        ({"role": "tool", "content": "18C"}, "lacks 'tool_call_id'"),
        (
            {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "function": {"name": "f"}}]},
            "lacks 'arguments'",
        ),
        ({"role": "assistant", "content": "", "tool_calls": "lookup"}, "tool_calls is a str"),
        ({"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "function": "f"}]}, "wrong type"),
    ],
    ids=["tool-without-call-id", "call-without-arguments", "calls-not-a-list", "function-not-an-object"],
)
async def test_a_malformed_caller_message_is_invalid_and_not_held_against_the_agent(
    router: Router, bad: dict[str, Any], named: str
) -> None:
    def chat(messages: list[BaseMessage]) -> str:
        return "ok"

    router.register(LangChainAgent(RunnableLambda(chat), agent_id="t:chat:01"))

    for _ in range(3):  # enough failures in a row to quarantine the agent, were they counted
        result = await router.route("chat", [{"role": "user", "content": "hi"}, bad])

        assert result.status is ResultStatus.INVALID
        assert result.error_type == "InvalidMessageError"
        assert "payload[1]" in (result.error or "")
        assert named in (result.error or "")
    entry = info(router, "t:chat:01")
    assert (entry.failures, entry.breaker) == (0, "closed")
    assert (await router.route("chat", [{"role": "user", "content": "hi"}])).payload == "ok"


def test_a_malformed_message_in_a_state_names_where_it_sits() -> None:
    payload = {"messages": [{"role": "user", "content": "hi"}, {"role": "tool", "content": "x"}]}

    with pytest.raises(InvalidMessageError, match=r"payload\.messages\[1\] .* lacks 'tool_call_id'"):
        CONVERT.from_middleware(ReachMessage(raw_payload=payload))


# --- pydantic outputs holding messages -----------------------------------------------------------


async def test_a_prompt_template_answers_role_content_messages_its_schema_accepts(router: Router) -> None:
    prompt = ChatPromptTemplate.from_messages([("system", "be nice"), ("human", "{question}")])
    agent = LangChainAgent(prompt, agent_id="t:prompt:01")
    router.register(agent)

    for _ in range(3):
        result = await router.route("prompt", {"question": "hi"})

        assert result.ok, result.error
        assert result.payload == {
            "messages": [{"role": "system", "content": "be nice"}, {"role": "user", "content": "hi"}]
        }
    schema = agent.capabilities[0].output_schema
    assert schema is not None
    assert Draft202012Validator(schema).is_valid(result.payload)
    assert info(router, "t:prompt:01").failures == 0


class Transcript(BaseModel):
    at: datetime.date
    turns: list[BaseMessage]
    meta: dict[str, Any]


def test_a_model_s_messages_become_role_content_and_its_other_fields_keep_their_dump() -> None:
    native = Transcript(
        at=datetime.date(2024, 5, 1), turns=[HumanMessage("hi")], meta={"last": AIMessage("yo")}
    )

    payload = CONVERT.result_to_middleware({"transcript": native}, ReachMessage(raw_payload=None)).payload

    assert payload == {
        "transcript": {
            "at": "2024-05-01",
            "turns": [{"role": "user", "content": "hi"}],
            "meta": {"last": {"role": "assistant", "content": "yo"}},
        }
    }


# --- names of wrapped runnables ------------------------------------------------------------------


def _chain(answer: str) -> Runnable[Any, Any]:
    def wrap(payload: Any) -> dict[str, Any]:
        return {"payload": payload}

    def reply(_: dict[str, Any]) -> str:
        return answer

    return RunnableLambda(wrap) | RunnableLambda(reply)


@pytest.mark.parametrize(
    "wrap",
    [
        lambda r: r.with_retry(),
        lambda r: r.with_config(tags=["x"]),
        lambda r: r.bind(stop=["x"]),
        lambda r: r.with_types(input_type=dict),
        lambda r: r.with_retry().with_config(tags=["x"]),
    ],
    ids=["with_retry", "with_config", "bind", "with_types", "nested"],
)
def test_a_wrapped_chain_takes_the_agent_type_not_the_inner_class_name(wrap: Any) -> None:
    agent = LangChainAgent(wrap(_chain("done")), agent_id="support:refund:01")

    assert agent.capabilities[0].name == "refund"


def test_a_bound_chat_model_takes_the_agent_type() -> None:
    agent = LangChainAgent(scripted().bind(stop=["\n"]), agent_id="qa:chat:01")

    assert agent.capabilities[0].name == "chat"


async def test_unrelated_wrapped_chains_stay_apart(router: Router) -> None:
    router.register(LangChainAgent(_chain("REFUND").with_retry(), agent_id="support:refund:01"))
    router.register(LangChainAgent(_chain("SUMMARY").with_config(tags=["x"]), agent_id="support:summary:01"))

    assert sorted(router.reachable()) == ["refund", "summary"]
    assert (await router.route("refund", {"order": 1})).payload == "REFUND"


def shout(text: str) -> str:
    return text.upper()


@pytest.mark.parametrize(
    ("runnable", "name"),
    [
        (_chain("x").with_config(run_name="refunds"), "refunds"),
        (_chain("x").with_config(run_name="refunds").with_retry(), "refunds"),
        (RunnableLambda(shout, name="louder").with_retry(), "louder"),
        (RunnableLambda(shout).bind(), "shout"),
        (RunnableLambda(shout).with_config(run_name="Shout step"), "shout"),
        (RunnableLambda(shout, name="louder").with_config(run_name="LangGraph"), "louder"),
    ],
    ids=[
        "run_name",
        "run_name-then-retry",
        "named-lambda",
        "function-name",
        "tracing-label-run-name",
        "generic-run-name",
    ],
)
def test_explicit_names_survive_wrapping(runnable: Runnable[Any, Any], name: str) -> None:
    assert LangChainAgent(runnable, agent_id="t:fallback:01").capabilities[0].name == name


def test_a_wrapped_lambda_keeps_its_docstring_as_description() -> None:
    def refund(payload: Any) -> str:
        """Refund an order in full."""
        return "done"

    agent = LangChainAgent(RunnableLambda(refund).with_retry(), agent_id="t:refund:01")
    assert agent.capabilities[0].description == "Refund an order in full."


@dataclasses.dataclass
class Turn:
    said: BaseMessage
    replies: list[BaseMessage]


def test_a_dataclass_s_messages_become_role_content() -> None:
    native = Turn(said=HumanMessage("hi"), replies=[AIMessage("yo")])

    payload = CONVERT.result_to_middleware({"turn": native}, ReachMessage(raw_payload=None)).payload

    assert payload == {
        "turn": {
            "said": {"role": "user", "content": "hi"},
            "replies": [{"role": "assistant", "content": "yo"}],
        }
    }


# --- str enums -----------------------------------------------------------------------------------


class Label(str, Enum):  # noqa: UP042 - StrEnum's str() is its value; this kind's is "Label.REFUND"
    REFUND = "refund"


async def test_str_enum_outputs_keep_their_value(router: Router) -> None:
    router.register(
        LangChainAgent(RunnableLambda(lambda _: {"label": Label.REFUND}), agent_id="t:classify:01")
    )
    router.register(LangChainAgent(RunnableLambda(lambda _: Label.REFUND), agent_id="t:label:01"))

    assert (await router.route("classify", {})).payload == {"label": "refund"}
    assert (await router.route("label", {})).payload == "refund"


# --- the run's own answer only -------------------------------------------------------------------

HISTORY = [
    {"role": "user", "content": "what's your refund policy?"},
    {"role": "assistant", "content": "Refunds are granted within 30 days."},
    {"role": "user", "content": "refund order 42 please"},
]

TURNS = [(m["role"], m["content"]) for m in HISTORY]


def _review_graph() -> Runnable[Any, Any]:
    def review(state: MessagesState) -> dict[str, Any]:
        decision = interrupt("approve the refund?")
        return {"messages": [AIMessage(f"refund {decision}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("review", review)
    builder.add_edge(START, "review")
    return builder.compile(checkpointer=InMemorySaver())


async def test_an_interrupted_graph_asks_for_input_not_an_earlier_answer(router: Router) -> None:
    config: RunnableConfig = {"configurable": {"thread_id": "t1"}}
    router.register(LangChainAgent(_review_graph(), agent_id="support:refund:01", config=config))

    result = await router.route("refund", {"messages": HISTORY})

    assert result.status is ResultStatus.INPUT_REQUIRED, result.error
    assert result.payload == "approve the refund?"  # what it asks, not an earlier turn's answer
    output: Any = result.extra["output"]  # the state, JSON: the whole output is kept
    assert [(m["role"], m["content"]) for m in output["messages"]] == TURNS


async def test_a_checkpointed_thread_pays_out_this_turn_s_answer_only(router: Router) -> None:
    def answer_first_turn_only(state: MessagesState) -> dict[str, Any]:
        if len(state["messages"]) > 1:
            return {}  # as an interrupted or tool-only turn would
        return {"messages": [AIMessage("Refunds are granted within 30 days.")]}

    builder = StateGraph(MessagesState)
    builder.add_node("answer", answer_first_turn_only)
    builder.add_edge(START, "answer")
    graph = builder.compile(checkpointer=InMemorySaver())
    config: RunnableConfig = {"configurable": {"thread_id": "t2"}}
    router.register(LangChainAgent(graph, agent_id="support:policy:01", config=config))

    first = await router.route("policy", {"messages": HISTORY[:1]})
    second = await router.route("policy", {"messages": HISTORY[2:]})

    assert first.payload == "Refunds are granted within 30 days."
    assert second.ok, second.error
    assert second.payload is None  # the thread's first answer is in the state, but not this run's
    output: Any = second.extra["output"]
    assert [(m["role"], m["content"]) for m in output["messages"]] == TURNS


def test_a_chat_model_reply_to_a_history_is_the_payload() -> None:
    sent = ReachMessage(raw_payload=HISTORY)

    assert CONVERT.result_to_middleware(AIMessage("approved"), sent).payload == "approved"


def test_a_history_the_default_reader_refuses_leaves_every_output_message_the_run_s() -> None:
    # A custom converter may have read this tool message its own way before the run.
    sent = ReachMessage(raw_payload={"messages": [{"role": "tool", "content": "no call id"}]})
    state = {"messages": [ToolMessage("no call id", tool_call_id="c1"), AIMessage("done")]}

    assert CONVERT.result_to_middleware(state, sent).payload == "done"


# --- OpenAI's null content -----------------------------------------------------------------------


async def test_an_openai_tool_call_message_with_null_content_is_accepted(router: Router) -> None:
    history = [
        {"role": "user", "content": "weather in Paris?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": "c1",
                    "type": "function",
                    "function": {"name": "weather", "arguments": '{"city": "Paris"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "c1", "content": "18C"},
    ]
    graph = create_agent(scripted(AIMessage("It is 18C.")), tools=[])
    router.register(LangChainAgent(graph, agent_id="t:assistant:01"))

    result = await router.route("assistant", {"messages": history})

    assert result.ok, result.error
    assert result.payload == "It is 18C."


# --- config values -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("config", "key"),
    [
        ({"metadata": None}, "metadata"),
        ({"metadata": {1: "x"}}, "metadata"),
        ({"tags": None}, "tags"),
        ({"tags": "oops"}, "tags"),
        ({"tags": ["a", 1]}, "tags"),
        ({"run_name": 3}, "run_name"),
        ({"callbacks": "handler"}, "callbacks"),
        ({"callbacks": [object()]}, "callbacks"),
        ({"recursion_limit": 0}, "recursion_limit"),
        ({"recursion_limit": True}, "recursion_limit"),
        ({"max_concurrency": "x"}, "max_concurrency"),
        ({"max_concurrency": -1}, "max_concurrency"),
        ({"configurable": ["thread"]}, "configurable"),
    ],
)
def test_a_bad_config_value_is_refused_at_declaration_naming_agent_and_key(
    config: dict[str, Any], key: str
) -> None:
    with pytest.raises(InvalidDeclarationError, match=rf"agent t:echo:01: config\['{key}'\] must be"):
        LangChainAgent(RunnableLambda(shout), agent_id="t:echo:01", config=config)  # type: ignore[arg-type]


async def test_good_config_values_are_kept(router: Router) -> None:
    recorder = RunRecorder()
    config: RunnableConfig = {
        "metadata": {"team": "support"},
        "tags": ("mine",),  # type: ignore[typeddict-item]
        "callbacks": CallbackManager([recorder]),
        "run_name": "echo-run",
        "max_concurrency": None,
        "recursion_limit": 10,
        "configurable": {},
    }
    router.register(LangChainAgent(RunnableLambda(shout), agent_id="t:echo:01", config=config))

    assert (await router.route("shout", "hi")).payload == "HI"
    run = recorder.named("echo-run")
    assert run.metadata["team"] == "support"
    assert "mine" in run.tags


# --- second review: edges of models and of the run's own answer ---------------------------------


class Mixed(BaseModel):
    stuff: list[Any]


class Quoted(BaseModel):
    msgs: list[BaseMessage]

    @field_serializer("msgs")
    def _texts(self, msgs: list[BaseMessage]) -> list[str]:
        return [str(m.text) for m in msgs]


def test_a_field_holding_messages_and_other_values_keeps_their_json_form() -> None:
    native = Mixed(stuff=[HumanMessage("hi"), datetime.date(2024, 1, 1)])
    payload = CONVERT.result_to_middleware(native, ReachMessage(raw_payload=None)).payload
    assert payload == {"stuff": [{"role": "user", "content": "hi"}, "2024-01-01"]}


def test_a_models_own_field_serializer_wins() -> None:
    payload = CONVERT.result_to_middleware(Quoted(msgs=[HumanMessage("hi")]), ReachMessage()).payload
    assert payload == {"msgs": ["hi"]}


def test_a_root_model_of_messages_is_its_root() -> None:
    native = RootModel[dict[str, BaseMessage]]({"root": HumanMessage("hi")})
    payload = CONVERT.result_to_middleware(native, ReachMessage()).payload
    assert payload == {"root": {"role": "user", "content": "hi"}}


def test_a_single_message_is_always_the_runs_own_answer() -> None:
    history = [{"role": "user", "content": "Is 2 even?"}, {"role": "assistant", "content": "Yes."}]
    assert (
        CONVERT.result_to_middleware(AIMessage("Yes."), ReachMessage(raw_payload=history)).payload == "Yes."
    )
    translated = CONVERT.result_to_middleware(HumanMessage("bonjour"), ReachMessage(raw_payload="hello"))
    assert translated.payload == "bonjour"


def test_a_state_ending_on_a_tool_message_answers_with_its_text() -> None:
    sent = {
        "messages": [
            {"role": "assistant", "content": "", "tool_calls": [{"name": "w", "args": {}, "id": "c1"}]}
        ]
    }
    output = {
        "messages": [
            AIMessage("", tool_calls=[{"name": "w", "args": {}, "id": "c1"}]),
            ToolMessage("18C", tool_call_id="c1"),
        ]
    }
    assert CONVERT.result_to_middleware(output, ReachMessage(raw_payload=sent)).payload == "18C"
