"""What a runnable does, in words, for matchers and models: its own, else what it is made of."""

from __future__ import annotations

import inspect
from typing import Any

from langchain_core.language_models import BaseChatModel
from langchain_core.prompts import ChatPromptTemplate, SystemMessagePromptTemplate
from langchain_core.retrievers import BaseRetriever
from langchain_core.runnables import (
    Runnable,
    RunnableSequence,
    RunnableWithFallbacks,
    RunnableWithMessageHistory,
)
from langchain_core.runnables.base import RunnableBindingBase

from reach_adapters.langchain.graphs import find_graph, unwrap

__all__ = ["description", "tool_names"]


def description(runnable: Runnable[Any, Any]) -> str:
    """What the runnable does, for matchers and models: its own words, else what it is made of."""
    layers = _described(runnable)
    # Wrappers (`.with_retry()`, `.with_fallbacks()`...) describe nothing themselves: look inside.
    for wrapped in layers:
        said = getattr(wrapped, "description", None)
        if isinstance(said, str) and said:
            return said
        # A RunnableLambda keeps the function it wraps; its docstring says what it does.
        func = getattr(wrapped, "func", None) or getattr(wrapped, "afunc", None)
        doc = inspect.getdoc(func) if callable(func) else None
        if doc:
            return doc
    inner = layers[-1]
    graph = find_graph(inner)
    if graph is not None:
        return _graph_description(graph)
    return _kind_description(inner)


def tool_names(graph: Any) -> frozenset[str] | None:
    """The names of the tools an agent graph's ``tools`` node runs, or None when it has none."""
    tools = _tools(graph)
    return None if tools is None else frozenset(tools)


def _described(runnable: Runnable[Any, Any]) -> list[Runnable[Any, Any]]:
    """`runnable` and what it wraps, outermost first: what bindings wrap, a `.with_fallbacks()`'s
    primary, and the runnable a `RunnableWithMessageHistory` keeps a history for, not the chain
    LangChain wires around it (``RunnableAssign<text> → _call_runnable_sync``)."""
    found = [runnable]
    while (inner := _inside(found[-1])) is not None:
        found.append(inner)
    return found


def _inside(runnable: Runnable[Any, Any]) -> Runnable[Any, Any] | None:
    """What `runnable` wraps and describes, if it is a wrapper (see `_described`)."""
    if isinstance(runnable, RunnableWithMessageHistory):
        return _history_of(runnable) or runnable.bound
    if isinstance(runnable, RunnableBindingBase):
        return runnable.bound
    if isinstance(runnable, RunnableWithFallbacks):
        return runnable.runnable
    return None


def _history_of(history: RunnableWithMessageHistory) -> Runnable[Any, Any] | None:
    """The runnable a `RunnableWithMessageHistory` wraps, which LangChain keeps only in the
    closure of its chain's last step (best effort: None when it is not found there)."""
    chain = unwrap(history.bound)[-1]
    last = unwrap(chain.last)[-1] if isinstance(chain, RunnableSequence) else None
    found = _nonlocal(last, "runnable_sync")
    return found if isinstance(found, Runnable) else None


def _kind_description(runnable: Runnable[Any, Any]) -> str:
    """A description from the kind of runnable: a chat model, a retriever, a prompt, a chain."""
    if isinstance(runnable, BaseChatModel):
        model = getattr(runnable, "model_name", None) or getattr(runnable, "model", None)
        named = f" {model}" if isinstance(model, str) and model else ""
        kind = runnable._llm_type
        return f"A chat model ({kind}{named}): answers a conversation, given its messages or a text."
    if isinstance(runnable, BaseRetriever):
        return f"Finds the documents relevant to a query ({type(runnable).__name__})."
    if isinstance(runnable, ChatPromptTemplate):
        return _system_text(runnable) or ""
    steps = getattr(runnable, "steps", None)
    if isinstance(runnable, RunnableSequence) and isinstance(steps, list):
        prompt = next((step for step in steps if isinstance(step, ChatPromptTemplate)), None)
        said = _system_text(prompt) if prompt is not None else None
        chain = " → ".join(step.get_name() for step in steps)
        return f"{said} (a chain: {chain})" if said else f"A chain: {chain}."
    return ""


def _system_text(prompt: ChatPromptTemplate) -> str | None:
    """The system message of a chat prompt, as written (its variables left in braces)."""
    for message in prompt.messages:
        if isinstance(message, SystemMessagePromptTemplate):
            template = getattr(message.prompt, "template", None)
            if isinstance(template, str) and template:
                return template
    return None


def _graph_description(graph: Any) -> str:
    """What a graph does, from what it shows: an ``@entrypoint`` workflow's docstring, its agent's
    system prompt, else the tools its agent uses (an agent whose prompt is made per call shows
    none), else its steps."""
    prompt = _workflow_doc(graph) or _system_prompt(graph)
    if prompt:
        return prompt
    tools = _tools(graph)
    if tools:
        shown = [_tool_line(name, tool) for name, tool in list(tools.items())[:_MOST_TOOLS]]
        if len(tools) > _MOST_TOOLS:
            shown.append(f"and {len(tools) - _MOST_TOOLS} more")
        return f"An agent using the tools {'; '.join(shown)}."
    nodes = [name for name in getattr(graph, "nodes", {}) if not name.startswith("__")]
    return f"A LangGraph graph with the steps {', '.join(nodes)}." if nodes else ""


_MOST_TOOLS = 8


def _workflow_doc(graph: Any) -> str | None:
    """The docstring of the function an ``@entrypoint`` workflow runs: such a graph has no
    builder and one node, that function, which says best what the workflow does."""
    nodes = list(getattr(graph, "nodes", {}).values())
    if hasattr(graph, "builder") or len(nodes) != 1:
        return None
    bound = getattr(nodes[0], "bound", None)
    func = getattr(bound, "func", None) or getattr(bound, "afunc", None)
    return inspect.getdoc(func) if callable(func) else None


def _system_prompt(graph: Any) -> str | None:
    """The system prompt of a `create_agent` agent, kept by its model node, or of LangGraph's
    `create_react_agent`, kept by the prompt step before its model: a text, a `SystemMessage` or a
    chat prompt (best effort)."""
    nodes = graph.builder.nodes if hasattr(graph, "builder") else {}
    node = getattr(nodes.get("model") or nodes.get("agent"), "runnable", None)
    said = _nonlocal(node, "system_message")
    model = _nonlocal(node, "static_model")
    if said is None and isinstance(model, RunnableSequence):
        first = model.first
        if isinstance(first, ChatPromptTemplate):
            return _system_text(first)
        said = _nonlocal(first, "_system_message") or _nonlocal(first, "prompt")
    text = getattr(said, "text", None)
    return str(text) if text else None


def _nonlocal(runnable: Any, name: str) -> Any:
    """A variable the function a runnable (a LangGraph node, a lambda) closes over, or None."""
    func = getattr(runnable, "func", None) or getattr(runnable, "afunc", None)
    try:
        return inspect.getclosurevars(func).nonlocals.get(name) if callable(func) else None
    except (TypeError, ValueError):
        return None


def _tools(graph: Any) -> dict[str, Any] | None:
    """The tools of an agent graph's ``tools`` node, by name."""
    nodes = graph.builder.nodes if hasattr(graph, "builder") else {}
    by_name = getattr(getattr(nodes.get("tools"), "runnable", None), "tools_by_name", None)
    return by_name if isinstance(by_name, dict) else None


def _tool_line(name: str, tool: Any) -> str:
    """A tool's name with the first line of its description."""
    said = str(getattr(tool, "description", "") or "").strip().split("\n", 1)[0][:100]
    return f"{name} ({said})" if said else name
