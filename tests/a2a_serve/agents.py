"""Agents behind the served router: one that upper-cases text, one that streams, one that holds
its call until released, and LangGraph graphs that stop to ask: for approval, two questions at
once, a decision of a given shape."""

from __future__ import annotations

import asyncio
import operator
from collections.abc import AsyncIterator
from typing import Annotated, Any, TypedDict

from langchain_core.messages import AIMessage
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.graph import END, START, MessagesState, StateGraph
from langgraph.types import interrupt
from typing_extensions import TypedDict as ExtTypedDict

from reach_adapters import Capability, FunctionAgent
from reach_adapters.router import ReachMessage, ReachResult, ok_result

TEXT_IN = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}


def shout(calls: list[str] | None = None) -> FunctionAgent:
    """``util:shout:01``: its capability ``shout`` upper-cases the text; each text is added to
    `calls` when given."""

    def run(text: str) -> str:
        if calls is not None:
            calls.append(text)
        return text.upper()

    return FunctionAgent(
        run,
        agent_id="util:shout:01",
        capabilities=[Capability(name="shout", description="upper-case the text", input_schema=TEXT_IN)],
    )


class Words:
    """Streams the words of its text one by one; invoked, answers them all at once."""

    agent_id = "util:words:01"
    capabilities = (Capability(name="words", description="split the text into words", input_schema=TEXT_IN),)

    async def invoke(self, message: ReachMessage) -> ReachResult:
        return ok_result(message, self.agent_id, " ".join(self._words(message)))

    async def astream(self, message: ReachMessage) -> AsyncIterator[Any]:
        for word in self._words(message):
            yield word

    @staticmethod
    def _words(message: ReachMessage) -> list[str]:
        payload = message.raw_payload
        assert isinstance(payload, dict)
        return str(payload["text"]).split()


class Held:
    """Answers once `release` is set; `started` is set when a call arrives, `cancelled` when
    its call is cancelled."""

    agent_id = "util:held:01"
    capabilities = (Capability(name="held", description="a long task", timeout_ms=60_000),)

    def __init__(self) -> None:
        self.started = asyncio.Event()
        self.release = asyncio.Event()
        self.cancelled = asyncio.Event()

    async def invoke(self, message: ReachMessage) -> ReachResult:
        self.started.set()
        try:
            await self.release.wait()
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return ok_result(message, self.agent_id, {"released": True})


def _in_turn(state: type, *steps: tuple[str, Any], **compiled: Any) -> Any:
    """A graph over `state` running `steps` (name, node) one after another."""
    builder: StateGraph[Any, Any, Any, Any] = StateGraph(state)
    previous = START
    for name, node in steps:
        builder.add_node(name, node)
        builder.add_edge(previous, name)
        previous = name
    builder.add_edge(previous, END)
    return builder.compile(**compiled)


def echo_graph() -> Any:
    """Answers with the text of the last message."""

    def echo(state: MessagesState) -> dict[str, Any]:
        return {"messages": [AIMessage(f"echo: {state['messages'][-1].content}")]}

    return _in_turn(MessagesState, ("echo", echo))


class Count(TypedDict):
    n: int


def steps_graph() -> Any:
    """Adds one, then doubles: two steps, each an update of its own."""
    add = ("add", lambda state: {"n": state["n"] + 1})
    double = ("double", lambda state: {"n": state["n"] * 2})
    return _in_turn(Count, add, double, name="steps")


def approval_graph() -> Any:
    """Stops at an interrupt asking for approval; resumed, answers with the decision."""

    def review(state: MessagesState) -> dict[str, Any]:
        decision = interrupt({"question": "approve the refund of order 42?"})
        return {"messages": [AIMessage(f"refund {decision}")]}

    return _in_turn(MessagesState, ("review", review), checkpointer=InMemorySaver())


class Asked(TypedDict, total=False):
    q: str
    answers: Annotated[list[str], operator.add]


# From typing_extensions: pydantic builds the response schema of no `typing` TypedDict on 3.11.
class Decision(ExtTypedDict):
    approve: bool
    amount: int


def parallel_graph() -> Any:
    """Two steps at once, each stopping at an interrupt of its own: two questions pending."""

    def left(state: Asked) -> dict[str, Any]:
        return {"answers": [f"L={interrupt('left?')}"]}

    def right(state: Asked) -> dict[str, Any]:
        return {"answers": [f"R={interrupt('right?')}"]}

    builder: StateGraph[Any, Any, Any, Any] = StateGraph(Asked)
    builder.add_node("left", left)
    builder.add_node("right", right)
    for node in ("left", "right"):
        builder.add_edge(START, node)
        builder.add_edge(node, END)
    return builder.compile(checkpointer=InMemorySaver())


def decision_graph() -> Any:
    """One interrupt whose answer must match a `response_schema` (a `Decision`)."""

    def decide(state: Asked) -> dict[str, Any]:
        decision = interrupt("approve?", response_schema=Decision)
        return {"answers": [f"{decision['approve']}:{decision['amount']}"]}

    return _in_turn(Asked, ("decide", decide), checkpointer=InMemorySaver())
