"""Real voters for consensus tests: LangChain runnables (a lambda, an LCEL chain over a fake chat
model, a LangGraph agent) and an MCP server in process, all declaring ``capital``."""

from __future__ import annotations

from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import FakeListChatModel
from langchain_core.messages import AIMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable, RunnableLambda
from mcp.server.mcpserver import MCPServer

from examples.langchain_demo.agents import scripted
from reach_adapters import Capability
from reach_adapters.langchain import LangChainAgent
from reach_adapters.mcp import MCPServerAgent

CAPITAL = Capability(
    name="capital",
    description="The capital city of a country.",
    input_schema={"type": "object", "properties": {"country": {"type": "string"}}, "required": ["country"]},
)

# The capital of France, as several answer it: the truth, and one agent's mistake.
ANSWERS = {"France": "Paris", "Italy": "Rome"}


def lambda_voter(agent_id: str = "geo:lambda:01", answer: str | None = None) -> LangChainAgent:
    """A RunnableLambda; `answer` fixes its answer (a wrong one, say)."""

    def capital(task: dict[str, Any]) -> str:
        return answer if answer is not None else ANSWERS[task["country"]]

    return LangChainAgent(RunnableLambda(capital), agent_id=agent_id, capabilities=[CAPITAL])


def chat_voter(agent_id: str = "geo:chat:01", reply: str = "Paris") -> LangChainAgent:
    """An LCEL chain: prompt, a fake chat model that always answers `reply`, a string parser."""
    prompt = ChatPromptTemplate.from_messages([("system", "name the capital only"), ("human", "{country}")])
    chain = prompt | FakeListChatModel(responses=[reply]) | StrOutputParser()
    return LangChainAgent(chain, agent_id=agent_id, capabilities=[CAPITAL])


def graph_voter(agent_id: str = "geo:graph:01", reply: str = "Paris", calls: int = 1) -> LangChainAgent:
    """A LangGraph agent from `create_agent`, its model scripted to answer `reply` `calls` times."""
    model = scripted(*(AIMessage(reply) for _ in range(calls)))
    graph: Runnable[Any, Any] = create_agent(model, tools=[], name="capital")

    def ask(task: dict[str, Any]) -> dict[str, Any]:
        return {"messages": [{"role": "user", "content": task["country"]}]}

    def last_word(state: dict[str, Any]) -> Any:
        return state["messages"][-1].content

    answered = RunnableLambda(ask) | graph | RunnableLambda(last_word)
    return LangChainAgent(answered, agent_id=agent_id, capabilities=[CAPITAL])


def geo_server(answer: str | None = None) -> MCPServer:
    server = MCPServer("geo")

    @server.tool()
    def capital(country: str) -> str:
        """The capital city of a country."""
        return answer if answer is not None else ANSWERS[country]

    return server


async def mcp_voter(name: str = "geo", answer: str | None = None) -> MCPServerAgent:
    """An MCP server in process; its tool ``capital`` becomes agent ``mcp:<name>:0``'s capability."""
    return await MCPServerAgent.connect(name, server=geo_server(answer))
