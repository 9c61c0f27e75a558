"""The demo's LangChain agents, built as anyone would build them; none knows about Agent Reach."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from itertools import cycle
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models import GenericFakeChatModel, LanguageModelInput
from langchain_core.messages import AIMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool, tool
from langgraph.graph.state import CompiledStateGraph


class ScriptedChatModel(GenericFakeChatModel):
    """A fake chat model that answers from a script, and accepts tools as a real one would."""

    def bind_tools(
        self,
        tools: Sequence[dict[str, Any] | type | Callable[..., Any] | BaseTool],
        *,
        tool_choice: str | None = None,
        **kwargs: Any,
    ) -> Runnable[LanguageModelInput, AIMessage]:
        return self


def scripted(*replies: AIMessage, repeat: bool = False) -> ScriptedChatModel:
    """A model that answers with `replies` in turn; with `repeat` it starts over when they run out,
    so an agent made with it serves any number of runs, as one with a real model does: each
    answer a new message (a message given again keeps the id LangChain gave it, and a thread
    would take it as the earlier answer replaced)."""
    return ScriptedChatModel(
        messages=(reply.model_copy() for reply in cycle(replies)) if repeat else iter(replies)
    )


@tool
def lookup_order(order_id: str) -> dict[str, Any]:
    """Look up an order by id."""
    return {"order_id": order_id, "item": "kettle", "paid": 39.9, "state": "delivered, damaged"}


def refund_agent() -> CompiledStateGraph[Any, Any, Any, Any]:
    """A `create_agent` agent: looks the order up with its own tool, then decides."""
    model = scripted(
        AIMessage("", tool_calls=[{"name": "lookup_order", "args": {"order_id": "42"}, "id": "lookup-1"}]),
        AIMessage("Refund of 39.90 approved for order 42 (kettle delivered damaged)."),
        repeat=True,
    )
    return create_agent(
        model, tools=[lookup_order], name="refund", system_prompt="You decide refunds for orders."
    )


def summary_chain() -> Runnable[dict[str, Any], str]:
    """An LCEL chain: prompt | model | parser."""
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Summarise the customer's message in one line."), ("human", "{text}")]
    )
    summary = AIMessage("Customer reports a damaged kettle (order 42) and wants a refund.")
    model = scripted(summary, repeat=True)
    return prompt | model | StrOutputParser()


def supervisor(tools: list[BaseTool]) -> CompiledStateGraph[Any, Any, Any, Any]:
    """A `create_agent` agent whose only tools are the router's: it reaches the other two."""
    complaint = "My kettle from order 42 arrived broken. I want my money back."
    model = scripted(
        AIMessage(
            "",
            tool_calls=[
                {"name": "summarize", "args": {"text": complaint}, "id": "call-summary"},
                {
                    "name": "refund",
                    "args": {"messages": [{"role": "user", "content": f"Refund request: {complaint}"}]},
                    "id": "call-refund",
                },
            ],
        ),
        AIMessage("Done: the ticket is summarised and the refund for order 42 is approved."),
    )
    return create_agent(
        model, tools=tools, name="supervisor", system_prompt="Triage tickets with the tools you have."
    )
