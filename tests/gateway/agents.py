"""Python agents named by import path in the test config directories."""

from __future__ import annotations

import asyncio
import warnings
from pathlib import Path
from typing import Any

from langchain_core.chat_history import InMemoryChatMessageHistory
from langchain_core.messages import AIMessage
from langchain_core.prompt_values import PromptValue
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables import Runnable, RunnableLambda
from langchain_core.runnables.history import RunnableWithMessageHistory
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.runtime import Runtime
from langgraph.types import interrupt
from typing_extensions import TypedDict

from middleware import ReachMessage


def echo(payload: Any) -> Any:
    """Answer with the payload."""
    return payload


def shout(text: str) -> str:
    """Upper-case the text."""
    return text.upper()


async def hold(release: str) -> dict[str, str]:
    """Return once the file `release` exists: a call that stays in flight as long as a test wants."""
    while not Path(release).exists():
        await asyncio.sleep(0.02)
    return {"released": release}


def where(message: ReachMessage) -> dict[str, Any]:
    """Say which capability was asked for: the default agent of the tests."""
    return {"capability": message.meta_info.capability}


def _reverse(text: str) -> str:
    """Reverse the text."""
    return text[::-1]


reverser: Runnable[str, str] = RunnableLambda(_reverse, name="reverse")


def reverser_factory() -> Runnable[str, str]:
    return RunnableLambda(_reverse, name="reverse")


def needs_arguments(model: str) -> Runnable[str, str]:
    return RunnableLambda(_reverse)


def broken_factory() -> Runnable[str, str]:
    msg = "no model configured"
    raise RuntimeError(msg)


def not_a_runnable() -> str:
    return "a string"


NOT_CALLABLE = 42


def memo_graph() -> Runnable[Any, Any]:
    """A checkpointed chat graph that answers with everything its thread was told."""

    def reply(state: MessagesState) -> dict[str, Any]:
        said = [str(m.content) for m in state["messages"] if m.type == "human"]
        return {"messages": [AIMessage(" / ".join(said))]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(MessagesState)
    builder.add_node("reply", reply)
    builder.add_edge(START, "reply")
    builder.add_edge("reply", END)
    return builder.compile(checkpointer=InMemorySaver())


def approval_graph() -> Runnable[Any, Any]:
    """A checkpointed graph that stops to ask for approval, and answers with what it was told."""

    def ask(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"approved: {interrupt('approve?')}")]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(MessagesState)
    builder.add_node("ask", ask)
    builder.add_edge(START, "ask")
    builder.add_edge("ask", END)
    return builder.compile(checkpointer=InMemorySaver())


class Locale(TypedDict):
    lang: str


def localised_graph() -> Runnable[Any, Any]:
    """A graph that answers in the language its run's context names."""

    def say(state: MessagesState, runtime: Runtime[Locale]) -> dict[str, Any]:
        return {"messages": [AIMessage(f"{runtime.context['lang']}: {state['messages'][-1].content}")]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(MessagesState, context_schema=Locale)
    builder.add_node("say", say)
    builder.add_edge(START, "say")
    builder.add_edge("say", END)
    return builder.compile()


def history_chat() -> Runnable[Any, Any]:
    """A chat with a history per ``session_id`` (a `RunnableWithMessageHistory`) that answers with
    everything its history was told."""
    store: dict[str, InMemoryChatMessageHistory] = {}

    def history(session_id: str) -> InMemoryChatMessageHistory:
        if session_id not in store:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # deprecated, and still what many agents use
                store[session_id] = InMemoryChatMessageHistory()
        return store[session_id]

    def reply(prompt: PromptValue) -> AIMessage:
        return AIMessage(" / ".join(str(m.content) for m in prompt.to_messages() if m.type == "human"))

    prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("human", "{question}")])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return RunnableWithMessageHistory(
            prompt | RunnableLambda(reply),
            history,
            input_messages_key="question",
            history_messages_key="history",
        )
