"""Routing to wrapped runnables: each kind of runnable, and every kind of bad input or output."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import uuid
from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.tools import tool
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel
from typing_extensions import TypedDict

from examples.langchain_demo.agents import scripted
from middleware import ReachMessage, ReachResult, ResultStatus
from reach_adapters import Router
from reach_adapters.langchain import LangChainAgent, LangChainConverter
from reach_adapters.router.matching import task_text


def info(router: Router, agent_id: str) -> Any:
    return next(entry for entry in router.catalog() if entry.agent_id == agent_id)


async def test_a_runnable_lambda_is_reached(router: Router) -> None:
    async def shout(text: str) -> str:
        """Say it louder."""
        return text.upper()

    router.register(LangChainAgent(RunnableLambda(shout), agent_id="util:shout:01"))

    result = await router.route("shout", "hello")

    assert result.status is ResultStatus.OK
    assert result.payload == "HELLO"
    assert result.agent_id == "util:shout:01"


async def test_an_lcel_chain_is_reached(router: Router) -> None:
    prompt = ChatPromptTemplate.from_messages([("system", "answer briefly"), ("human", "{question}")])
    chain = prompt | scripted(AIMessage("forty-two")) | StrOutputParser()
    router.register(LangChainAgent(chain, agent_id="qa:answer:01"))

    result = await router.route("answer", {"question": "meaning of life?"})

    assert result.ok, result.error
    assert result.payload == "forty-two"


class Counter(TypedDict):
    n: int
    history: list[int]


async def test_a_langgraph_graph_is_reached(router: Router) -> None:
    builder = StateGraph(Counter)
    builder.add_node("step", lambda s: {"n": s["n"] + 1, "history": [*s.get("history", []), s["n"]]})
    builder.add_edge(START, "step")
    builder.add_edge("step", END)
    router.register(LangChainAgent(builder.compile(), agent_id="math:count:01"))

    result = await router.route("count", {"n": 1, "history": []})

    assert result.ok, result.error
    assert result.payload == {"n": 2, "history": [1]}


async def test_a_create_agent_agent_runs_its_own_tools_and_answers(router: Router) -> None:
    looked_up: list[str] = []

    @tool
    def lookup_order(order_id: str) -> str:
        """Look an order up."""
        looked_up.append(order_id)
        return "delivered, damaged"

    model = scripted(
        AIMessage("", tool_calls=[{"name": "lookup_order", "args": {"order_id": "42"}, "id": "t1"}]),
        AIMessage("refund approved"),
    )
    agent = LangChainAgent(
        create_agent(model, tools=[lookup_order], name="refund"), agent_id="support:refund:01"
    )
    router.register(agent)

    result = await router.route("refund", {"messages": [{"role": "user", "content": "refund order 42"}]})

    assert result.ok, result.error
    assert looked_up == ["42"]
    assert result.payload == "refund approved"
    native = agent.converter.result_from_middleware(result)
    human, call, observation, answer = native["messages"]
    assert isinstance(human, HumanMessage)
    assert human.content == "refund order 42"
    assert call.tool_calls[0]["args"] == {"order_id": "42"}
    assert isinstance(observation, ToolMessage)
    assert observation.content == "delivered, damaged"
    assert answer.content == "refund approved"


async def test_a_payload_off_schema_is_refused_before_the_runnable_runs(router: Router) -> None:
    seen: list[Any] = []

    def record(order: dict[str, int]) -> int:
        seen.append(order)
        return 1

    router.register(
        LangChainAgent(
            RunnableLambda(record),
            agent_id="shop:record:01",
            capabilities=[
                {
                    "name": "record",
                    "input_schema": {
                        "type": "object",
                        "properties": {"qty": {"type": "integer"}},
                        "required": ["qty"],
                    },
                }
            ],
        )
    )

    result = await router.route("record", {"qty": "three"})

    assert result.status is ResultStatus.INVALID
    assert "field 'qty'" in (result.error or "")
    assert seen == []
    assert info(router, "shop:record:01").failures == 0  # the caller's mistake, not the agent's


async def test_an_agent_that_raises_gives_an_error_result_counted_against_it(router: Router) -> None:
    def broken(order: str) -> str:
        msg = f"no such order {order}"
        raise LookupError(msg)

    router.register(LangChainAgent(RunnableLambda(broken), agent_id="shop:broken:01"))

    result = await router.route("broken", "A-9")

    assert result.status is ResultStatus.ERROR
    assert result.error_type == "LookupError"
    assert result.error == "no such order A-9"
    entry = info(router, "shop:broken:01")
    assert (entry.calls, entry.failures) == (1, 1)
    assert entry.success_rate < 1.0


async def test_output_without_json_form_is_an_error_naming_the_type(router: Router) -> None:
    router.register(LangChainAgent(RunnableLambda(lambda _: {"handle": object()}), agent_id="util:leak:01"))

    result = await router.route("leak", None)

    assert result.status is ResultStatus.ERROR
    assert result.error_type == "NotJsonSafeError"
    assert "output.handle is a builtins.object" in (result.error or "")


class Ticket(TypedDict):
    text: str
    id: uuid.UUID
    opened_at: datetime.datetime


@dataclasses.dataclass
class QuoteRecord:
    price: decimal.Decimal
    valid_until: datetime.date


class QuoteModel(BaseModel):
    price: decimal.Decimal
    valid_until: datetime.date


def open_ticket(state: Ticket) -> dict[str, Any]:
    opened = datetime.datetime(2024, 5, 1, 9, 30, tzinfo=datetime.UTC)
    return {"id": uuid.UUID(int=7), "opened_at": opened}


def quote_record(item: str) -> QuoteRecord:
    return QuoteRecord(decimal.Decimal("9.90"), datetime.date(2024, 6, 1))


def quote_model(item: str) -> QuoteModel:
    return QuoteModel(price=decimal.Decimal("9.90"), valid_until=datetime.date(2024, 6, 1))


async def test_values_pydantic_serialises_come_out_of_states_and_dataclasses_as_from_models(
    router: Router,
) -> None:
    """A UUID or datetime in a graph's TypedDict state, a Decimal or date in a dataclass: the
    derived output schema describes them as pydantic does (``format: date``), and they come out
    in that form, as they do from a pydantic model, not as the agent's failure."""
    graph = StateGraph(Ticket)
    graph.add_node("open", open_ticket)
    graph.add_edge(START, "open")
    graph.add_edge("open", END)
    router.register(LangChainAgent(graph.compile(), agent_id="desk:ticket:01"))
    router.register(LangChainAgent(RunnableLambda(quote_record), agent_id="shop:quote_record:01"))
    router.register(LangChainAgent(RunnableLambda(quote_model), agent_id="shop:quote_model:01"))

    ticket = await router.route("ticket", {"text": "printer on fire"})
    record = await router.route("quote_record", "kettle")
    model = await router.route("quote_model", "kettle")

    assert (ticket.status, ticket.payload) == (
        ResultStatus.OK,
        {
            "text": "printer on fire",
            "id": "00000000-0000-0000-0000-000000000007",
            "opened_at": "2024-05-01T09:30:00Z",
        },
    ), ticket.error
    assert (record.status, record.payload) == (ResultStatus.OK, model.payload), record.error
    assert model.payload == {"price": "9.90", "valid_until": "2024-06-01"}
    # Each output was checked against the derived schema, which describes these forms.
    schemas = {
        agent_id: info(router, agent_id).capabilities[0].output_schema
        for agent_id in ("desk:ticket:01", "shop:quote_record:01")
    }
    assert schemas["desk:ticket:01"]["properties"]["id"]["format"] == "uuid"
    assert schemas["shop:quote_record:01"]["properties"]["valid_until"]["format"] == "date"


async def test_the_run_config_carries_the_base_config_and_the_task(router: Router) -> None:
    seen: list[RunnableConfig] = []

    def tone(text: str, config: RunnableConfig) -> str:
        seen.append(config)
        return f"{config['configurable']['tone']}: {text}"

    router.register(
        LangChainAgent(
            RunnableLambda(tone),
            agent_id="util:tone:01",
            config={"configurable": {"tone": "calm"}, "tags": ["mine"], "metadata": {"team": "x"}},
        )
    )

    result = await router.route("tone", "hi")

    assert result.payload == "calm: hi"
    (config,) = seen
    assert config["metadata"]["team"] == "x"
    assert config["metadata"]["reach_task_id"] == result.task_id
    assert config["metadata"]["reach_trace_id"] == result.trace_id
    assert {"mine", "agent-reach", "reach:capability:tone", "reach:agent:util:tone:01"} <= set(config["tags"])


class Wrapped(LangChainConverter):
    """A custom pair: the runnable gets {"text": ...}, the caller gets {"answer": ...}."""

    def from_middleware(self, message: ReachMessage) -> Any:
        return {"text": message.raw_payload}

    def result_to_middleware(self, native: Any, message: ReachMessage) -> ReachResult:
        result = super().result_to_middleware({"answer": native}, message)
        result.extra["converter"] = "wrapped"
        return result


async def test_a_custom_converter_pair_is_used_both_ways(router: Router) -> None:
    router.register(
        LangChainAgent(
            RunnableLambda(lambda d: d["text"][::-1]),
            agent_id="util:reverse:01",
            capabilities=[{"name": "reverse", "input_schema": {"type": "string"}}],
            converter=Wrapped(),
        )
    )

    result = await router.route("reverse", "abc")

    assert result.payload == {"answer": "cba"}
    assert result.extra == {"converter": "wrapped"}


async def test_one_failing_agent_leaves_its_replica_serving(router: Router) -> None:
    def flaky(text: str) -> str:
        raise ConnectionError("backend down")

    # Safe to repeat: what a runnable's code raises may come after its work (`never_started`).
    capability = [{"name": "echo", "input_schema": {"type": "string"}, "idempotent": True}]
    router.register(LangChainAgent(RunnableLambda(flaky), agent_id="util:echo:01", capabilities=capability))
    router.register(
        LangChainAgent(RunnableLambda(lambda t: t), agent_id="util:echo:02", capabilities=capability)
    )

    results = [await router.route("echo", f"m{i}") for i in range(4)]

    assert all(r.ok for r in results), [r.error for r in results]
    assert {r.agent_id for r in results} == {"util:echo:02"}


async def test_chat_agents_refuse_unknown_roles_before_running(router: Router) -> None:
    router.register(LangChainAgent(create_agent(scripted(), tools=[]), agent_id="support:chat:01"))

    result = await router.route("chat", {"messages": [{"role": "nobody", "content": "x"}]})

    assert result.status is ResultStatus.INVALID
    assert "field 'messages.0.role'" in (result.error or "")
    assert info(router, "support:chat:01").calls == 0


@pytest.mark.parametrize(
    "messages",
    [
        "hi",
        {"role": "user", "content": "hi"},
        [["user", "hi"]],  # the tuples of LangGraph's docs, as JSON
        [{"role": "system", "content": "Be brief."}, ["user", "hi"]],
    ],
)
async def test_a_chat_agent_takes_every_form_add_messages_reads(router: Router, messages: Any) -> None:
    model = scripted(AIMessage("hello"), repeat=True)
    router.register(LangChainAgent(create_agent(model, tools=[]), agent_id="support:chat:01"))
    payload = {"messages": messages}

    result = await router.route("chat", payload)

    assert (result.status, result.payload) == (ResultStatus.OK, "hello"), result.error
    output: Any = result.extra["output"]
    asked = output["messages"][-2]
    assert (asked["role"], asked["content"]) == ("user", "hi")
    assert task_text(ReachMessage(raw_payload=payload)) == "hi"  # what matching reads of it


async def test_a_chat_agent_declared_with_keywords_only_takes_text_as_a_user_message(router: Router) -> None:
    graph = create_agent(scripted(AIMessage("invoice sent"), repeat=True), tools=[], system_prompt="Billing.")
    billing = {"name": "billing", "description": "Invoices and billing questions", "keywords": ["invoice"]}
    router.register(LangChainAgent(graph, agent_id="shop:billing:01", capabilities=[billing]))

    for _ in range(2):  # enough failures in a row to quarantine the agent, were they counted
        result = await router.route("billing", "send me my invoice")
        assert (result.status, result.payload) == (ResultStatus.OK, "invoice sent"), result.error
    assert [chunk async for chunk in router.stream("billing", "and the last one?")]
    assert (await router.route(None, text="where is my invoice")).agent_id == "shop:billing:01"
    assert info(router, "shop:billing:01").failures == 0
