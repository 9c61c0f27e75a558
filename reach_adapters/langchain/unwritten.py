"""The answer of a state graph's run that wrote none of its output keys.

LangGraph's ``ainvoke`` returns the state only when the run wrote to it (its input included), and
None otherwise: a node that only acts (sends the daily report) and returns ``{}``, or a later turn
of a thread whose input sets nothing. The run succeeded, and the graph's output schema describes
its state: the adapter answers that state as it stands, which is what ``ainvoke(None, config)``
or ``get_state`` would show: the thread's, read at its newest checkpoint, or for a graph without
a checkpointer (or a call without a thread) the keys that hold a value from the start (a
reducer's list), else ``{}``. A graph whose output holds chat messages already answers None (no
answer), and so does an agent whose output is not surely the graph's (a `.with_fallbacks()`).
"""

from __future__ import annotations

import copy
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig

from reach_adapters.langchain.config import newest, thread_of
from reach_adapters.langchain.graphs import (
    checkpointed,
    holds_value,
    is_graph,
    message_keys_of,
    thread_config,
    trailing,
)
from reach_adapters.langchain.savers import state_of

__all__ = ["Unwritten"]


class Unwritten:
    """The state of `graph` that a run writing none of its `keys` (the output's) answers; a
    binding among `layers` may name its thread."""

    __slots__ = ("_graph", "_keys", "_layers", "_saved")

    def __init__(self, graph: Any, keys: list[str], layers: list[Runnable[Any, Any]]) -> None:
        self._graph = graph
        self._keys = keys
        self._layers = layers
        self._saved = checkpointed(graph)

    @classmethod
    def of(cls, runnable: Runnable[Any, Any]) -> Unwritten | None:
        """For a runnable whose output is a `StateGraph`'s (the graph, a binding of it, a chain
        ending in it) made of state keys none of which holds chat messages; else None."""
        layers = trailing(runnable)
        graph: Any = layers[-1]
        if not is_graph(graph):
            return None
        builder = getattr(graph, "builder", None)
        keys = getattr(graph, "output_channels", None)
        if not hasattr(builder, "state_schema") or not isinstance(keys, list):
            return None
        if message_keys_of(builder) & set(keys):
            return None
        return cls(graph, [str(key) for key in keys], layers)

    async def state(self, config: RunnableConfig) -> dict[str, Any]:
        """The output keys that hold a value, with it, on the run's thread or from the start."""
        config = thread_config(config, self._layers)
        if self._saved and thread_of(config) is not None:
            values = (await state_of(self._graph, newest(config))).values
        else:
            channels = self._graph.builder.channels
            held = [key for key in self._keys if key in channels and holds_value(channels[key])]
            values = {key: channels[key].get() for key in held}
        return {key: copy.deepcopy(values[key]) for key in self._keys if key in values}
