"""Agents LangChain runs only synchronously, run so in a worker thread, their context copied
(traces nest as before): the router awaits its agents, and their ``ainvoke``/``astream`` fail.

A `create_agent` agent whose middleware wraps model or tool calls with the sync hooks alone
(``@wrap_model_call`` on a plain function, the way LangChain's docs write them) fails every
``ainvoke`` with LangChain's `NotImplementedError`, though its ``invoke`` works; so does a graph
whose checkpointer has no async methods (`savers`). The middleware is found where `create_agent`
keeps it: the graph's node functions, and the closures its composed wrappers are made of.
LangChain is not a dependency of the adapter; when it was never imported, no graph of its can be
there.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
import sys
import threading
import types
from collections.abc import AsyncGenerator, Callable, Iterable, Iterator
from typing import Any

from langchain_core.runnables import Runnable

from reach_adapters.langchain.graphs import is_graph, visible_graphs
from reach_adapters.langchain.turns import outlive_call

__all__ = ["invoke_in_worker", "needs_sync", "stream_in_worker"]

logger = logging.getLogger(__name__)

# LangChain's wrap hooks and node hooks, each as (sync, async) method names.
_WRAPS = (("wrap_model_call", "awrap_model_call"), ("wrap_tool_call", "awrap_tool_call"))
_NODES = tuple((name, f"a{name}") for name in ("before_agent", "before_model", "after_model", "after_agent"))
# Where a graph node keeps its functions: a `RunnableCallable`'s, and a `ToolNode`'s tool wrappers.
_ROOTS = ("func", "afunc", "_wrap_tool_call", "_awrap_tool_call")
# How deep the composed wrappers nest closures: one level per middleware and a few of LangChain's.
_DEPTH = 64


def needs_sync(runnable: Runnable[Any, Any], agent_id: str) -> bool:
    """Whether `runnable` must run with ``invoke``/``stream``: a `create_agent` graph in it has
    middleware that wraps calls with only the sync hook, and none that has only async hooks
    (such an agent LangChain runs neither way: it is left to fail as LangChain fails it)."""
    types_module = sys.modules.get("langchain.agents.middleware.types")
    base = getattr(types_module, "AgentMiddleware", None)
    if not isinstance(base, type):
        return False
    middleware = list(_middleware(runnable, base))
    sync_only = _hooks(middleware, base, _WRAPS, sync=True)
    if not sync_only:
        return False
    async_only = _hooks(middleware, base, (*_WRAPS, *_NODES), sync=False)
    if async_only:
        logger.warning(
            "agent %s: middleware %s has only sync hooks and %s only async ones; LangChain can run "
            "the agent neither with invoke nor with ainvoke, and every call will fail",
            agent_id,
            sync_only,
            async_only,
        )
        return False
    logger.warning(
        "agent %s runs with invoke in a worker thread, where a deadline cannot stop it: middleware "
        "%s has no async version, which LangChain needs for ainvoke; give it one to run the agent "
        "on the event loop",
        agent_id,
        sync_only,
    )
    return True


def _hooks(middleware: list[Any], base: type, hooks: tuple[tuple[str, str], ...], *, sync: bool) -> list[str]:
    """``<middleware>.<hook>`` of each hook among `hooks` (sync, async) defined only in the sync
    (`sync`) or only in the async version."""
    found = set()
    for each in middleware:
        for pair in hooks:
            defined, missing = pair if sync else pair[::-1]
            if _defines(each, base, defined) and not _defines(each, base, missing):
                found.add(f"{each.name}.{defined}")
    return sorted(found)


def _defines(middleware: Any, base: type, hook: str) -> bool:
    return getattr(type(middleware), hook) is not getattr(base, hook)


def _middleware(runnable: Runnable[Any, Any], base: type) -> Iterator[Any]:
    """Every middleware instance in the graphs of `runnable` and their subgraph nodes."""
    seen: set[int] = set()
    graphs = [graph for graph, _ in visible_graphs(runnable)]
    while graphs:
        graph = graphs.pop()
        for node in getattr(graph, "nodes", {}).values():
            bound = getattr(node, "bound", None)
            if bound is None:
                continue
            if is_graph(bound):
                graphs.append(bound)
                continue
            yield from _reachable([getattr(bound, name, None) for name in _ROOTS], base, seen)


def _reachable(roots: Iterable[Any], base: type, seen: set[int]) -> Iterator[Any]:
    """The middleware instances `roots` hold: as a bound method's object, in a function's closure
    or what it wraps (``functools.wraps``), in lists of them."""
    stack = [(root, 0) for root in roots]
    while stack:
        item, depth = stack.pop()
        if item is None or depth > _DEPTH or id(item) in seen:
            continue
        seen.add(id(item))
        if isinstance(item, base):
            yield item
        elif isinstance(item, types.MethodType):
            stack += [(item.__self__, depth + 1), (item.__func__, depth + 1)]
        elif isinstance(item, types.FunctionType):
            cells = [cell.cell_contents for cell in item.__closure__ or () if _filled(cell)]
            wrapped = getattr(item, "__wrapped__", None)
            stack += [(value, depth + 1) for value in (*cells, wrapped)]
        elif isinstance(item, list | tuple):
            stack += [(value, depth + 1) for value in item]


def _filled(cell: types.CellType) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


async def invoke_in_worker(invoke: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`invoke(*args, **kwargs)` in a worker thread, in a copy of this context. A cancelled call
    returns at once; the run goes on to its end, holding its conversation's thread meanwhile
    (`outlive_call`), so no later call on the thread runs beside it."""
    done = outlive_call()
    run = functools.partial(contextvars.copy_context().run, invoke, *args, **kwargs)

    def work() -> Any:
        try:
            return run()
        finally:
            done()

    return await asyncio.get_running_loop().run_in_executor(None, work)


_END = object()


async def stream_in_worker(stream: Callable[[], Iterable[Any]]) -> AsyncGenerator[Any, None]:
    """The chunks of the sync `stream()`, iterated in a worker thread in a copy of this context.

    Closing this generator (the caller stopped, or its deadline passed) closes the sync stream at
    its next chunk; a thread cannot be interrupted mid-step, so that step runs to its end.
    """
    loop = asyncio.get_running_loop()
    queue: asyncio.Queue[tuple[Any, BaseException | None]] = asyncio.Queue()
    stopped = threading.Event()

    def put(item: Any, error: BaseException | None = None) -> None:
        try:
            loop.call_soon_threadsafe(queue.put_nowait, (item, error))
        except RuntimeError:  # the loop closed: nobody reads any more
            stopped.set()

    def run() -> None:
        try:
            chunks = iter(stream())
            try:
                for chunk in chunks:
                    if stopped.is_set():
                        break
                    put(chunk)
            finally:
                close = getattr(chunks, "close", None)
                if close is not None:
                    close()
        except BaseException as exc:  # noqa: BLE001 - handed to the reader, who raises it
            put(_END, exc)
        else:
            put(_END)

    loop.run_in_executor(None, contextvars.copy_context().run, run)
    try:
        while True:
            item, error = await queue.get()
            if error is not None:
                raise error
            if item is _END:
                return
            yield item
    finally:
        stopped.set()
