"""Where a checkpointed graph's thread stopped short of its end, and what the caller is told.

A graph stops to ask at ``interrupt()``: its thread waits on the interrupts' answers. It also
stops at a static breakpoint (``compile(interrupt_before=[...])``, ``interrupt_after``,
``create_agent(..., interrupt_before=["tools"])``): its thread is paused before its next steps,
and waits on nothing but a go-ahead, which LangGraph takes as ``ainvoke(None, config)``. Neither
is a failure. A breakpoint leaves no mark in the run's output, so only the thread's state tells:
steps still to run, and no interrupt waiting.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pydantic import JsonValue

from middleware import ReachMessage, ReachResult
from reach_adapters.langchain.convert import interrupted_result, to_json
from reach_adapters.langchain.graphs import leading
from reach_adapters.langchain.savers import state_of
from reach_adapters.router import input_required_result

__all__ = ["NO_STOP", "PAUSED_KEY", "Stop", "has_breakpoints", "may_pause", "stop_result", "thread_stop"]

# The key of a breakpoint's input_required payload (and of its result's `extra`): the steps the
# graph paused before, as LangGraph's state snapshot names them in ``next``.
PAUSED_KEY = "paused_before"


@dataclass(frozen=True)
class Stop:
    """Where a graph's thread stopped: the interrupts it waits on, or (none waiting) the steps a
    static breakpoint paused it before. False when it did not stop."""

    interrupts: list[Any] = field(default_factory=list)
    paused_before: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return bool(self.interrupts or self.paused_before)


NO_STOP = Stop()


async def thread_stop(graph: Any, config: Any, *, resuming: bool = False) -> Stop:
    """Where the graph's thread (in `config`) stopped, read from its state.

    Steps still to run with no interrupt waiting are a breakpoint's pause, unless a step of them
    failed: a run that raised part-way is no pause (a fallback may have answered for it), and
    continuing it would drop the answer a caller meant for an interrupt. When `resuming`, in a
    graph that has static breakpoints, it is taken as the pause it failed to go on from (a step
    after the breakpoint raised once let go on), so that it can be let go on again, by the
    router's retry of the task too, as LangGraph's ``ainvoke(None, config)`` does.
    """
    snapshot = await state_of(graph, config)
    pending = list(getattr(snapshot, "interrupts", ()) or ())
    if pending:
        return Stop(interrupts=pending)
    steps = [str(step) for step in getattr(snapshot, "next", ()) or ()]
    if steps and (not _failed(snapshot) or (resuming and has_breakpoints(graph))):
        return Stop(paused_before=steps)
    return NO_STOP


def _failed(snapshot: Any) -> bool:
    """Whether a step of the thread's next ones raised when it last ran."""
    return any(getattr(task, "error", None) is not None for task in getattr(snapshot, "tasks", ()))


def may_pause(runnable: Any, graphs: list[Any]) -> bool:
    """Whether a run of `runnable` may pause at a static breakpoint: one of its checkpointed
    `graphs` (or a subgraph it runs as a node) was compiled with breakpoints, or a binding on
    the way gives them (``.bind(interrupt_before=[...])``). Only such runs need their thread read
    after they end, which costs a checkpoint read a call."""
    for layer in leading(runnable):
        kwargs = getattr(layer, "kwargs", None)
        if isinstance(kwargs, dict) and (kwargs.get("interrupt_before") or kwargs.get("interrupt_after")):
            return True
    return any(has_breakpoints(graph) for graph in graphs)


def has_breakpoints(graph: Any) -> bool:
    """Whether the graph, or a subgraph it runs as a node, was compiled with static breakpoints."""
    subgraphs = getattr(graph, "get_subgraphs", None)
    graphs = [graph, *(inner for _, inner in subgraphs(recurse=True))] if callable(subgraphs) else [graph]
    return any(
        getattr(each, "interrupt_before_nodes", None) or getattr(each, "interrupt_after_nodes", None)
        for each in graphs
    )


def stop_result(stop: Stop, message: ReachMessage, state: Any = None) -> ReachResult:
    """The ``input_required`` result of a graph that stopped, with its `state` so far when given.

    For interrupts: what they ask (see `interrupted_result`). For a breakpoint:
    ``{"paused_before": [step, ...]}``, also in ``extra["paused_before"]``, which marks the result
    as a pause (an interrupt's value may look alike); any ``resume`` continues it.
    """
    if stop.interrupts:
        return interrupted_result(stop.interrupts, message, state)
    steps: list[JsonValue] = list(stop.paused_before)
    extra: dict[str, JsonValue] = {PAUSED_KEY: steps}
    if state is not None:
        extra["output"] = to_json(state, where="output")
    return input_required_result(message, None, {PAUSED_KEY: steps}, extra=extra)
