"""The example config's Python agents, named there by import path. All run offline.

The refund agent and the summary chain are built like `examples.langchain_demo`'s, but answer
every call the same way, since a server keeps them for as long as it runs.
"""

from __future__ import annotations

from itertools import cycle
from typing import Any

from langchain.agents import create_agent
from langchain_core.messages import AIMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompt_values import PromptValue
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import Runnable, RunnableLambda
from langgraph.graph.state import CompiledStateGraph

from examples.langchain_demo.agents import ScriptedChatModel, lookup_order
from middleware import ReachMessage


def refund_agent() -> CompiledStateGraph[Any, Any, Any, Any]:
    """A `create_agent` agent that looks the order up with its own tool, then decides."""
    model = ScriptedChatModel(
        messages=cycle(
            [
                AIMessage(
                    "", tool_calls=[{"name": "lookup_order", "args": {"order_id": "42"}, "id": "lookup"}]
                ),
                AIMessage("Refund of 39.90 approved for order 42 (kettle delivered damaged)."),
            ]
        )
    )
    return create_agent(
        model, tools=[lookup_order], name="refund", system_prompt="You decide refunds for orders."
    )


def _first_sentence(prompt: PromptValue) -> AIMessage:
    """Stands in for a chat model: the first sentence of the customer's message."""
    text = str(prompt.to_messages()[-1].content)
    return AIMessage(text.split(". ")[0].rstrip(".") + ".")


def summary_chain() -> Runnable[dict[str, Any], str]:
    """An LCEL chain: prompt | model | parser."""
    prompt = ChatPromptTemplate.from_messages(
        [("system", "Summarise the customer's message in one line."), ("human", "{text}")]
    )
    return prompt | RunnableLambda(_first_sentence) | StrOutputParser()


def fallback(message: ReachMessage) -> dict[str, Any]:
    """Answers tasks no other agent can serve, saying what was asked."""
    return {
        "answered_by": "the default agent",
        "capability": message.meta_info.capability,
        "hint": "no agent declares this capability; `reach catalog` lists the ones that exist",
    }
