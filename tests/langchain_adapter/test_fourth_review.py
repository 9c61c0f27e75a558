"""The fourth review of issue 11: LangChain's `ChatMessage` (a role of its own) both ways."""

from __future__ import annotations

import pytest
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, ChatMessage

from examples.langchain_demo.agents import scripted
from middleware import Fault, ResultStatus
from reach_adapters import Router
from reach_adapters.langchain import LangChainAgent
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
