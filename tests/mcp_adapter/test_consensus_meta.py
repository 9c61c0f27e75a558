"""The consensus tool served over MCP carries the request's `_meta` to its voters as a
capability's call does: the thread and other call options, the trace id, and, for voters that
are MCP servers, the client's own keys."""

from __future__ import annotations

from typing import Any, cast

import mcp
import pytest
from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from mcp.types import RequestParamsMeta

from reach_adapters import Router
from reach_adapters.langchain import LangChainAgent
from reach_adapters.mcp import MCPOptions, MCPServerAgent, RouterMCPServer
from tests.mcp_adapter.servers import chatty

pytestmark = pytest.mark.timeout(60)


def counting_graph() -> Any:
    """Answers with how many messages its thread holds: a thread kept across calls grows."""

    def reply(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"seen {len(state['messages'])}")]}

    builder = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=InMemorySaver())


def consensus(capability: str, payload: Any = None, **more: Any) -> dict[str, Any]:
    return {"capability": capability, "payload": payload, "n": 2, "quorum": 2, **more}


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_checkpointed_graph_voters_keep_the_callers_thread(mode: str) -> None:
    user = {"messages": [{"role": "user", "content": "hello"}]}
    async with Router() as router:
        router.register(LangChainAgent(counting_graph(), agent_id="chat:echo:01"))
        router.register(LangChainAgent(counting_graph(), agent_id="talk:echo:01"))
        served = RouterMCPServer(router, consensus_tool=True)
        thread = cast(RequestParamsMeta, {"agent-reach/configurable": {"thread_id": "t-1"}})
        async with mcp.Client(served.server, mode=mode) as client:
            first = await client.call_tool("reach_consensus", consensus("echo", user), meta=thread)
            second = await client.call_tool("reach_consensus", consensus("echo", user), meta=thread)
    assert not first.is_error, first.content
    assert first.structured_content is not None
    assert first.structured_content["decision"] == "seen 1"
    # The second call found the first turn on the thread (user, answer, user).
    assert second.structured_content is not None
    assert second.structured_content["decision"] == "seen 3"


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_mcp_voters_get_the_callers_ids_options_and_own_meta_keys(mode: str) -> None:
    async with Router() as router:
        for instance in ("a", "b"):
            # Plain MCP servers, which get the task only when asked to (another router reads it).
            options = MCPOptions(instance=instance, task_meta="always")
            router.register(await MCPServerAgent.connect("chatty", server=chatty.server, options=options))
        sent = {
            "example.com/user": "ada",
            "agent-reach/trace_id": "trace-7",
            "agent-reach/configurable": {"thread_id": "t-9"},
        }
        async with mcp.Client(RouterMCPServer(router, consensus_tool=True).server, mode=mode) as client:
            answer = await client.call_tool(
                "reach_consensus", consensus("request_meta", {}), meta=cast(RequestParamsMeta, sent)
            )
    assert answer.structured_content is not None
    votes = answer.structured_content["votes"]
    assert sorted(vote["agent_id"] for vote in votes) == ["mcp:chatty:a", "mcp:chatty:b"]
    for vote in votes:
        seen = vote["payload"]
        assert seen["example.com/user"] == "ada"
        assert seen["agent-reach/trace_id"] == "trace-7"
        assert seen["agent-reach/configurable"] == {"thread_id": "t-9"}
        assert answer.meta is not None
        assert seen["agent-reach/task_id"] == answer.meta["agent-reach/task_id"]
