"""The fourth review of issue 11: LangChain's `ChatMessage` (a role of its own) both ways, a
tool's artifact equal to its `ReachResult`, text tasks with an explicit converter."""

from __future__ import annotations

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ChatMessage
from langchain_core.runnables import RunnableLambda

from examples.langchain_demo.agents import scripted
from middleware import Fault, ReachResult, ResultStatus
from reach_adapters import FunctionAgent, Router
from reach_adapters.langchain import LangChainAgent, LangChainConverter, ReachToolkit
from reach_adapters.langchain.messages import message_to_dict

pytestmark = pytest.mark.timeout(30)


async def test_a_chat_message_with_a_role_of_its_own_is_taken_as_the_converter_gives_it(
    router: Router,
) -> None:
    router.register(
        LangChainAgent(create_agent(scripted(AIMessage("ok"), repeat=True), tools=[]), agent_id="a:chat:01")
    )
    critic = message_to_dict(ChatMessage(role="critic", content="too long"))
    assert critic == {"type": "chat", "role": "critic", "content": "too long"}
    result = await router.route("chat", {"messages": [critic, {"role": "user", "content": "shorter?"}]})
    assert (result.status, result.payload) == (ResultStatus.OK, "ok"), result.error
    # Only a ChatMessage picks its role: others keep to the known ones, and it must give one.
    for wrong in ({"role": "critic", "content": "x"}, {"type": "chat", "content": "x"}):
        refused = await router.route("chat", {"messages": [wrong]})
        assert (refused.status, refused.fault) == (ResultStatus.INVALID, Fault.CALLER), wrong
        assert "messages.0.role" in (refused.error or "")


async def test_a_tools_artifact_equals_the_result_it_holds(router: Router) -> None:
    async def orders() -> dict[str, int]:
        return {"order": 42}

    router.register(FunctionAgent(orders, agent_id="shop:orders:01"))
    (tool,) = [each for each in ReachToolkit(router).get_tools() if each.name == "orders"]
    message = await tool.ainvoke({"type": "tool_call", "name": "orders", "args": {}, "id": "c1"})
    read_back = ReachResult.model_validate(message.artifact.model_dump())
    assert message.artifact == read_back
    assert read_back == message.artifact
    assert message.artifact != ReachResult.model_validate({**read_back.model_dump(), "payload": {"order": 7}})


async def test_text_reaches_a_chat_agent_declared_with_keywords_and_its_converter(router: Router) -> None:
    agent = create_agent(scripted(AIMessage("hello there"), repeat=True), tools=[])
    declared = [{"name": "greet", "keywords": ["hello"]}]
    router.register(
        LangChainAgent(agent, agent_id="a:greet:01", capabilities=declared, converter=LangChainConverter())
    )
    result = await router.route("greet", "hi")
    assert (result.status, result.payload) == (ResultStatus.OK, "hello there"), result.error


async def test_pairs_reach_a_runnable_that_declares_nothing_as_they_were_sent(router: Router) -> None:
    # Only LangGraph's add_messages reads [role, content] pairs as messages; to a runnable of no
    # declared input they are data, as a direct call gives them.
    show = RunnableLambda(lambda payload: payload, name="show")
    router.register(LangChainAgent(show, agent_id="x:show:01"))
    for events in ([["user", "login"], ["system", "boot"]], [["user", 5]], [["tool", "x"]]):
        result = await router.route("show", {"events": events})
        assert (result.status, result.payload) == (ResultStatus.OK, {"events": events}), result.error
