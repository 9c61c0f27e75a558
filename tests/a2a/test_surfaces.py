"""A2A agents are seen like any other: LangChain tools and the MCP gateway's tools."""

from __future__ import annotations

from typing import Any

from langchain_core.messages import ToolMessage
from mcp import Client
from mcp.types import TextContent

from middleware import ReachResult
from reach_adapters import Router
from reach_adapters.langchain import ReachToolkit
from reach_adapters.mcp import start_mcp_server


def _call(name: str, args: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "args": args, "id": "call-1", "type": "tool_call"}


async def test_skills_are_langchain_tools(routed: Router) -> None:
    tools = {tool.name: tool for tool in ReachToolkit(routed).get_tools()}
    assert {"echo", "sum", "ask"} <= tools.keys()
    assert tools["echo"].description.startswith("Echo the text back.")
    message = await tools["sum"].ainvoke(_call("sum", {"a": 1, "b": 2}))
    assert isinstance(message, ToolMessage)
    assert isinstance(message.artifact, ReachResult)
    assert message.artifact.payload == {"sum": 3}
    echoed = await tools["echo"].ainvoke(_call("echo", {"text": "via langchain"}))
    assert echoed.content == "via langchain"


async def test_skills_are_tools_of_the_mcp_gateway(routed: Router) -> None:
    async with await start_mcp_server(routed, port=0) as endpoint, Client(endpoint.url) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert {"echo", "sum", "stream"} <= tools.keys()
        assert tools["echo"].input_schema["required"] == ["text"]
        called = await client.call_tool("echo", {"text": "via mcp"})
    assert not called.is_error
    assert "".join(b.text for b in called.content if isinstance(b, TextContent)) == "via mcp"
