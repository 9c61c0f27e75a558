"""Run the router's coroutines from synchronous code.

LangChain invokes tools synchronously, often from a worker thread while an event loop runs
elsewhere. Agents such as MCP sessions belong to the loop they were opened on, so a blocking call
is sent to the router's home loop when that loop is running; otherwise to a private loop in a
daemon thread, started once and reused, never a new loop per call. That loop is wound down (its
tasks cancelled, its thread joined) when the portal is closed, collected, or the interpreter exits.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import contextvars
import math
import threading
import time
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from reach_adapters.errors import SyncCallError

__all__ = ["Portal", "on_loop", "running_loop"]

T = TypeVar("T")


def running_loop() -> asyncio.AbstractEventLoop | None:
    """The event loop running in this thread, or None outside one."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:
        return None


async def on_loop(
    loop: asyncio.AbstractEventLoop | None, coro: Coroutine[Any, Any, T], gone: Callable[[], Exception]
) -> T:
    """Await `coro` on `loop`, the one that owns what it uses (an SDK's streams, an HTTP client's
    connections): here when it is the running loop, else handed to it and awaited from here.

    Calls may come from any loop or thread; the connection may not. When `loop` is None, closed
    or stopped, `coro` is closed unstarted and ``gone()`` raised: an error saying to connect again.
    """
    if loop is asyncio.get_running_loop():
        return await coro
    if loop is None or loop.is_closed() or not loop.is_running():
        coro.close()
        raise gone()
    return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(coro, loop))


class _LoopGoneError(Exception):
    """The target loop stopped before it took the coroutine."""


class _LoopStuckError(Exception):
    """The target loop runs but did not take the coroutine in time: its thread is blocked."""


# How often a waiting sync caller checks that the loop it waits on still runs.
_LIVENESS_CHECK_S = 0.5
# How long closing the private loop waits for its tasks to end, then for its thread: bounded, so
# a stuck call cannot hang the interpreter's exit.
_WIND_DOWN_S = 1.0


def _run_in(
    loop: asyncio.AbstractEventLoop, coro: Coroutine[Any, Any, T], start_timeout: float = math.inf
) -> T:
    """Run `coro` on `loop` and wait for it, carrying the caller's context variables along.

    `asyncio.run_coroutine_threadsafe` would drop them, and with them the enclosing routed call
    (depth, lineage, deadline) and LangChain's parent run. Raises `_LoopGoneError` (with `coro` not
    started) when the loop stops or closes before taking it, and `_LoopStuckError` when it has not
    taken it after `start_timeout` seconds, instead of waiting forever.
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
    give_up = time.monotonic() + start_timeout
    while True:
        try:
            return done.result(timeout=_LIVENESS_CHECK_S)
        except concurrent.futures.TimeoutError:
            running = loop.is_running()
            if running and time.monotonic() < give_up:
                continue
            with lock:
                if not state["started"]:
                    state["abandoned"] = True
                    raise (_LoopStuckError if running else _LoopGoneError) from None


def _awaited(method: str) -> str:
    return f"await router.{method.removesuffix('_sync')}(...)"


class Portal:
    """Where sync calls run: the router's home loop when it runs elsewhere, else a private loop."""

    def __init__(self, *, start_timeout: float = math.inf) -> None:
        self._home: asyncio.AbstractEventLoop | None = None
        self._own: asyncio.AbstractEventLoop | None = None
        self._stop_own: weakref.finalize[Any, Any] | None = None
        self._lock = threading.Lock()
        # Home only: the private loop runs nothing but these calls, so a wait there is never a
        # deadlock of the caller's making, just other calls (a slow agent) going first.
        self.start_timeout = start_timeout

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        """Remember the loop the router is used from, unless a live one is already known.

        The private loop never becomes home: the router is not used from there, and as home it
        would keep the caller's loop from being recognised (and refused) later.
        """
        home = self._home
        if loop is self._own:
            return
        if home is not loop and (
            home is None or home is self._own or home.is_closed() or not home.is_running()
        ):
            self._home = loop

    def call(self, coro: Coroutine[Any, Any, T], *, method: str, instead: str | None = None) -> T:
        """Run `coro` for the sync `method` (e.g. ``route_sync``) and return its result.

        `instead` is the call to suggest where blocking is refused, by default the awaited
        router method of the same name without ``_sync``.
        """
        running = running_loop()
        home = self._home
        if home is not None and (home.is_closed() or not home.is_running()):
            home = None
        if running is not None and running in (self._own, home):
            coro.close()
            msg = (
                f"{method} was called from inside the event loop that serves the router, "
                f"which would block it forever; use '{instead or _awaited(method)}' here"
            )
            raise SyncCallError(msg)
        if home is not None:
            try:
                return _run_in(home, coro, self.start_timeout)
            except _LoopGoneError:
                self._home = None  # it stopped under us; the private loop takes over
            except _LoopStuckError:
                coro.close()
                msg = (
                    f"{method} waited {self.start_timeout:g} s for the router's event loop, which "
                    "runs but does not take the call: its thread is blocked, most likely by "
                    "synchronous code that waits for this call (a sync agent.invoke() or "
                    "future.result() inside async code). Await the async API there instead "
                    "(await agent.ainvoke(...)), or run the blocking code in asyncio.to_thread(); "
                    "the call was not started (policy.sync_start_timeout_s sets the wait)"
                )
                raise SyncCallError(msg) from None
        return _run_in(self._own_loop(), coro)

    def _own_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._own is None:
                loop = asyncio.new_event_loop()
                thread = threading.Thread(target=loop.run_forever, name="agent-reach-portal", daemon=True)
                thread.start()
                self._own = loop
                # Runs on close(), when the portal is collected, or at interpreter exit, once.
                self._stop_own = weakref.finalize(self, _wind_down, loop, thread)
            return self._own

    def close(self) -> None:
        """Stop the private loop and its thread, if they were started."""
        with self._lock:
            stop, self._stop_own, self._own = self._stop_own, None, None
        if stop is not None:
            stop()


def _wind_down(loop: asyncio.AbstractEventLoop, thread: threading.Thread) -> None:
    """Cancel what still runs on the private loop, stop it, join its thread, close it; each wait
    bounded. From the loop's own thread (the portal collected there) it can only be stopped."""
    if loop.is_closed():
        return
    if threading.current_thread() is thread:
        loop.stop()
        return
    if loop.is_running():
        winding = asyncio.run_coroutine_threadsafe(_cancel_tasks(), loop)
        # Tasks that would not end in time do not keep the loop from stopping.
        with contextlib.suppress(concurrent.futures.TimeoutError, concurrent.futures.CancelledError):
            winding.result(2 * _WIND_DOWN_S)
    with contextlib.suppress(RuntimeError):  # stopped and closed meanwhile
        loop.call_soon_threadsafe(loop.stop)
    thread.join(_WIND_DOWN_S)
    if not thread.is_alive():
        loop.close()


async def _cancel_tasks() -> None:
    current = asyncio.current_task()
    tasks = [task for task in asyncio.all_tasks() if task is not current]
    for task in tasks:
        task.cancel()
    if tasks:
        done, _ = await asyncio.wait(tasks, timeout=_WIND_DOWN_S)
        for task in done:
            # Read, so a task that ended in an error is not reported again when collected.
            if not task.cancelled():
                task.exception()
    await asyncio.get_running_loop().shutdown_asyncgens()
