"""Every runnable a runnable holds, however deep: what adapter checks that must see the whole of an
agent walk (chat histories kept per thread, middleware LangChain runs only synchronously).

A runnable holds others in its attributes: a binding's, a chain's steps, a fallback's, a
parallel's and a branch's, a graph's nodes. A runnable a function calls is not seen.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from langchain_core.runnables import Runnable

__all__ = ["every_runnable"]


def every_runnable(runnable: Runnable[Any, Any]) -> Iterator[Runnable[Any, Any]]:
    """`runnable` and every runnable it holds, each once."""
    seen: set[int] = set()
    found: list[Any] = [runnable]
    while found:
        layer = found.pop()
        if id(layer) in seen:
            continue
        seen.add(id(layer))
        yield layer
        found.extend(_held(layer))


def _held(runnable: Any) -> list[Runnable[Any, Any]]:
    """The runnables `runnable` holds in its attributes, or in lists, tuples and dicts of them
    (a chain's steps, a branch's ``(condition, runnable)`` pairs, a graph's nodes)."""
    held: list[Runnable[Any, Any]] = []

    def collect(value: Any, depth: int) -> None:
        if isinstance(value, Runnable):
            held.append(value)
        elif depth and isinstance(value, list | tuple | dict):
            for inner in value.values() if isinstance(value, dict) else value:
                collect(inner, depth - 1)
        elif value is not None and isinstance(bound := _attributes(value).get("bound"), Runnable):
            held.append(bound)  # a LangGraph graph's node (`PregelNode`)

    for value in _attributes(runnable).values():
        collect(value, 2)
    return held


def _attributes(value: Any) -> dict[str, Any]:
    """`value`'s attributes, none for an object without (slots) or one that will not say."""
    try:
        attributes = vars(value)
    except Exception:  # noqa: BLE001 - a proxy's __getattr__ may raise anything; it holds nothing
        return {}
    return attributes if isinstance(attributes, dict) else {}
