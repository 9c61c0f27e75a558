"""A capability declared to add what derivation cannot know (keywords, a timeout) still takes
what the runnable takes: the description and input schema it leaves out are the derived ones, so
the tool a model is shown has the runnable's arguments, and a chat agent still takes text."""

from __future__ import annotations

from typing import Any

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableLambda
from pydantic import BaseModel, ConfigDict, Field

from examples.langchain_demo.agents import scripted
from middleware import ResultStatus
from reach_adapters import Capability, InvalidDeclarationError, Router
from reach_adapters.langchain import LangChainAgent, ReachToolkit

pytestmark = pytest.mark.timeout(30)


def invoices() -> Any:
    """A prompt of the month's invoices: its input schema needs no annotations resolved."""
    prompt = ChatPromptTemplate.from_template("Invoices of {month}, at most {limit}")
    return prompt | RunnableLambda(lambda value: value.to_string(), name="render")


def tool_args(router: Router, name: str) -> set[str]:
    (tool,) = [t for t in ReachToolkit(router).get_tools() if t.name == name]
    return set(tool.args)


@pytest.mark.parametrize(
    "declared",
    [
        {"name": "billing", "keywords": ["invoice"], "timeout_ms": 120_000},
        Capability(name="billing", keywords=["invoice"], timeout_ms=120_000),
    ],
    ids=["mapping", "capability"],
)
async def test_a_declared_capability_takes_what_the_runnable_takes(router: Router, declared: Any) -> None:
    (derived,) = LangChainAgent(invoices(), agent_id="shop:billing:01").capabilities
    agent = LangChainAgent(invoices(), agent_id="shop:billing:01", capabilities=[declared])
    (capability,) = agent.capabilities
    assert (capability.timeout_ms, capability.keywords) == (120_000, ["invoice"])
    assert (capability.description, capability.input_schema) == (derived.description, derived.input_schema)
    assert set(capability.input_schema["properties"]) == {"month", "limit"}
    router.register(agent)
    assert tool_args(router, "billing") == {"month", "limit"}
    answered = await router.route("billing", {"month": "May", "limit": "3"})
    assert answered.payload == "Human: Invoices of May, at most 3", answered.error
    refused = await router.route("billing", {"month": "May"})
    assert refused.status is ResultStatus.INVALID


async def test_what_it_declares_stays_its_own(router: Router) -> None:
    declared = {"name": "billing", "description": "Invoices.", "input_schema": {"type": "object"}}
    agent = LangChainAgent(invoices(), agent_id="shop:billing:01", capabilities=[declared])
    (capability,) = agent.capabilities
    assert (capability.description, capability.input_schema) == ("Invoices.", {"type": "object"})


async def test_a_chat_agent_declared_so_takes_text(router: Router) -> None:
    chat = create_agent(scripted(AIMessage("On its way."), repeat=True), tools=[])
    router.register(LangChainAgent(chat, agent_id="support:help:01", capabilities=[{"name": "help"}]))
    assert "messages" in tool_args(router, "help")
    answered = await router.route("help", "where is my order?")
    assert (answered.status, answered.payload) == (ResultStatus.OK, "On its way."), answered.error


class Code(BaseModel):
    model_config = ConfigDict(regex_engine="python-re")
    code: str = Field(pattern=r"^[A-Z]{2}\d+\Z")


def code_of(code: Any) -> str:
    return str(code["code"])


async def test_a_declaration_is_the_way_out_when_the_schema_cannot_be_derived(router: Router) -> None:
    runnable = RunnableLambda(code_of, name="codes").with_types(input_type=Code)
    with pytest.raises(InvalidDeclarationError, match=r"pass capabilities=\[\.\.\.\]"):
        LangChainAgent(runnable, agent_id="x:codes:01")
    agent = LangChainAgent(
        runnable, agent_id="x:codes:01", capabilities=[{"name": "codes", "keywords": ["code"]}]
    )
    assert agent.capabilities[0].input_schema == {"type": "object"}
    router.register(agent)
    assert (await router.route("codes", {"code": "AB12"})).payload == "AB12"
