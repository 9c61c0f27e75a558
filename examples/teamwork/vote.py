"""Consensus: a Python function, an LCEL chain over a fake chat model and an MCP server's tool,
each a different kind of agent, answer one question; the one that got it wrong is outvoted."""

from __future__ import annotations

from langchain_core.language_models import FakeListChatModel
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from mcp.server.mcpserver import MCPServer

from reach_adapters import Capability, FunctionAgent, Router
from reach_adapters.langchain import LangChainAgent
from reach_adapters.mcp import MCPServerAgent

CAPITAL = Capability(
    name="capital",
    description="The capital city of a country.",
    input_schema={"type": "object", "properties": {"country": {"type": "string"}}, "required": ["country"]},
    output_schema={"type": "string"},
)

atlas = MCPServer("atlas", instructions="Facts about countries.")


@atlas.tool()
def capital(country: str) -> str:
    """The capital city of a country."""
    return {"France": "Paris", "Japan": "Tokyo"}.get(country, "unknown")


def gazetteer(country: str) -> str:
    """A lookup table in plain Python."""
    return {"France": "Paris", "Italy": "Rome"}.get(country, "unknown")


def guesser() -> LangChainAgent:
    """An LCEL chain (prompt | chat model | parser) whose model, a fake one, guesses wrong."""
    prompt = ChatPromptTemplate.from_messages([("human", "What is the capital of {country}? One word.")])
    chain = prompt | FakeListChatModel(responses=["Lyon"]) | StrOutputParser()
    return LangChainAgent(chain, agent_id="geo:llm:01", capabilities=[CAPITAL])


async def consensus() -> None:
    async with Router() as router:
        router.register(FunctionAgent(gazetteer, agent_id="geo:table:01", capabilities=[CAPITAL]))
        router.register(guesser())
        # The MCP server runs in this process: no subprocess, no port.
        router.register(await MCPServerAgent.connect("atlas", atlas))
        print("  voters:", ", ".join(info.agent_id for info in router.catalog()))

        # Answers are compared after normalising, so "Paris" and " paris" would agree.
        result = await router.consensus(
            "capital", {"country": "France"}, n=3, quorum=2, normalise=lambda s: str(s).strip().lower()
        )
        print(f"  decision: {result.payload!r} [{result.status}]")
        votes = result.extra["votes"]
        assert isinstance(votes, list)
        for vote in votes:
            assert isinstance(vote, dict)
            verdict = "agreed" if vote["agreed"] else "dissented"
            print(f"  vote {vote['agent_id']:<14} {vote.get('payload')!r:<10} {verdict}")

        wrong = next(str(v["agent_id"]) for v in votes if isinstance(v, dict) and not v["agreed"])
        feedback = await router.feedback(result.task_id, 1.0, reason="Paris is right")
        rated = ", ".join(f"{c.agent_id} {c.before:.2f}->{c.after:.2f}" for c in feedback.rated)
        print(f"  feedback 1.0 on the task rates the voters that agreed: {rated}")
        rating = next(info.ratings for info in router.catalog() if info.agent_id == wrong)
        print(f"  catalog: {wrong} is now rated {rating['capital']:.2f} for capital (1.00 = as declared)")
        print(f"  explain: {router.explain(result.task_id).why_not(wrong)}")
