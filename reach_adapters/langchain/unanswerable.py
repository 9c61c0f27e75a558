"""A run that stopped at ``interrupt()`` where nothing can resume it: the agent's own failure.

LangGraph resumes a graph from its thread's last checkpoint, so ``interrupt()`` in a graph compiled
without a checkpointer asks a question no answer can ever reach: the run ends as if it had
finished (its output reports the interrupt, a stream marks it), and a ``resume`` has nothing to go
on from. Such an agent is misbuilt, as a replica of it would be: its run fails, never retried,
rather than asking its caller for an answer it then refuses.

Only runs of graphs the adapter sees are looked at (a function that runs a graph may answer its
interrupts itself: its runs still ask), and a stream only when the call
names a ``stream_mode``, which may not show the interrupt (``"messages"``, ``"custom"``): the
graph then streams LangGraph's ``"updates"`` as well, which always do, and those the call did not
ask for are dropped here.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

from reach_adapters.errors import InvalidDeclarationError
from reach_adapters.langchain.graphs import INTERRUPT_KEY
from reach_adapters.langchain.stops import may_pause

__all__ = ["Watch", "interrupted", "refuse_unsaved_breakpoints", "unanswerable", "watched"]

# The stream mode in which LangGraph always says that a run stopped at interrupt().
_UPDATES = "updates"


def unanswerable(agent_id: str, *, unreachable: bool = False) -> InvalidDeclarationError:
    """The error of agent `agent_id`, whose run stopped at ``interrupt()`` with nothing to resume
    it: no checkpointer, or (`unreachable`) a checkpointed graph that ``resume=`` cannot reach."""
    if unreachable:
        fix = (
            "its checkpointed graph runs where resume= cannot reach it (inside a parallel step, a "
            "fallback or a nested runnable); register the graph itself, or a chain that has it as a step"
        )
    else:
        fix = "compile the graph with checkpointer=... (e.g. InMemorySaver()), and call it on a thread"
    msg = (
        f"agent {agent_id} stopped at interrupt() to ask for input that can never reach it: "
        f"interrupt() needs a checkpointer to resume the run from; {fix}"
    )
    return InvalidDeclarationError(msg)


def refuse_unsaved_breakpoints(runnable: Any, graph: Any, agent_id: str) -> None:
    """Refuse agent `agent_id` when its `graph`, compiled without a checkpointer, has static
    breakpoints (its own, a subgraph's, or a binding's): every run would stop at one and end
    there, answering its partial state as if it had finished, with nothing to go on from."""
    if may_pause(runnable, [graph]):
        msg = (
            f"agent {agent_id}: its LangGraph graph pauses at static breakpoints (interrupt_before/"
            "interrupt_after) but has no checkpointer to go on from, so every run would end at the "
            "first one; compile it with checkpointer=... (e.g. InMemorySaver()), or without the breakpoints"
        )
        raise InvalidDeclarationError(msg)


def interrupted(chunk: Any) -> bool:
    """Whether a chunk in LangGraph's ``"updates"`` or ``"values"`` shape reports interrupts (a
    static breakpoint's ``{"__interrupt__": ()}`` reports none)."""
    return type(chunk) is dict and bool(chunk.get(INTERRUPT_KEY))


def watched(mode: str | list[str]) -> list[str]:
    """The stream modes to ask a graph for: `mode`, as a list, and ``"updates"``."""
    modes = [mode] if isinstance(mode, str) else list(mode)
    return modes if _UPDATES in modes else [*modes, _UPDATES]


class Watch:
    """The chunks of `stream`, which a graph streams in the modes `watched(mode)` gives, in the
    shape `mode` asks: LangGraph's ``(mode, chunk)`` pairs (``(namespace, mode, chunk)`` with
    subgraphs) as they are for a list of modes, the chunk alone (after its namespace) for one.
    `asked`: whether an update said the run stopped at ``interrupt()``."""

    __slots__ = ("_mode", "_stream", "asked")

    def __init__(self, stream: AsyncIterator[Any], mode: str | list[str]) -> None:
        self._stream = stream
        self._mode = mode
        self.asked = False

    def __aiter__(self) -> AsyncIterator[Any]:
        return self._chunks()

    async def _chunks(self) -> AsyncIterator[Any]:
        mode = self._mode
        own = _UPDATES in ([mode] if isinstance(mode, str) else mode)
        single = isinstance(mode, str)
        async for chunk in self._stream:
            kind, data = chunk[-2], chunk[-1]
            if kind == _UPDATES:
                self.asked = self.asked or interrupted(data)
                if not own:
                    continue
            if single:
                yield data if len(chunk) == 2 else (chunk[0], data)
            else:
                yield chunk
