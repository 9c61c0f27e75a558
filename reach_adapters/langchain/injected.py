"""LangChain tools whose arguments are injected: refused as agents.

A tool's injected arguments (``InjectedToolArg``, ``InjectedToolCallId``, LangGraph's
``InjectedState`` and ``InjectedStore``, a ``ToolRuntime``) are not the model's to give: the
application or LangGraph's ``ToolNode`` supplies them, from the run the tool is called in. A routed
call has no such run, and its payload is what a caller, often a model, sends: shown to models,
such an argument would let one choose what LangChain reserves for the application (a user id);
hidden, the tool would fail on every call. So such a tool is refused when it is registered, with
the ways to serve it.
"""

from __future__ import annotations

from typing import Any

from langchain_core.runnables import Runnable
from langchain_core.tools import BaseTool

from reach_adapters.errors import InvalidDeclarationError
from reach_adapters.langchain.graphs import unwrap

__all__ = ["refuse_injected"]


def refuse_injected(runnable: Runnable[Any, Any], agent_id: str) -> None:
    """Refuse agent `agent_id` when `runnable` is (or binds) a tool with injected arguments."""
    for layer in unwrap(runnable):
        if isinstance(layer, BaseTool) and (injected := _injected(layer)):
            msg = (
                f"agent {agent_id}: tool {layer.name!r} takes injected arguments "
                f"({', '.join(sorted(injected))}), which the application or LangGraph's ToolNode "
                "gives and a routed call has none of; register a tool that takes only what its "
                "caller gives (bind the rest first, in a closure), or the graph that runs the tool"
            )
            raise InvalidDeclarationError(msg)


def _injected(tool: BaseTool) -> set[str]:
    """The arguments a tool takes that its model-facing schema (`tool_call_schema`) leaves out.
    Only a tool's Python signature marks arguments injected: one that gives its arguments as a
    JSON Schema (a dict) has none."""
    if isinstance(tool.args_schema, dict):
        return set()
    try:
        return _fields(tool.get_input_schema()) - _fields(tool.tool_call_schema)
    except Exception:  # noqa: BLE001 - a tool that cannot say what it takes is not refused for it
        return set()


def _fields(schema: Any) -> set[str]:
    if isinstance(schema, dict):
        return set(schema.get("properties", {}))
    return set(getattr(schema, "model_fields", {}))
