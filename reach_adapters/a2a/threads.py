"""Conversations with an A2A agent: the caller's thread ids mapped to the agent's contexts.

A caller continues a conversation by naming its thread (``configurable={"thread_id": ...}``), as
with a LangGraph agent; the agent knows it by the ``contextId`` it gave. A thread whose last
task stopped for input also remembers that task, which ``resume=`` answers.
"""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, nullcontext

from middleware import MetaInfo, ReachResult, ResultStatus
from reach_adapters.a2a.calls import Turn
from reach_adapters.a2a.errors import A2ANotHereError
from reach_adapters.a2a.states import WAITING
from reach_adapters.errors import InvalidMessageError
from reach_adapters.router import own_thread, thread_of

__all__ = ["Threads"]

# Around a call that opens no thread: nothing to wait for (reusable, it holds no state).
_FREE: AbstractAsyncContextManager[None] = nullcontext()


class Threads:
    """thread id -> the agent's context and the task waiting for input; the `size` newest kept."""

    def __init__(self, agent_id: str, size: int) -> None:
        self._agent_id = agent_id
        self._size = size
        self._turns: OrderedDict[str, Turn] = OrderedDict()
        # Threads whose first turn is under way: later turns wait for the context it opens.
        self._opening: dict[str, tuple[asyncio.Lock, list[int]]] = {}

    def first_turns_in_order(self, meta: MetaInfo) -> AbstractAsyncContextManager[None]:
        """Around a call: while a thread has no context yet, its calls go one at a time, so
        concurrent first turns do not each open a context of their own."""
        thread = thread_of(meta)
        if thread is None or thread in self._turns:
            return _FREE
        return self._opening_turn(thread)

    @asynccontextmanager
    async def _opening_turn(self, thread: str) -> AsyncIterator[None]:
        lock, users = self._opening.setdefault(thread, (asyncio.Lock(), [0]))
        users[0] += 1
        try:
            async with lock:
                yield
        finally:
            users[0] -= 1
            if not users[0]:
                del self._opening[thread]

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
            raise InvalidMessageError(msg, fix_options={"configurable": {"thread_id": "<thread id>"}})
        if held is None or not held.task_id:
            # Another replica may have asked (each keeps its own threads), or the thread fell
            # out of the `size` kept: the router tries the next replica, which may hold it.
            shown = own_thread(thread, meta.principal)
            # A thread this replica asked on, answered already, is told so: not only "elsewhere".
            where = (
                "resume on the agent that asked (the input_required result's agent_id)"
                if held is None
                else "its last task on the thread here ended (answered already?); resume a thread "
                "whose last call got input_required"
            )
            msg = f"thread {shown!r} waits on no question of A2A agent {self._agent_id}: {where}"
            raise A2ANotHereError(msg)
        return Turn(held.context_id, held.task_id)

    def remember(self, meta: MetaInfo, result: ReachResult) -> None:
        """Keep the context the agent answered in, and the task if it waits for input."""
        thread = thread_of(meta)
        if thread is None:
            return
        ids = result.extra.get("a2a")
        if not isinstance(ids, dict):
            return
        context_id = ids.get("context_id")
        task_id = ids.get("task_id")
        if not isinstance(context_id, str) or not context_id:
            return
        # A refused answer whose task still waits (`WAITING`) keeps the question for the next one.
        asks = result.status is ResultStatus.INPUT_REQUIRED or ids.get(WAITING) is True
        waiting = task_id if asks and isinstance(task_id, str) else ""
        self._turns[thread] = Turn(context_id, waiting)
        self._turns.move_to_end(thread)
        while len(self._turns) > self._size:
            self._turns.popitem(last=False)
