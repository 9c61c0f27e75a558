"""Run the router's coroutines from synchronous code.

LangChain invokes tools synchronously, often from a worker thread while an event loop runs
elsewhere. Agents such as MCP sessions belong to the loop they were opened on, so a blocking call
is sent to the router's home loop when that loop is running; otherwise to a private loop in a
daemon thread, started once and reused, never a new loop per call.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

from reach_adapters.errors import SyncCallError

__all__ = ["Portal"]

T = TypeVar("T")


class _LoopGoneError(Exception):
    """The target loop stopped before it took the coroutine."""


# How often a waiting sync caller checks that the loop it waits on still runs.
_LIVENESS_CHECK_S = 0.5


def _run_in(loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T]) -> T:
    """Run `coro` on `loop` and wait for it, carrying the caller's context variables along.

    `asyncio.run_coroutine_threadsafe` would drop them, and with them the enclosing routed call
    (depth, lineage, deadline) and LangChain's parent run. Raises `_LoopGoneError` (with `coro` not
    started) when the loop stops or closes before taking it, instead of waiting forever.
    """
    context = contextvars.copy_context()
    done: concurrent.futures.Future[T] = concurrent.futures.Future()
    # Decided once, under the lock: either the loop starts `coro`, or the caller gives up on it.
    lock = threading.Lock()
    state = {"started": False, "abandoned": False}

    def settle(task: asyncio.Task[T]) -> None:
        if task.cancelled():
            done.cancel()
        elif (exc := task.exception()) is not None:
            done.set_exception(exc)
        else:
            done.set_result(task.result())

    def start() -> None:
        with lock:
            if state["abandoned"]:
                return
            state["started"] = True
        loop.create_task(coro, context=context).add_done_callback(settle)

    try:
        loop.call_soon_threadsafe(start)
    except RuntimeError:
        raise _LoopGoneError from None
    while True:
        try:
            return done.result(timeout=_LIVENESS_CHECK_S)
        except concurrent.futures.TimeoutError:
            if loop.is_running():
                continue
            with lock:
                if not state["started"]:
                    state["abandoned"] = True
                    raise _LoopGoneError from None


class Portal:
    def __init__(self) -> None:
        self._home: asyncio.AbstractEventLoop | None = None
        self._own: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Remember the loop the router is used from, unless a live one is already known."""
        home = self._home
        if home is not loop and (home is None or home.is_closed() or not home.is_running()):
            self._home = loop

    def call(self, coro: Coroutine[Any, Any, T], *, what: str) -> T:
        try:
            running: asyncio.AbstractEventLoop | None = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        home = self._home
        if home is not None and home.is_running() and not home.is_closed():
            if running is home:
                coro.close()
                msg = (
                    f"{what}_sync was called from inside the event loop that serves the router, "
                    f"which would block it forever; use 'await router.{what}(...)' here"
                )
                raise SyncCallError(msg)
            try:
                return _run_in(home, coro)
            except _LoopGoneError:
                self._home = None  # it stopped under us; the private loop takes over
        return _run_in(self._own_loop(), coro)

    def _own_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._own is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="agent-reach-portal", daemon=True)
                thread.start()
                self._own, self._thread = loop, thread
            return self._own

    def close(self) -> None:
        with self._lock:
            loop, thread = self._own, self._thread
            self._own = self._thread = None
        if loop is not None and thread is not None:
            loop.call_soon_threadsafe(loop.stop)
            thread.join(timeout=5)
            loop.close()
