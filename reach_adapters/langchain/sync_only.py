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

import logging
import sys
import types
from collections.abc import AsyncIterator, Awaitable, Iterable, Iterator, Mapping
from functools import partial
from typing import Any

from langchain_core.runnables import Runnable, RunnableConfig

from reach_adapters.langchain.held import every_runnable
from reach_adapters.langchain.savers import sync_savers
from reach_adapters.router import Hold, WorkerPool

__all__ = ["Runner", "needs_sync"]

logger = logging.getLogger(__name__)

# LangChain's wrap hooks and node hooks, each as (sync, async) method names.
_WRAPS = (("wrap_model_call", "awrap_model_call"), ("wrap_tool_call", "awrap_tool_call"))
_NODES = tuple((name, f"a{name}") for name in ("before_agent", "before_model", "after_model", "after_agent"))
# Where a graph node keeps its functions: a `RunnableCallable`'s, and a `ToolNode`'s tool wrappers.
_ROOTS = ("func", "afunc", "_wrap_tool_call", "_awrap_tool_call")
# How deep the composed wrappers nest closures: one level per middleware and a few of LangChain's.
_DEPTH = 64


class Runner:
    """Runs an agent's runnables: awaited on the event loop, or in a worker pool of the agent's
    own when LangChain runs the agent only synchronously (its middleware, found when the agent is
    made; its checkpointers, asked on its first call: `ready`)."""

    __slots__ = ("_agent_id", "_savers", "_sync", "_workers")

    def __init__(self, runnable: Runnable[Any, Any], agent_id: str, savers: list[Any], workers: int) -> None:
        self._agent_id = agent_id
        self._sync = needs_sync(runnable, agent_id)
        self._savers = savers
        self._workers = WorkerPool(agent_id, workers)

    @property
    def unasked(self) -> bool:
        """Whether the agent has checkpointers not yet asked (`ready`)."""
        return bool(self._savers)

    async def ready(self) -> None:
        """Asks the agent's checkpointers, on its first call, whether they have async methods."""
        # Every call that comes before the answer asks, and waits for it: a probe that suspends
        # (an async saver's read, before a sync one's) must not let another call run unasked.
        found = await sync_savers(self._savers, self._agent_id)
        if found and not self._sync:
            self._sync = True
            logger.warning(
                "agent %s runs with invoke in a worker thread, where a deadline cannot stop it: its "
                "checkpointer %s has no async methods, which LangGraph needs for ainvoke; give the "
                "graph an async one (AsyncSqliteSaver, AsyncPostgresSaver) to run it on the event loop",
                self._agent_id,
                found,
            )
        self._savers = []

    def invoke(
        self,
        runnable: Runnable[Any, Any],
        native: Any,
        config: RunnableConfig,
        context: Mapping[str, Any],
        hold: Hold | None,
    ) -> Awaitable[Any]:
        """`runnable`'s output for `native`; `hold`: what a run left in a worker holds till it ends."""
        if self._sync:
            return self._workers.run(partial(runnable.invoke, native, config, **context), hold)
        return runnable.ainvoke(native, config, **context)

    def stream(
        self,
        runnable: Runnable[Any, Any],
        native: Any,
        config: RunnableConfig,
        options: Mapping[str, Any],
        hold: Hold | None,
    ) -> AsyncIterator[Any]:
        """`runnable`'s chunks for `native`; close it (``aclose``) when done with it early."""
        if self._sync:
            return self._workers.stream(partial(runnable.stream, native, config, **options), hold)
        return aiter(runnable.astream(native, config, **options))

    def close(self) -> None:
        """Stops the worker pool; runs still going finish on their own."""
        self._workers.close()


def needs_sync(runnable: Runnable[Any, Any], agent_id: str) -> bool:
    """Whether `runnable` must run with ``invoke``/``stream``: a `create_agent` graph in it has
    middleware that wraps calls with only the sync hook, and none that has only async hooks, nor
    a tool with only a coroutine (such an agent LangChain runs neither way: it is left to fail as
    LangChain fails it)."""
    types_module = sys.modules.get("langchain.agents.middleware.types")
    base = getattr(types_module, "AgentMiddleware", None)
    if not isinstance(base, type):
        return False
    middleware, tools, coroutine_only = _parts(runnable, base)
    # Tool call hooks run only where a tool node is: an agent without tools never calls them.
    wraps = _WRAPS if tools else _WRAPS[:1]
    sync_only = _hooks(middleware, base, wraps, sync=True)
    if not sync_only:
        return False
    async_only = _hooks(middleware, base, (*wraps, *_NODES), sync=False) + coroutine_only
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


def _parts(runnable: Runnable[Any, Any], base: type) -> tuple[list[Any], bool, list[str]]:
    """Every middleware instance in the graphs `runnable` runs, wherever they sit (`held`);
    whether any of their tool nodes has tools; and ``tool <name>`` for each tool with only a
    coroutine."""
    seen: set[int] = set()
    middleware: list[Any] = []
    has_tools = False
    coroutine_only: set[str] = set()
    for item in every_runnable(runnable):
        middleware += _reachable([getattr(item, name, None) for name in _ROOTS], base, seen)
        tools = getattr(item, "_tools_by_name", None) or {}
        has_tools = has_tools or bool(tools)
        coroutine_only |= {
            f"tool {name}"
            for name, tool in tools.items()
            if getattr(tool, "func", False) is None and getattr(tool, "coroutine", None) is not None
        }
    return middleware, has_tools, sorted(coroutine_only)


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
