"""A LangChain tool whose arguments are injected (by the application, or LangGraph's ToolNode from
the run it is called in) is refused as an agent: a routed call has no such run, and shown to a
model such an argument would let it choose what LangChain reserves for the application."""

from __future__ import annotations

from typing import Annotated, Any

import pytest
from langchain.tools import ToolRuntime
from langchain_core.tools import InjectedToolArg, InjectedToolCallId, StructuredTool, tool
from langgraph.prebuilt import InjectedState, InjectedStore
from langgraph.store.base import BaseStore

from reach_adapters import InvalidDeclarationError, Router
from reach_adapters.langchain import LangChainAgent, ReachToolkit


@tool
def invoices(month: str, user_id: Annotated[str, InjectedToolArg]) -> str:
    """The invoices of the application's user."""
    return f"invoices of {user_id} for {month}"


@tool
def replied(month: str, tool_call_id: Annotated[str, InjectedToolCallId]) -> str:
    """Names the tool call it answers."""
    return tool_call_id


@tool
def counted(month: str, state: Annotated[dict[str, Any], InjectedState]) -> str:
    """Reads the graph's state."""
    return str(len(state))


@tool
def remembered(fact: str, store: Annotated[BaseStore, InjectedStore()]) -> str:
    """Keeps a fact in the graph's store."""
    return fact


@tool
def whoami(question: str, runtime: ToolRuntime) -> str:
    """Reads the tool's runtime."""
    return question


@tool
def plain(month: str) -> str:
    """Takes only what its caller gives."""
    return month


@pytest.mark.parametrize(
    ("tool_", "named"),
    [
        (invoices, "user_id"),
        (replied, "tool_call_id"),
        (counted, "state"),
        (remembered, "store"),
        (whoami, "runtime"),
    ],
    ids=["tool-arg", "tool-call-id", "state", "store", "runtime"],
)
def test_a_tool_with_injected_arguments_is_refused(tool_: Any, named: str) -> None:
    with pytest.raises(InvalidDeclarationError, match=f"injected arguments \\({named}\\)"):
        LangChainAgent(tool_, agent_id="shop:tool:01")
    with pytest.raises(InvalidDeclarationError, match="closure"):
        LangChainAgent(tool_.with_retry(), agent_id="shop:tool:01")


async def test_a_tool_without_them_is_served_as_before(router: Router) -> None:
    router.register(LangChainAgent(plain, agent_id="shop:plain:01"))
    (reach,) = [t for t in ReachToolkit(router).get_tools() if t.name == "plain"]
    assert set(reach.args) == {"month"}
    assert (await router.route("plain", {"month": "May"})).payload == "May"


async def test_a_tool_whose_arguments_are_a_json_schema_has_none_injected(router: Router) -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    looked = StructuredTool.from_function(
        func=lambda q: f"found {q}", name="lookup", description="Look up.", args_schema=schema
    )
    router.register(LangChainAgent(looked, agent_id="shop:lookup:01"))
    assert (await router.route("lookup", {"q": "kettle"})).payload == "found kettle"
