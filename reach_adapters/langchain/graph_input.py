"""The check of a payload against a graph's pydantic-model or dataclass input, before the run.

LangGraph builds such a state itself (``State(**values)``) when a node reads it, so a payload the
model refuses (its validators, a value of the wrong type) raises inside the run, where it would
count against a healthy agent. DESIGN §6 makes it the caller's: it is refused here, naming the
field, as a payload a `RunnableLambda` typed on the same model is. The graph still gets the dict.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from reach_adapters.errors import InvalidMessageError, describe_errors

__all__ = ["GraphInput", "graph_input"]

logger = logging.getLogger(__name__)

# What LangGraph never sees: its input writer keeps only the input schema's keys.
_DROPPED = "extra_forbidden"


@dataclasses.dataclass(frozen=True, eq=False)
class GraphInput:
    """A graph's input model, checked once per call by an adapter built once per agent.

    Only the keys a payload sets as they are count: a reduced key (``add_messages``,
    ``operator.add``) takes an update that its reducer merges into the state (a string becomes a
    user message), so the model's verdict on the update says nothing of the state.
    """

    adapter: TypeAdapter[Any]
    name: str
    reduced: frozenset[str]

    def check(self, payload: Any) -> None:
        """Raises `InvalidMessageError` when the model refuses `payload`. Not a dict (None goes
        on from a thread's checkpoint): the graph's to take or refuse."""
        if type(payload) is not dict:
            return
        try:
            # The model's own strictness, as LangGraph builds it.
            self.adapter.validate_python(payload)
        except ValidationError as exc:
            problems = [err for err in exc.errors(include_url=False) if self._counts(err["loc"], err["type"])]
            if problems:
                said = describe_errors(problems)
                msg = f"payload does not make the {self.name} the graph takes: {said}"
                raise InvalidMessageError(msg) from None

    def _counts(self, loc: tuple[int | str, ...], kind: str) -> bool:
        return kind != _DROPPED and not (loc and loc[0] in self.reduced)


def graph_input(graph: Any) -> GraphInput | None:
    """The check for `graph`'s input when it is a pydantic model or a dataclass; None for a
    TypedDict state (LangGraph checks nothing), a graph with no state (an ``@entrypoint``, whose
    function's own input is checked as any function's) or a model pydantic cannot validate."""
    builder = getattr(graph, "builder", None)
    kind = getattr(builder, "input_schema", None)
    if not isinstance(kind, type) or not (issubclass(kind, BaseModel) or dataclasses.is_dataclass(kind)):
        return None
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(kind)
    except Exception as exc:  # noqa: BLE001 - a dataclass of types pydantic does not know: unchecked
        logger.debug("the input %s of a graph is not checked before its runs: %s", kind.__qualname__, exc)
        return None
    return GraphInput(adapter, kind.__qualname__, _reduced(builder))


def _reduced(builder: Any) -> frozenset[str]:
    """The state keys whose channel does more than keep the last value written (a reducer's)."""
    from langgraph.channels.last_value import LastValue

    channels = getattr(builder, "channels", None)
    if not isinstance(channels, dict):
        return frozenset()
    return frozenset(name for name, channel in channels.items() if not isinstance(channel, LastValue))
