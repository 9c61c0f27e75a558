"""Real LangChain parts for the adapter tests: runnables, a run recorder, a router per test."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler


@dataclass
class Run:
    run_id: UUID
    parent_run_id: UUID | None
    name: str
    kind: str
    tags: list[str]
    metadata: dict[str, Any]
    error: BaseException | None = None
    outputs: Any = None
    children: list[Run] = field(default_factory=list)


class RunRecorder(BaseCallbackHandler):
    """A callback handler that keeps every chain and tool run with its parent, as LangSmith would."""

    run_inline = True  # called in the running task, in order

    def __init__(self) -> None:
        self.runs: dict[UUID, Run] = {}

    def _start(self, kind: str, serialized: Any, run_id: UUID, parent_run_id: UUID | None, **kw: Any) -> None:
        name = kw.get("name") or (serialized or {}).get("name") or "?"
        self.runs[run_id] = Run(
            run_id, parent_run_id, name, kind, list(kw.get("tags") or []), dict(kw.get("metadata") or {})
        )

    def on_chain_start(
        self, serialized: Any, inputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kw: Any
    ) -> None:
        self._start("chain", serialized, run_id, parent_run_id, **kw)

    def on_tool_start(
        self, serialized: Any, input_str: str, *, run_id: UUID, parent_run_id: UUID | None = None, **kw: Any
    ) -> None:
        self._start("tool", serialized, run_id, parent_run_id, **kw)

    def on_chain_end(self, outputs: Any, *, run_id: UUID, **kw: Any) -> None:
        self.runs[run_id].outputs = outputs

    def on_chain_error(self, error: BaseException, *, run_id: UUID, **kw: Any) -> None:
        self.runs[run_id].error = error

    def on_tool_error(self, error: BaseException, *, run_id: UUID, **kw: Any) -> None:
        self.runs[run_id].error = error

    def named(self, name: str) -> Run:
        found = [run for run in self.runs.values() if run.name == name]
        assert len(found) == 1, f"expected one run named {name!r}, got {[r.name for r in self.runs.values()]}"
        return found[0]

    def parent(self, run: Run) -> Run | None:
        return None if run.parent_run_id is None else self.runs.get(run.parent_run_id)
