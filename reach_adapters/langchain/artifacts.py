"""The `ReachResult` a reach tool keeps as its `ToolMessage`'s artifact, made to survive a
LangGraph checkpoint.

LangGraph's checkpoint serializer stores a message by its ``model_dump()``: the artifact comes
back as a dict whatever it was, and the enums a `ReachResult` dump holds (its status, an error
kind) are types LangGraph warns about, and blocks under ``LANGGRAPH_STRICT_MSGPACK``. A
`ToolArtifact` is a `ReachResult` in memory whose dump is plain JSON, so it checkpoints with
nothing to warn about and reads back as that JSON (``ReachResult.model_validate(artifact)``).
"""

from __future__ import annotations

from typing import Any

from pydantic import SerializerFunctionWrapHandler, model_serializer
from pydantic_core import to_jsonable_python

from middleware import Fault, ReachResult, ResultStatus, new_task_id

__all__ = ["ToolArtifact", "as_artifact", "refused_artifact"]


class ToolArtifact(ReachResult):
    """A `ReachResult` whose ``model_dump()`` is plain JSON, in Python mode too."""

    @model_serializer(mode="wrap")
    def _plain(self, handler: SerializerFunctionWrapHandler) -> Any:
        return to_jsonable_python(handler(self))

    def __eq__(self, other: object) -> bool:
        # Equal to a `ReachResult` with the same fields (the one it was made from, or one read
        # back from a checkpoint): pydantic's own equality would also compare the classes.
        if isinstance(other, ReachResult):
            return dict(self) == dict(other)
        return NotImplemented

    __hash__ = ReachResult.__hash__


def as_artifact(result: ReachResult) -> ToolArtifact:
    """`result` as a `ToolArtifact`, its fields shared, not copied or checked again."""
    return ToolArtifact.model_construct(_fields_set=result.model_fields_set, **dict(result))


def refused_artifact(error: str, status: ResultStatus, error_type: str, fault: Fault) -> ToolArtifact:
    """The result of a call refused before any task was made (never delivered): under a task id
    of its own, which no decision record has."""
    task_id = new_task_id()
    result = ReachResult(
        status=status, task_id=task_id, served_by="none", error_type=error_type, error=error, fault=fault
    )
    return as_artifact(result)
