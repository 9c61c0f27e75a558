"""The checkpointed graphs of a `LangChainAgent` that a call can resume, read on their threads.

Where a run of the agent stopped short of its end (at ``interrupt()`` or a static breakpoint),
and what a call's ``resume=`` becomes: LangGraph's ``Command(resume=...)`` for the graph whose
thread waits on it, checked against what that thread waits on, and the runnable that resumes it.
An agent without such a graph has none of this (`Resuming.of` gives None), so its calls pay
nothing for it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

from jsonschema_rs import ReferencingError
from langchain_core.runnables import Runnable, RunnableConfig
from pydantic import JsonValue

from reach_adapters.errors import InvalidMessageError
from reach_adapters.langchain.config import newest, thread_of
from reach_adapters.langchain.describe import tool_names
from reach_adapters.langchain.graphs import (
    interrupts,
    last_moved_by,
    leading,
    resumable_graphs,
    resume_command,
    thread_config,
)
from reach_adapters.langchain.review import check_answers
from reach_adapters.langchain.savers import state_of
from reach_adapters.langchain.stops import NO_STOP, Stop, may_pause, thread_stop
from reach_adapters.router import compiled_validator, first_error, own_thread, schema_key

__all__ = ["Resuming", "answers_to", "by_id", "check_schemas", "same_interrupts"]


class Resuming:
    """The resumable graphs of the agent `agent_id`, which runs `runnable` (see `resumable_graphs`:
    each checkpointed graph a call can resume, with the runnable that takes its answer); `graph`
    is the graph whose output is the agent's, if any."""

    __slots__ = ("_agent_id", "_graph", "_may_stop", "_resumable", "_runnable")

    def __init__(
        self,
        runnable: Runnable[Any, Any],
        graph: Any | None,
        resumable: list[tuple[Any, Runnable[Any, Any]]],
        agent_id: str,
    ) -> None:
        self._runnable = runnable
        self._graph = graph
        self._resumable = resumable
        self._agent_id = agent_id
        # Whether a run that ended with no interrupt in its output may still have stopped: at a
        # breakpoint, or in a graph whose output is not the agent's (`prep | graph | post`).
        self._may_stop = graph is None or may_pause(runnable, [each for each, _ in resumable])

    @classmethod
    def of(cls, runnable: Runnable[Any, Any], graph: Any | None, agent_id: str) -> Resuming | None:
        """The resumable graphs of `runnable`; None when it has none."""
        resumable = resumable_graphs(runnable)
        return cls(runnable, graph, resumable, agent_id) if resumable else None

    def _state_config(self, config: RunnableConfig, runnable: Runnable[Any, Any]) -> RunnableConfig:
        """`config` naming the thread, which a binding around the agent's runnable or around the
        graph's step may hold instead (`thread_config`)."""
        return thread_config(config, [*leading(self._runnable), *leading(runnable)])

    def reads_after(self, output: Any) -> bool:
        """Whether `stopped` reads the threads after a run that gave `output`. The graph whose
        output this is says its interrupts there; only its thread says it paused at a breakpoint,
        and only theirs what the graphs of a chain (`prep | graph | post`) did."""
        return self._may_stop and (self._graph is None or interrupts(output) is None)

    async def stopped(self, output: Any, config: RunnableConfig) -> Stop:
        """Where the run's graphs stopped short of their end (`waiting`), when `reads_after`."""
        return await self.ended(config) if self.reads_after(output) else NO_STOP

    async def ended(self, config: RunnableConfig) -> Stop:
        """Where the run's graphs stopped (`waiting`), read at their threads' newest checkpoints
        (`newest`), not one the call named."""
        return (await self.waiting(newest(config)))[0]

    async def waiting(
        self, config: RunnableConfig, *, resuming: bool = False
    ) -> tuple[Stop, Runnable[Any, Any]]:
        """Where the first resumable graph that stopped (at interrupts or a static breakpoint)
        stopped, in chain order, and the runnable that resumes it: no stop and the last runnable
        asked when none did. `resuming`: see `thread_stop`."""
        stop = NO_STOP
        runnable = self._runnable
        for graph, runnable in self._resumable:
            stop = await thread_stop(graph, self._state_config(config, runnable), resuming=resuming)
            if stop:
                break
        return stop, runnable

    async def replays(self, config: RunnableConfig) -> bool:
        """Whether a call without input, `config` naming a checkpoint of the thread of the graph
        that takes the agent's input, replays from it (LangGraph's ``ainvoke(None, config)``).
        An id the thread does not have is no replay: the run starts from an empty state."""
        graph, runnable = self._resumable[0]
        checkpoint = config.get("configurable", {}).get("checkpoint_id")
        if runnable is not self._runnable or not isinstance(checkpoint, str) or not checkpoint:
            return False
        snapshot = await state_of(graph, self._state_config(config, runnable))
        return getattr(snapshot, "created_at", None) is not None

    async def _moved_on(self, config: RunnableConfig) -> Runnable[Any, Any] | None:
        """The runnable that resumes the graph an earlier run of this task moved last, if any."""
        task_id = str(config.get("metadata", {}).get("reach_task_id"))
        for graph, runnable in self._resumable:
            if await last_moved_by(graph, self._state_config(config, runnable), task_id):
                return runnable
        return None

    async def answer(
        self, resume: Any, config: RunnableConfig, principal: str | None
    ) -> tuple[Any, Runnable[Any, Any]]:
        """`Command(resume=...)` for the graph whose thread waits on interrupts, checked against
        them, and the runnable that resumes that graph; None for a graph paused at a breakpoint,
        which asks nothing and goes on from its thread's checkpoint, whatever `resume` is. Errors
        name the thread as `principal` named it, not as the router scoped it."""
        stop, runnable = await self.waiting(config, resuming=True)
        if stop.paused_before:
            return None, runnable
        pending = stop.interrupts
        thread = own_thread(thread_of(self._state_config(config, runnable)), principal)
        if not pending:
            rerun = await self._moved_on(config)
            if rerun is not None:
                # A retry of this task: its earlier attempt took the answer, then failed after
                # the interrupt's step. Sent again, the answer would find nothing to answer; the
                # thread goes on from its checkpoint, running what failed (LangGraph's own retry;
                # a finished graph gives its state again, for the chain's steps after it).
                return None, rerun
            msg = f"thread {thread!r} of agent {self._agent_id} waits on no interrupt: nothing to resume"
            raise InvalidMessageError(msg)
        if resume is None:
            msg = "resume= needs the answer to the interrupt, got None"
            raise InvalidMessageError(msg, fix_options={"resume": "<answer>"})
        ids = interrupt_ids(pending)
        mapped = by_id(resume)
        if len(ids) > 1 and not mapped:
            msg = (
                f"thread {thread!r} of agent {self._agent_id} waits on {len(ids)} interrupts: answer "
                f"them with resume={{interrupt id: answer}}, ids {ids} (the input_required result's "
                "extra['interrupts'])"
            )
            raise InvalidMessageError(msg, fix_options={"resume": answers_to(ids)})
        graph = next(graph for graph, resumes in self._resumable if resumes is runnable)
        answered = (
            [(item, resume[key]) for item, key in zip(pending, ids, strict=True) if key in resume]
            if mapped
            else [(pending[0], resume)]
        )
        check_answers(answered, self._agent_id, tool_names(graph))
        if len(answered) > 1:
            # A lone answer LangGraph checks itself, against the graph's own type, taking nothing
            # if it refuses; of several, those checked first would be taken (`check_schemas`).
            check_schemas(answered, self._agent_id)
        return resume_command(resume), runnable

    async def refused(self, error: Exception, resume: Any, config: RunnableConfig) -> InvalidMessageError:
        """The caller's mistake LangGraph's `error` says: it refused an answer of `resume` in the
        node that asked. Of that answer it saved nothing; of several answers (by interrupt id),
        those it took before stay taken, and the error names the interrupts still waiting."""
        refused = (
            f"resume= does not match what the interrupt of agent {self._agent_id} takes (its "
            f"response_schema): {error}"
        )
        if not by_id(resume) or len(resume) < 2:
            msg = f"{refused}; nothing was saved, answer it again on the same thread"
            return InvalidMessageError(msg, fix_options={"resume": "<answer>"})
        stop = await self.ended(config)
        waiting = interrupt_ids(stop.interrupts)
        taken = [key for key in resume if key not in waiting]
        said = f"the answers to {taken} were taken, and " if taken else ""
        msg = f"{refused}; {said}the thread still waits on {waiting}: answer those on the same thread"
        return InvalidMessageError(msg, fix_options={"resume": answers_to(waiting)})


def by_id(resume: Any) -> bool:
    """Whether LangGraph reads `resume` as answers by interrupt id (each key one's id) rather
    than as the answer to the one interrupt waiting."""
    return isinstance(resume, dict) and bool(resume) and all(_INTERRUPT_ID.fullmatch(key) for key in resume)


def interrupt_ids(interrupts: Iterable[Any]) -> list[str]:
    """The ids of LangGraph `Interrupt`s, as answers by id are keyed."""
    return [str(getattr(item, "id", "")) for item in interrupts]


def answers_to(ids: list[str]) -> JsonValue:
    """The ``resume`` that answers interrupts `ids`, as an error's ``fix_options`` shows it: a
    lone interrupt's answer alone, as LangGraph takes it."""
    return "<answer>" if len(ids) == 1 else dict.fromkeys(ids, "<answer>")


def check_schemas(answered: list[tuple[Any, Any]], agent_id: str) -> None:
    """Refuses several answers, before any is sent, when one does not match its interrupt's
    ``response_schema``.

    LangGraph checks an answer only in the node that asked: of several answers, those checked
    first are taken, their nodes run, before a later one is refused. Checked here against the JSON
    Schema each interrupt shows its callers, none is sent unless all match. JSON Schema reads
    strictly what the graph's type may take loosely (``"5"`` for an int, an alias): a lone answer
    is left to LangGraph's own check, which takes nothing when it refuses.
    """
    for item, answer in answered:
        schema = getattr(item, "response_schema", None)
        if not isinstance(schema, dict):
            continue
        try:
            validator = compiled_validator(schema_key(schema))
        except (ValueError, ReferencingError):
            continue  # no usable JSON Schema: LangGraph's own check, if any, is all there is
        problem = first_error(validator, answer, root="(answer)")
        if problem is not None:
            interrupt_id = str(getattr(item, "id", ""))
            msg = (
                f"resume= does not match what the interrupt of agent {agent_id} takes (its "
                f"response_schema, interrupt {interrupt_id}): {problem}; nothing was saved, answer "
                "them again on the same thread"
            )
            ids = interrupt_ids(each for each, _ in answered)
            raise InvalidMessageError(msg, fix_options={"resume": answers_to(ids)})


# LangGraph's interrupt ids (xxh3-128 hex digests), as it tells a map of answers by id.
_INTERRUPT_ID = re.compile(r"[0-9a-f]{32}")


def same_interrupts(these: list[Any] | None, those: list[Any]) -> bool:
    """Whether the interrupts a run's output reports (`these`) are those its thread waits on."""
    return these is not None and [getattr(item, "id", None) for item in these] == [
        getattr(item, "id", None) for item in those
    ]
