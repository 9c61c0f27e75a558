"""Conversations with an A2A agent: the caller's thread ids mapped to the agent's contexts.

A caller continues a conversation by naming its thread (``configurable={"thread_id": ...}``), as
with a LangGraph agent; the agent knows it by the ``contextId`` it gave. A thread whose last
task stopped for input also remembers that task, which ``resume=`` answers.
"""

from __future__ import annotations

from collections import OrderedDict

from middleware import MetaInfo, ReachResult, ResultStatus
from reach_adapters.a2a.calls import Turn
from reach_adapters.errors import InvalidMessageError

__all__ = ["Threads", "thread_of"]


def thread_of(meta: MetaInfo) -> str | None:
    """The caller's thread id, if the call names one."""
    configurable = meta.configurable
    thread = configurable.get("thread_id") if configurable else None
    return None if thread is None else str(thread)


class Threads:
    """thread id -> the agent's context and the task waiting for input; the `size` newest kept."""

    def __init__(self, agent_id: str, size: int) -> None:
        self._agent_id = agent_id
        self._size = size
        self._turns: OrderedDict[str, Turn] = OrderedDict()

    def turn(self, meta: MetaInfo) -> Turn:
        """Where the call's message goes: a new context, the thread's, or (``resume=``) the task
        its last call left waiting for input."""
        thread = thread_of(meta)
        resuming = "resume" in meta.__pydantic_fields_set__
        held = self._turns.get(thread) if thread is not None else None
        if not resuming:
            return Turn(held.context_id) if held is not None else Turn()
        if thread is None:
            msg = (
                f"resume= answers an A2A task of agent {self._agent_id} that stopped for input: give "
                "the thread of the call that got input_required, configurable={'thread_id': ...}"
            )
            raise InvalidMessageError(msg)
        if held is None or not held.task_id:
            msg = f"thread {thread!r} of agent {self._agent_id} waits on no question: nothing to resume"
            raise InvalidMessageError(msg)
        return Turn(held.context_id, held.task_id)

    def remember(self, meta: MetaInfo, result: ReachResult) -> None:
        """Keep the context the agent answered in, and the task if it waits for input."""
        thread = thread_of(meta)
        ids = result.extra.get("a2a") if thread is not None else None
        if not isinstance(ids, dict):
            return
        context_id = ids.get("context_id")
        task_id = ids.get("task_id")
        if not isinstance(context_id, str) or not context_id:
            return
        waiting = task_id if result.status is ResultStatus.INPUT_REQUIRED and isinstance(task_id, str) else ""
        assert thread is not None
        self._turns[thread] = Turn(context_id, waiting)
        self._turns.move_to_end(thread)
        while len(self._turns) > self._size:
            self._turns.popitem(last=False)
