"""What can still be undone: the succeeded reaches of compensable capabilities, and finished
chains with their compensable steps, kept (boundedly) for `Router.compensate`."""

from __future__ import annotations

import asyncio
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any

from pydantic import JsonValue

from reach_adapters.errors import UnknownTaskError

__all__ = ["ChainRun", "Done", "Journal"]


@dataclass(slots=True)
class Done:
    """One succeeded reach of a capability that names its undo (`compensate_with`)."""

    task_id: str
    capability: str
    compensate_with: str
    agent_id: str
    principal: str | None
    trace_id: str
    input: Any
    output: Any
    # Set once a compensation of it has ended: its outcome (see `saga._undo`).
    undone: dict[str, JsonValue] | None = None
    # The compensation of it in progress, or the last one: concurrent callers wait for it.
    undoing: asyncio.Task[dict[str, JsonValue]] | None = None
    # Compensation reaches made for it so far, over every round: each gets a task id of its own.
    tries: int = 0

    def payload(self) -> dict[str, Any]:
        """What the compensating capability is given: the whole of the call to undo."""
        return {
            "task_id": self.task_id,
            "capability": self.capability,
            "input": self.input,
            "output": self.output,
        }


@dataclass(slots=True)
class ChainRun:
    """A finished chain: its compensable steps that succeeded, in the order they finished."""

    task_id: str
    chain: str
    principal: str | None
    trace_id: str
    steps: list[Done] = field(default_factory=list)


class Journal:
    """The latest entries by task id, at most the `size` each call gives (the policy's, which may
    change while the router runs); the oldest go first."""

    def __init__(self) -> None:
        self._entries: OrderedDict[str, Done | ChainRun] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def keep(self, entry: Done | ChainRun, size: int) -> None:
        entries = self._entries
        entries[entry.task_id] = entry
        entries.move_to_end(entry.task_id)
        while len(entries) > size:
            entries.popitem(last=False)

    def get(self, task_id: str) -> Done | ChainRun | None:
        return self._entries.get(task_id)

    def find(self, task_id: str, owner: str | None, size: int) -> Done | ChainRun:
        """The entry of `task_id`; for an `owner`, only its own. `UnknownTaskError` otherwise."""
        entry = self._entries.get(task_id)
        if entry is None or (owner is not None and entry.principal != owner):
            msg = (
                f"nothing to compensate for task {task_id!r}: it is not a finished chain or a succeeded "
                "reach of a capability that declares compensate_with, or it is older than the last "
                f"{size} kept (RoutingPolicy.compensation_journal_size)"
            )
            raise UnknownTaskError(msg)
        return entry
