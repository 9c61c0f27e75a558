"""Checkpointers with no async methods: LangGraph's `SqliteSaver` (its async ones raise, pointing to
`AsyncSqliteSaver`), `PostgresSaver`, or one written with only the sync methods. A graph saving to
one fails every ``ainvoke`` and ``aget_state``, though its ``invoke`` works, so its agent is run
with ``invoke`` in a worker thread (`sync_only`) and its thread's state is read with ``get_state``.

Whether a saver has async methods is asked once per agent, on its first call: a read of a thread
no one has. LangGraph itself finds out the same way, when a run calls them.
"""

from __future__ import annotations

import asyncio
import logging
import weakref
from collections.abc import Iterable
from typing import Any

__all__ = ["state_of", "sync_savers"]

logger = logging.getLogger(__name__)

# Savers found to have no async methods; weak, so a saver goes with its last graph.
_SYNC: weakref.WeakSet[Any] = weakref.WeakSet()
_PROBE = {"configurable": {"thread_id": "agent-reach:probe", "checkpoint_ns": ""}}


async def sync_savers(savers: Iterable[Any], agent_id: str) -> list[str]:
    """The class names of those of `savers` that have no async methods: their ``aget_tuple``
    raises `NotImplementedError`. Any other error is left to the runs, which meet it as they would."""
    found = set()
    for saver in savers:
        if saver not in _SYNC:
            try:
                await saver.aget_tuple(_PROBE)
            except NotImplementedError:
                _SYNC.add(saver)
            except Exception:  # the run meets it, and says it, as LangGraph would
                logger.debug("agent %s: checkpointer %r failed its probe", agent_id, saver, exc_info=True)
        if saver in _SYNC:
            found.add(type(saver).__name__)
    return sorted(found)


async def state_of(graph: Any, config: Any) -> Any:
    """The graph's ``StateSnapshot`` on the thread `config` names, read in a worker thread when
    its saver has no async methods."""
    if graph.checkpointer in _SYNC:
        return await asyncio.to_thread(graph.get_state, config)
    return await graph.aget_state(config)
