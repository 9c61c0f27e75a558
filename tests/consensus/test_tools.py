"""Consensus as a tool: the MCP gateway's tool through an MCP client, and the LangChain toolkit's."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from langchain_core.messages import ToolMessage
from mcp import Client
from mcp.types import TextContent

from reach_adapters import FunctionAgent, Router
from reach_adapters.langchain import ReachToolkit
from reach_adapters.mcp import RouterMCPServer
from tests.consensus.voters import CAPITAL, chat_voter, lambda_voter, mcp_voter

pytestmark = pytest.mark.timeout(60)

FRANCE = {"country": "France"}


@pytest.fixture
async def voters() -> AsyncIterator[Router]:
    router = Router()
    router.register(lambda_voter())
    router.register(chat_voter())
    router.register(await mcp_voter())
    router.register(lambda_voter("geo:wrong:01", answer="Lyon"))
    try:
        yield router
    finally:
        await router.aclose()


def _text(blocks: list[Any]) -> str:
    return "".join(block.text for block in blocks if isinstance(block, TextContent))


async def test_an_mcp_client_calls_the_consensus_tool(voters: Router) -> None:
    served = RouterMCPServer(voters, consensus_tool=True)
    async with Client(served.server) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert set(tools) == {"capital", "reach_consensus"}
        assert tools["reach_consensus"].input_schema["required"] == ["capability"]

        answer = await client.call_tool(
            "reach_consensus", {"capability": "capital", "payload": FRANCE, "n": 4, "quorum": 3}
        )

        assert not answer.is_error, _text(answer.content)
        assert answer.structured_content is not None
        assert answer.structured_content["decision"] == "Paris"
        votes = {vote["agent_id"]: vote["agreed"] for vote in answer.structured_content["votes"]}
        assert votes == {"geo:lambda:01": True, "geo:chat:01": True, "mcp:geo:0": True, "geo:wrong:01": False}
        assert json.loads(_text(answer.content))["decision"] == "Paris"

        split = await client.call_tool(
            "reach_consensus", {"capability": "capital", "payload": FRANCE, "n": 4, "quorum": 4}
        )
        assert split.is_error
        assert "no_consensus" in _text(split.content)
        assert split.structured_content is not None
        assert len(split.structured_content["votes"]) == 4
        wrong = await client.call_tool("reach_consensus", {"capability": "capital", "n": 2, "quorum": 3})
        assert wrong.is_error
        assert "quorum 3 is above n 2" in _text(wrong.content)
    served.close()


async def test_the_consensus_tool_is_offered_only_when_asked_and_never_takes_a_capabilitys_name(
    voters: Router,
) -> None:
    plain = RouterMCPServer(voters)
    async with Client(plain.server) as client:
        assert {tool.name for tool in (await client.list_tools()).tools} == {"capital"}
    plain.close()

    voters.register(
        FunctionAgent(lambda: "mine", agent_id="util:clash:01", capabilities=[{"name": "reach_consensus"}])
    )
    served = RouterMCPServer(voters, consensus_tool=True)
    async with Client(served.server) as client:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert names == {"capital", "reach_consensus", "reach_consensus_2"}
        own = await client.call_tool("reach_consensus", {})
        assert _text(own.content) == "mine"
        decided = await client.call_tool("reach_consensus_2", {"capability": "capital", "payload": FRANCE})
        assert decided.structured_content is not None
        assert decided.structured_content["decision"] == "Paris"
    served.close()


async def test_the_langchain_toolkit_offers_a_consensus_tool_when_asked(voters: Router) -> None:
    assert "reach_consensus" not in {tool.name for tool in ReachToolkit(voters).get_tools()}
    tools = {tool.name: tool for tool in ReachToolkit(voters, include_consensus=True).get_tools()}
    assert {"reach_agent", "capital", "reach_consensus"} <= set(tools)

    message = await tools["reach_consensus"].ainvoke(
        {
            "type": "tool_call",
            "id": "call-1",
            "name": "reach_consensus",
            "args": {"capability": "capital", "payload": FRANCE, "n": 4, "quorum": 3},
        }
    )

    assert isinstance(message, ToolMessage)
    assert message.status == "success"
    assert json.loads(str(message.content))["decision"] == "Paris"
    votes = message.artifact.extra["votes"]
    assert [vote["agent_id"] for vote in votes if not vote["agreed"]] == ["geo:wrong:01"]
    failed = await tools["reach_consensus"].ainvoke(
        {
            "type": "tool_call",
            "id": "call-2",
            "name": "reach_consensus",
            "args": {"capability": "capital", "payload": FRANCE, "n": 4, "quorum": 4},
        }
    )
    assert failed.status == "error"
    assert "no_consensus" in str(failed.content)


def test_the_consensus_tool_works_from_sync_code() -> None:
    router = Router()
    try:
        for agent_id in ("geo:a:01", "geo:b:01"):
            router.register(FunctionAgent(lambda country: "Paris", agent_id=agent_id, capabilities=[CAPITAL]))
        (tool,) = [
            t for t in ReachToolkit(router, include_consensus=True).get_tools() if t.name == "reach_consensus"
        ]

        answer = tool.invoke({"capability": "capital", "payload": FRANCE, "n": 2, "quorum": 2})

        assert json.loads(answer)["decision"] == "Paris"
    finally:
        router.close()


async def test_a_filtered_toolkits_consensus_tool_keeps_to_its_capabilities(voters: Router) -> None:
    voters.register(
        FunctionAgent(lambda **_: {"pick": 0}, agent_id="geo:judge:01", capabilities=[{"name": "pick"}])
    )
    (tool,) = [
        t
        for t in ReachToolkit(voters, capabilities=["capital"], include_consensus=True).get_tools()
        if t.name == "reach_consensus"
    ]

    for args in ({"capability": "pick"}, {"capability": "capital", "vote": "judge", "judge": "pick"}):
        call = {"type": "tool_call", "id": "c", "name": "reach_consensus", "args": args}
        refused = await tool.ainvoke(call)
        assert refused.status == "error"
        assert "may not reach 'pick': it is not one of the capabilities this toolkit offers" in str(
            refused.content
        )


async def test_a_namespace_toolkits_consensus_judge_may_live_in_another_namespace() -> None:
    """The voters are asked in the toolkit's namespace; the judge, routed router-wide, is not
    refused for living elsewhere (as ``reach_agent`` refuses a capability its namespace lacks)."""

    async def voter(payload: Any) -> str:
        return "yes"

    async def judge(payload: Any) -> dict[str, int]:
        return {"pick": 0}

    async with Router() as router:
        for agent_id in ("shop:voter:01", "shop:voter:02"):
            router.register(FunctionAgent(voter, agent_id=agent_id, capabilities=[{"name": "vote"}]))
        router.register(FunctionAgent(judge, agent_id="hr:pick:01", capabilities=[{"name": "pick"}]))
        toolkit = ReachToolkit(router, namespace="shop", include_consensus=True)
        tools = {tool.name: tool for tool in toolkit.get_tools()}
        args = {"capability": "vote", "payload": {}, "n": 2, "quorum": 1, "vote": "judge", "judge": "pick"}
        answer = await tools["reach_consensus"].ainvoke(
            {"type": "tool_call", "id": "c", "name": "reach_consensus", "args": args}
        )
        assert answer.status == "success", answer.content
        assert answer.artifact.extra["judge"]["agent_id"] == "hr:pick:01"
        refused = await tools["reach_agent"].ainvoke(
            {"type": "tool_call", "id": "c", "name": "reach_agent", "args": {"target": "pick"}}
        )
        assert refused.content == "reach_agent may not reach 'pick': no agent of namespace 'shop' declares it"
