"""A chain is a capability like any other: offered as an MCP tool, a LangChain tool and an A2A
skill by the adapters as they are, and called through each."""

from __future__ import annotations

from typing import Any

from a2a.types.a2a_pb2 import TaskState

from reach_adapters import Capability, Chain, FunctionAgent, Router, Step
from reach_adapters.langchain import ReachToolkit
from reach_adapters.mcp import MCPServerAgent, RouterMCPServer
from tests.a2a_serve.conftest import Serve, message, meta_of, request, served, task_of, text_of
from tests.chains.agents import TOPIC_IN, drafter

__all__ = ["served"]

SHOUTED = Chain(
    name="shouted_draft",
    description="Draft a text on a topic, then shout it.",
    input_schema=TOPIC_IN,
    steps=[
        Step("draft", "write_draft", input={"topic": "$input.topic"}),
        Step("shout", "shout", input={"text": "$steps.draft.output.text"}),
    ],
    output={"text": "$steps.shout.output"},
)


def shouter() -> FunctionAgent:
    async def shout(text: str) -> str:
        return text.upper()

    return FunctionAgent(shout, agent_id="util:shout:01")


def with_chain(router: Router) -> None:
    router.register(drafter())
    router.register(shouter())
    router.add_chain(SHOUTED)


async def test_a_chain_is_an_mcp_tool_with_its_input_schema() -> None:
    async with Router() as router:
        with_chain(router)
        near = await MCPServerAgent.connect("gateway", server=RouterMCPServer(router).server)
        async with Router() as caller:
            caller.register(near)
            tools = {cap.name: cap for cap in near.capabilities}
            assert tools["shouted_draft"].description == "Draft a text on a topic, then shout it."
            assert tools["shouted_draft"].input_schema["required"] == ["topic"]
            result = await caller.route("shouted_draft", {"topic": "owls"})
            assert result.ok, result.error
            assert result.payload == {"text": "A DRAFT ON OWLS"}
            # Over MCP the chain's input schema holds too.
            refused = await caller.route("shouted_draft", {"subject": "owls"})
            assert not refused.ok


async def test_a_chain_is_a_langchain_tool() -> None:
    async with Router() as router:
        with_chain(router)
        tools = {tool.name: tool for tool in ReachToolkit(router).get_tools()}
        tool = tools["shouted_draft"]
        assert tool.description.startswith("Draft a text on a topic")
        answer: Any = await tool.ainvoke({"topic": "bats"})
        assert "A DRAFT ON BATS" in str(answer)


async def test_a_chain_is_an_a2a_skill(served: Serve) -> None:
    server = await served()
    with_chain(server.gateway.router)
    card = await server.card()
    assert "shouted_draft" in [skill.id for skill in card.skills]
    async with server.client() as client:
        task = await task_of(client, request(message({"topic": "moths"}, skill="shouted_draft")))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert meta_of(task)["agent-reach/agent_id"] == "chain:shouted_draft:0"
    # An answer that is one text field comes back as that text.
    assert text_of(task) == "A DRAFT ON MOTHS"


def test_capability_declarations_carry_compensate_with() -> None:
    declared = Capability(name="charge", compensate_with="refund")
    assert declared.compensable
    assert declared.model_copy(update={"description": "Charge a card."}).compensate_with == "refund"
