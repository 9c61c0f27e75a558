"""An agent's sync work, in threads of a pool of its own.

A thread cannot be stopped: work still running past its call's deadline keeps its delivery's slot
(`Hop.linger`, the agent counted stuck) until it really ends, so `max_concurrency` holds, and it
holds its own agent's threads, never the threads every other agent's sync code runs in (the event
loop's default executor, where LangChain runs sync tools and models).
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import logging
import threading
from collections.abc import AsyncGenerator, Callable, Iterable
from functools import partial
from typing import Any, TypeVar

from reach_adapters.router.hops import Hop, current_hop

__all__ = ["Hold", "WorkerPool"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

Hold = Callable[[], Callable[[], None]]
"""Takes hold of something the work needs to itself while it runs (a conversation's thread,
say), returning its release: called when work outlives its call, released when the work ends,
from the worker's thread."""

_END = object()


class WorkerPool:
    """`workers` threads for one agent's sync work, started when first needed."""

    __slots__ = ("_agent_id", "_pool", "_workers")

    def __init__(self, agent_id: str, workers: int) -> None:
        self._agent_id = agent_id
        self._workers = workers
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None

    async def run(self, call: Callable[[], T], hold: Hold | None = None) -> T:
        """What `call()` returns, run in a worker in a copy of this context."""
        loop = asyncio.get_running_loop()
        work = self._submit(contextvars.copy_context().run, call)
        try:
            return await asyncio.wrap_future(work, loop=loop)
        except asyncio.CancelledError:
            _outlive(work, loop, hold, self._agent_id, current_hop())
            raise

    async def stream(
        self, chunks: Callable[[], Iterable[T]], hold: Hold | None = None
    ) -> AsyncGenerator[T, None]:
        """The items of `chunks()`, iterated in a worker in a copy of this context. Closed early
        (its reader stopped, or its deadline passed), the iteration stops at its next item: the
        step the worker is in runs to its end."""
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[Any, BaseException | None]] = asyncio.Queue()
        stopped = threading.Event()

        def put(item: Any, error: BaseException | None = None) -> None:
            try:
                loop.call_soon_threadsafe(queue.put_nowait, (item, error))
            except RuntimeError:  # the loop closed: nobody reads any more
                stopped.set()

        def iterate() -> None:
            if stopped.is_set():
                return
            try:
                items = iter(chunks())
                try:
                    for item in items:
                        if stopped.is_set():
                            break
                        put(item)
                finally:
                    close = getattr(items, "close", None)
                    if close is not None:
                        close()
            except BaseException as exc:
                put(_END, exc)  # the reader raises it; raised here too, for one that left
                raise
            else:
                put(_END)

        work = self._submit(contextvars.copy_context().run, iterate)
        # The delivery it runs in, taken now: a reader that leaves closes the stream outside it.
        hop = current_hop()
        ended = False
        try:
            while True:
                item, error = await queue.get()
                ended = item is _END
                if error is not None:
                    raise error
                if ended:
                    return
                yield item
        finally:
            stopped.set()
            if not ended:  # its worker, past its last item, is only closing up
                _outlive(work, loop, hold, self._agent_id, hop)

    def close(self) -> None:
        """Stop the pool; work still queued is dropped, running work finishes on its own."""
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)

    def _submit(self, fn: Callable[..., T], *args: Any) -> concurrent.futures.Future[T]:
        pool = self._pool
        if pool is None:
            pool = self._pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=self._workers, thread_name_prefix=f"reach {self._agent_id}"
            )
        return pool.submit(fn, *args)


def _outlive(
    work: concurrent.futures.Future[Any],
    loop: asyncio.AbstractEventLoop,
    hold: Hold | None,
    agent_id: str,
    hop: Hop | None,
) -> None:
    """Keep `hop`'s slot (the delivery's), and what `hold` takes, until `work` ends (or is
    dropped unrun)."""
    if work.done():
        return
    if hop is not None:
        release = hop.linger()
        work.add_done_callback(lambda _: _call_on(loop, release))
    if hold is not None:
        held = hold()
        work.add_done_callback(lambda _: held())
    work.add_done_callback(partial(_report_late, agent_id))


def _report_late(agent_id: str, work: concurrent.futures.Future[Any]) -> None:
    """Say what became of work whose call had already ended (timed out, or left): no caller
    hears of it otherwise."""
    if work.cancelled():
        return
    error = work.exception()
    if error is not None:
        logger.warning(
            "agent %s: work that outlived its call failed afterwards: %r", agent_id, error, exc_info=error
        )
    else:
        logger.info("agent %s: work that outlived its call has ended", agent_id)


def _call_on(loop: asyncio.AbstractEventLoop, release: Callable[[], None]) -> None:
    """Run `release` on `loop` from a worker thread; a loop already closed needs no release."""
    if not loop.is_closed():
        try:
            loop.call_soon_threadsafe(release)
        except RuntimeError:
            logger.debug("the router's loop closed before a stuck call ended")
