"""One call at a time on a checkpointed LangGraph thread.

Two runs at once on one thread both start from its last checkpoint and both save their own: the
later save wins, so one run's turn is lost, with the question an ``interrupt()`` asked in it, and
an answer sent to the thread meets whichever question was saved last. Parallel tool calls make
this common: a supervisor's model calling the ``approval`` tool twice in one turn sends both
calls to the thread ``alice/approval`` (the reach tools' derived thread); so do two answers to
one question sent at once (a double click, a client's retry).

So the second call is refused while the first runs, as LangGraph's own server refuses a run on
a busy thread by default (``multitask_strategy="reject"``): an `InvalidMessageError`, the
caller's to fix by calling again once the first call has its answer, never held against the
agent. Queueing it instead would not help: the first call may stop to ask, and the queued
call's input would then come where its answer belongs.

A thread is held per checkpointer, not per agent: replicas sharing one (a graph registered
twice, an app-wide saver) share its threads. Held in this process only. A run in a worker thread
(`sync_only`), which a cancelled call cannot stop, holds its thread until it ends (`hold`).
"""

from __future__ import annotations

import threading
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Iterable, Iterator
from contextlib import aclosing, contextmanager
from typing import Any, TypeVar

from pydantic import JsonValue

from middleware import ReachMessage
from reach_adapters.errors import InvalidMessageError, ReachError
from reach_adapters.langchain.config import thread_of
from reach_adapters.router import AgentBusyError

__all__ = ["ThreadTurns"]

T = TypeVar("T")

# (id of a checkpointer, thread id) of every call running now, with its claim. Ids, not the
# savers: an entry lives only while its call runs, and its agent holds the saver meanwhile.
_RUNNING: dict[tuple[int, str], _Claim] = {}
# Calls on one thread may come from several event loops (the sync bridge's threads, routers of
# their own): the check and the claim are one step.
_LOCK = threading.Lock()


class _Claim:
    """A call's threads, released once the call and any run it left in a worker have ended
    (`outlived`: one did, past the call's end)."""

    __slots__ = ("_holders", "_keys", "outlived", "task")

    def __init__(self, keys: list[tuple[int, str]], task: str) -> None:
        self._keys = keys
        self._holders = 1
        self.task = task
        self.outlived = False

    def hold(self) -> Callable[[], None]:
        with _LOCK:
            self._holders += 1
            self.outlived = True
        return self.release

    def release(self) -> None:
        with _LOCK:
            self._holders -= 1
            if not self._holders:
                for key in self._keys:
                    del _RUNNING[key]


def _nothing() -> None:
    return None


class ThreadTurns:
    """Holds a call's thread in each of an agent's checkpointers while the call runs."""

    __slots__ = ("_agent_id", "_base_thread", "_savers")

    def __init__(self, savers: Iterable[Any], base_thread: str | None, agent_id: str) -> None:
        self._savers = tuple(dict.fromkeys(id(saver) for saver in savers))
        # The thread the agent's own config names, for calls that name none.
        self._base_thread = base_thread
        self._agent_id = agent_id

    @classmethod
    def of(cls, graphs: Iterable[Any], base_thread: str | None, agent_id: str) -> ThreadTurns | None:
        """The turns of `graphs` (an agent's checkpointed graphs), None when it has none: an
        agent that keeps no thread takes calls at once, with nothing to check."""
        savers = [graph.checkpointer for graph in graphs]
        return cls(savers, base_thread, agent_id) if savers else None

    @contextmanager
    def held(self, message: ReachMessage) -> Iterator[None]:
        """The call's thread, held until the call ends; `InvalidMessageError` when another call
        holds it. A call naming no thread holds nothing (the agent refuses it if it needs one)."""
        thread = self._thread(message)
        if thread is None:
            yield
            return
        keys = [(saver, thread) for saver in self._savers]
        task = message.meta_info.task_id
        claim = _Claim(keys, task)
        with _LOCK:
            holders = [_RUNNING[key] for key in keys if key in _RUNNING]
            if holders:
                raise self._busy(thread, any(held.outlived and held.task == task for held in holders))
            _RUNNING.update(dict.fromkeys(keys, claim))
        try:
            yield
        finally:
            claim.release()

    def hold(self, message: ReachMessage) -> Callable[[], None]:
        """Keep the threads `message`'s running call holds past its end, until the returned
        function is called (a run left in a worker: `WorkerPool`'s ``hold``); a no-op when the
        call holds none."""
        thread = self._thread(message)
        claim = None if thread is None else _RUNNING.get((self._savers[0], thread))
        if claim is None or claim.task != message.meta_info.task_id:
            return _nothing
        return claim.hold()

    def _thread(self, message: ReachMessage) -> str | None:
        """The thread `message` runs on: the one it names, else the agent's own config's."""
        return thread_of({"configurable": message.meta_info.configurable}) or self._base_thread

    async def call(self, message: ReachMessage, run: Callable[[ReachMessage], Awaitable[T]]) -> T:
        """What `run` answers `message`, the thread held while it runs."""
        with self.held(message):
            return await run(message)

    async def stream(
        self, message: ReachMessage, chunks: Callable[[ReachMessage], AsyncGenerator[JsonValue, None]]
    ) -> AsyncIterator[JsonValue]:
        """The stream `chunks` gives for `message`, the thread held from its first chunk asked
        to its end or until its reader closes it."""
        with self.held(message):
            async with aclosing(chunks(message)) as stream:
                async for chunk in stream:
                    yield chunk

    def _busy(self, thread: str, outlived: bool) -> Exception:
        if outlived:
            # The router's retry of a call whose run outlived its deadline in a worker: nothing of
            # the caller's, and the run it waits on is the attempt that timed out.
            msg = (
                f"thread {thread!r} of agent {self._agent_id} still runs this task's earlier attempt, "
                "past its deadline: not sent again beside it"
            )
            return ThreadStillRunningError(msg)
        msg = (
            f"thread {thread!r} of agent {self._agent_id} is running another call: a checkpointed "
            "thread takes one call at a time, or the two would save over each other's turn and an "
            "answer could meet the other call's question. Wait for that call's answer (if it asks "
            "for input, answer it first with resume on this thread), then send this call again"
        )
        return InvalidMessageError(msg)


class ThreadStillRunningError(ReachError, AgentBusyError):
    """A retry of a task whose earlier attempt still runs on the thread (in a worker, past its
    deadline): not sent, held against no one; the earlier attempt's failure is the answer."""

    delivered = False
