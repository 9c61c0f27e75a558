"""A conversation stays with the agent that served it.

A thread's state lives with the replica that served it: a LangGraph graph's checkpointer (each
replica built from one factory has its own), an A2A agent's context. Spread over replicas, a
thread's second turn would start without its first, and an answer to a question would reach a
replica that never asked it. So a call naming a thread (``configurable={"thread_id": ...}``) goes
first to the agent that answered that thread's last call, when it can serve; others only when it
cannot, as for any call.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from middleware import MetaInfo, ReachResult
from reach_adapters.router.faults import ANSWERED
from reach_adapters.router.state import Slot

__all__ = ["ThreadAffinity", "newest_turn", "thread_of"]

# Threads remembered at most, the least recently served forgotten first: a bound on memory, far
# above the conversations one router holds open at once.
_MAX_THREADS = 100_000

# A thread of a capability as a caller names it: tenants (namespaces) and versions may reuse
# thread ids ("1", "default") without taking each other's agents.
_Key = tuple[str, str | None, str | None, str]


def thread_of(meta: MetaInfo) -> str | None:
    """The caller's thread id, if the call names one (`MetaInfo` takes only str and int ids)."""
    configurable = meta.configurable
    thread = configurable.get("thread_id") if configurable else None
    return None if thread is None else str(thread)


def newest_turn(configurable: dict[str, Any] | None) -> dict[str, Any] | None:
    """`configurable` naming its thread's newest turn: without a ``checkpoint_id`` (LangGraph's
    name for one checkpoint of the thread), since a run from a named checkpoint writes its own
    after it, and what it asks waits there. `configurable` itself when it names none."""
    if not configurable or "checkpoint_id" not in configurable:
        return configurable
    return {key: value for key, value in configurable.items() if key != "checkpoint_id"}


class ThreadAffinity:
    """The agent that last answered each thread of each capability."""

    def __init__(self, size: int = _MAX_THREADS) -> None:
        self._size = size
        self._served: OrderedDict[_Key, str] = OrderedDict()

    def __len__(self) -> int:
        return len(self._served)

    def holds(self, meta: MetaInfo) -> bool:
        """Whether an agent answered the message's thread of its capability before."""
        thread = thread_of(meta)
        if thread is None:
            return False
        return (meta.capability or "", meta.namespace, meta.version, thread) in self._served

    def first(self, slots: list[Slot], meta: MetaInfo) -> list[Slot]:
        """`slots` with the agent that served the message's thread first, when it is among them."""
        thread = thread_of(meta)
        if thread is None or len(slots) < 2 or not self._served:
            return slots
        served = self._served
        for index, slot in enumerate(slots):
            key = (slot.capability.name, meta.namespace, meta.version, thread)
            if served.get(key) == slot.runtime.agent_id:
                return slots if index == 0 else [slot, *slots[:index], *slots[index + 1 :]]
        return slots

    def remember(self, meta: MetaInfo, result: ReachResult) -> None:
        """Keep the agent that answered the call's thread (an answer or a question)."""
        thread = thread_of(meta)
        capability = result.capability or meta.capability
        if thread is None or result.agent_id is None or capability is None or result.status not in ANSWERED:
            return
        key = (capability, meta.namespace, meta.version, thread)
        self._served[key] = result.agent_id
        self._served.move_to_end(key)
        if len(self._served) > self._size:
            self._served.popitem(last=False)
