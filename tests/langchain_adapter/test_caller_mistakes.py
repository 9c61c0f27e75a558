"""A caller's mistakes with LangChain agents are `invalid`, the caller's fault, and never count
against a healthy agent: payloads a chat model cannot take, a resume its interrupt refuses, a
stream mode LangGraph does not have, a payload a graph's pydantic or dataclass state refuses."""

from __future__ import annotations

import dataclasses
import datetime
import json
import re
from typing import Annotated, Any

import pytest
from langchain.agents import create_agent
from langchain.agents.middleware import HumanInTheLoopMiddleware
from langchain_core.language_models import FakeListChatModel
from langchain_core.messages import AIMessage, AnyMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.runnables import RunnableLambda
from langchain_core.tools import tool
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.graph.message import add_messages
from pydantic import BaseModel, field_validator

from examples.langchain_demo.agents import scripted
from middleware import Fault, ReachMessage, ResultStatus
from reach_adapters import InvalidMessageError, Router
from reach_adapters.langchain import LangChainAgent
from tests.gateway.agents import memo_graph

pytestmark = pytest.mark.timeout(30)


def failures(router: Router, agent_id: str) -> int:
    return next(entry.failures for entry in router.catalog() if entry.agent_id == agent_id)


@pytest.mark.parametrize(
    "payload",
    [
        {"messages": [{"role": "user", "content": "ping"}]},
        {"type": "ChatPromptValueConcrete", "messages": [{"role": "user", "content": "ping"}]},
        {"type": "StringPromptValue", "text": "ping"},
    ],
    ids=["messages-object", "chat-prompt-value", "string-prompt-value"],
)
async def test_a_chat_model_refuses_objects_as_the_callers_mistake(router: Router, payload: Any) -> None:
    model = FakeListChatModel(responses=["pong"])
    router.register(LangChainAgent(model, agent_id="util:chat:01"))
    router.register(LangChainAgent(model | StrOutputParser(), agent_id="util:answer:01"))

    for capability in ("chat", "answer"):
        for _ in range(3):  # enough failures in a row to quarantine the agent, were they counted
            refused = await router.route(capability, payload)
            assert (refused.status, refused.fault) == (ResultStatus.INVALID, Fault.CALLER), refused.error
    assert failures(router, "util:chat:01") == failures(router, "util:answer:01") == 0
    # What a language model takes: a string or messages, no prompt-value objects; a text task's
    # object (an A2A message of text parts) is its text.
    schema = router.catalog()[0].capabilities[0].input_schema
    assert [option.get("type") for option in schema["anyOf"]] == ["string", "array"]
    assert (await router.route("answer", {"text": "ping"})).payload == "pong"
    assert "PromptValue" not in json.dumps(schema)
    assert (await router.route("chat", "ping")).payload == "pong"
    assert (await router.route("answer", [{"role": "user", "content": "ping"}])).payload == "pong"


@tool
def delete_file(path: str) -> str:
    """Delete a file."""
    return f"deleted {path}"


async def test_a_resume_the_interrupt_refuses_is_the_callers_mistake_and_can_be_answered_again(
    router: Router,
) -> None:
    model = scripted(
        AIMessage("", tool_calls=[{"name": "delete_file", "args": {"path": "r.txt"}, "id": "c1"}]),
        AIMessage("all done"),
    )
    # Each interrupt carries a response_schema; LangGraph checks the resume against it.
    approval = HumanInTheLoopMiddleware(
        interrupt_on={"delete_file": {"allowed_decisions": ["approve", "reject"]}}, interrupt_mode="per_call"
    )
    graph = create_agent(model, tools=[delete_file], middleware=[approval], checkpointer=InMemorySaver())
    router.register(LangChainAgent(graph, agent_id="ops:files:01"))
    thread = {"thread_id": "t"}
    asked = await router.route(
        "files", {"messages": [{"role": "user", "content": "delete r.txt"}]}, configurable=thread
    )
    assert asked.status == ResultStatus.INPUT_REQUIRED, asked.error

    for _ in range(2):  # enough failures in a row to quarantine the agent, were they counted
        refused = await router.route("files", None, resume={"type": "bogus"}, configurable=thread)
        assert (refused.status, refused.fault) == (ResultStatus.INVALID, Fault.CALLER), refused.error
        assert "response_schema" in (refused.error or "")
    with pytest.raises(InvalidMessageError, match="response_schema"):
        _ = [
            chunk
            async for chunk in router.stream("files", None, resume={"type": "bogus"}, configurable=thread)
        ]
    assert failures(router, "ops:files:01") == 0
    done = await router.route("files", None, resume={"type": "approve"}, configurable=thread)
    assert (done.status, done.payload) == (ResultStatus.OK, "all done"), done.error


def parcel_graph() -> Any:
    graph = StateGraph(MessagesState)
    graph.add_node("model", lambda state: {"messages": [AIMessage("your parcel is in Leeds")]})
    graph.add_edge(START, "model")
    graph.add_edge("model", END)
    return graph.compile(name="assist")


@pytest.mark.parametrize(
    ("capability", "mode", "named"),
    [
        ("assist", "bogus", "not one of LangGraph's"),
        ("assist", ["updates", "tokens"], "['tokens'] is not one of LangGraph's"),
        ("assist", [], "is not one of LangGraph's"),
        ("hello", "messages", "is for LangGraph graphs"),
        ("hello", "bogus", "is for LangGraph graphs"),
    ],
)
async def test_a_stream_mode_that_cannot_apply_is_refused_for_unary_and_streamed_calls(
    router: Router, capability: str, mode: str | list[str], named: str
) -> None:
    router.register(LangChainAgent(parcel_graph(), agent_id="support:assist:01"))
    router.register(LangChainAgent(RunnableLambda(lambda _: "hi", name="hello"), agent_id="util:hello:01"))
    payload = {"messages": [{"role": "user", "content": "where is my parcel?"}]}

    for _ in range(2):  # enough failures in a row to quarantine the agent, were they counted
        refused = await router.route(capability, payload, stream_mode=mode)
        assert (refused.status, refused.fault) == (ResultStatus.INVALID, Fault.CALLER), refused.payload
        assert named in (refused.error or "")
    with pytest.raises(InvalidMessageError, match=re.escape(named)):
        _ = [chunk async for chunk in router.stream(capability, payload, stream_mode=mode)]
    assert failures(router, "support:assist:01") == failures(router, "util:hello:01") == 0
    # A mode the graph has shapes only streamed chunks: a unary call answers as without it.
    answered = await router.route("assist", payload, stream_mode="messages")
    assert answered.payload == "your parcel is in Leeds"


class Signup(BaseModel):
    """A pydantic state whose validator refuses some payloads (LangGraph's docs: pydantic states
    for run-time validation); `messages` is reduced, so a string there is an update, not a list."""

    email: str
    welcome: str = ""
    since: datetime.date | None = None
    messages: Annotated[list[AnyMessage], add_messages] = []

    @field_validator("email")
    @classmethod
    def must_have_at(cls, value: str) -> str:
        if "@" not in value:
            msg = "not an email address"
            raise ValueError(msg)
        return value


@dataclasses.dataclass
class Order:
    quantity: int

    def __post_init__(self) -> None:
        if self.quantity > 10:
            msg = "at most 10 per order"
            raise ValueError(msg)


def state_graph(state: type[Any], node: Any) -> Any:
    graph = StateGraph(state)
    graph.add_node("step", node)
    graph.add_edge(START, "step")
    graph.add_edge("step", END)
    return graph.compile()


def welcome(state: Signup) -> dict[str, Any]:
    return {"welcome": f"hello {state.email}", "messages": [AIMessage(f"{len(state.messages)} said")]}


@pytest.mark.parametrize(
    ("payload", "named"),
    [
        ({"email": "not-an-email"}, "field 'email': Value error, not an email address"),
        ({"email": "a@b.c", "since": "last week"}, "field 'since': Input should be a valid date"),
    ],
)
async def test_a_payload_a_graphs_pydantic_state_refuses_is_the_callers_mistake(
    router: Router, payload: dict[str, Any], named: str
) -> None:
    """LangGraph builds a pydantic state inside the run, where its refusal would count against
    the agent and quarantine it; the same payload to a function typed on the model is `invalid`."""
    router.register(LangChainAgent(state_graph(Signup, welcome), agent_id="crm:signup:01"))
    chain = state_graph(Signup, welcome) | RunnableLambda(lambda state: state["welcome"])
    router.register(LangChainAgent(chain.with_retry(), agent_id="crm:greet:01"))

    for capability in ("signup", "greet"):
        for _ in range(3):  # enough failures in a row to quarantine the agent, were they counted
            refused = await router.route(capability, payload)
            assert (refused.status, refused.fault) == (ResultStatus.INVALID, Fault.CALLER), refused.error
            assert f"payload does not make the Signup the graph takes: {named}" in (refused.error or "")
    with pytest.raises(InvalidMessageError, match="not make the Signup"):
        _ = [chunk async for chunk in router.stream("signup", payload)]
    assert failures(router, "crm:signup:01") == failures(router, "crm:greet:01") == 0
    done = await router.route("signup", {"email": "a@b.c", "since": "2024-05-01"})
    output = done.extra["output"]
    assert isinstance(output, dict)
    assert (done.status, output["welcome"]) == (ResultStatus.OK, "hello a@b.c"), done.error
    assert (await router.route("greet", {"email": "a@b.c"})).payload == "hello a@b.c"


async def test_a_graph_state_is_checked_but_the_graph_is_given_the_payload_and_its_updates(
    router: Router,
) -> None:
    """The graph makes its state from the dict; a reduced key takes an update (a string is one
    user message to `add_messages`), which the model's own type for it would refuse."""
    agent = LangChainAgent(state_graph(Signup, welcome), agent_id="crm:signup:01")
    router.register(agent)
    payload = {"email": "a@b.c", "messages": "hi"}

    native = agent.converter.from_middleware(ReachMessage(raw_payload=payload))

    assert native == payload
    assert type(native) is dict
    done = await router.route("signup", payload)
    assert (done.status, done.payload) == (ResultStatus.OK, "1 said"), done.error


async def test_a_payload_a_graphs_dataclass_state_refuses_is_the_callers_mistake(router: Router) -> None:
    router.register(
        LangChainAgent(state_graph(Order, lambda o: {"quantity": o.quantity}), agent_id="shop:order:01")
    )

    for _ in range(3):  # enough failures in a row to quarantine the agent, were they counted
        refused = await router.route("order", {"quantity": 11})
        assert (refused.status, refused.fault) == (ResultStatus.INVALID, Fault.CALLER), refused.error
        assert "at most 10 per order" in (refused.error or "")
    assert failures(router, "shop:order:01") == 0
    assert (await router.route("order", {"quantity": 2})).payload == {"quantity": 2}


def said(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


@pytest.mark.parametrize(
    ("configurable", "why"),
    [
        ({"thread_id": "t", "__pregel_checkpointer": "oops"}, "'__pregel_checkpointer' is reserved"),
        ({"thread_id": "t", "__pregel_read": 1}, "'__pregel_read' is reserved"),
        ({"thread_id": {"a": 1}}, "thread_id must be a string (a UUID, say) or an integer, got dict"),
        ({"thread_id": ["x"]}, "got list"),
        ({"thread_id": True}, "got bool"),
    ],
    ids=["pregel-checkpointer", "pregel-read", "thread-dict", "thread-list", "thread-bool"],
)
async def test_configurable_keys_no_caller_may_give_are_refused_before_routing(
    router: Router, configurable: dict[str, Any], why: str
) -> None:
    router.register(LangChainAgent(memo_graph(), agent_id="t:memo:01"))
    with pytest.raises(InvalidMessageError, match=re.escape(why)):
        await router.route("memo", said("hi"), configurable=configurable)
    message = {"meta_info": {"capability": "memo", "configurable": configurable}, "raw_payload": said("hi")}
    with pytest.raises(InvalidMessageError, match=re.escape(why)):
        await router.dispatch(message)
    assert failures(router, "t:memo:01") == 0


@pytest.mark.parametrize(
    ("configurable", "why"),
    [
        ({"checkpoint_ns": "child:abc"}, "only '' (the graph's own checkpoints) may be given"),
        ({"checkpoint_ns": 5}, "configurable['checkpoint_ns'] is 5"),
        ({"checkpoint_map": {"": "x"}}, "configurable['checkpoint_map'] is LangGraph's own"),
        ({"checkpoint_id": 5}, "configurable['checkpoint_id'] must be a string"),
    ],
    ids=["subgraph-namespace", "namespace-int", "checkpoint-map", "checkpoint-id-int"],
)
async def test_langgraph_checkpoint_keys_a_caller_may_not_give_are_its_mistake(
    router: Router, configurable: dict[str, Any], why: str
) -> None:
    router.register(LangChainAgent(memo_graph(), agent_id="t:memo:01"))
    for _ in range(3):  # enough failures in a row to quarantine the agent, were they counted
        refused = await router.route("memo", said("hi"), configurable={"thread_id": "t", **configurable})
        assert (refused.status, refused.fault, refused.delivered) == (
            ResultStatus.INVALID,
            Fault.CALLER,
            False,
        ), refused.error
        assert why in (refused.error or "")
    assert failures(router, "t:memo:01") == 0
    assert (await router.route("memo", said("hi"), configurable={"thread_id": "t"})).payload == "hi"


async def test_a_checkpoint_id_of_the_thread_runs_from_that_checkpoint(router: Router) -> None:
    """LangGraph's time travel: a caller may name a checkpoint of its own thread, as the state
    snapshots LangGraph gives name them (with the root namespace, '')."""
    graph: Any = memo_graph()
    router.register(LangChainAgent(graph, agent_id="t:memo:01"))
    thread = {"thread_id": "t"}
    await router.route("memo", said("a"), configurable=thread)
    first = (await graph.aget_state({"configurable": thread})).config["configurable"]
    assert (await router.route("memo", said("b"), configurable=thread)).payload == "a / b"
    forked = await router.route("memo", said("c"), configurable={**thread, **first})
    assert set(first) == {"thread_id", "checkpoint_ns", "checkpoint_id"}
    assert forked.payload == "a / c", forked.error
