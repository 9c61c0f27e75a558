"""The run's context of a LangGraph graph (``context=``, what its nodes, tools and middleware read
as ``runtime.context``), read once from the graph at registration.

A graph built with a ``context_schema`` (``create_agent(..., context_schema=...)``,
``StateGraph(..., context_schema=...)``) gets its context per run, beside its input. Without one
its nodes find ``runtime.context`` None and fail mid-run, which the router would blame on the
agent (and two such calls would quarantine it) though the caller left the context out. So a call
lacking a field the schema requires, or giving one wrong, is refused as the caller's mistake.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from langchain_core.runnables import Runnable
from pydantic import JsonValue, PydanticSchemaGenerationError, TypeAdapter, ValidationError

from reach_adapters.errors import InvalidMessageError, describe_validation_error
from reach_adapters.langchain.graphs import leading, leading_graph, unwrap

__all__ = ["RunContext", "refuse_context"]

logger = logging.getLogger(__name__)

_NONE: Mapping[str, Any] = {}


@dataclass(frozen=True, slots=True)
class RunContext:
    """What the graph that takes the agent's input asks of the run's context: the fields every
    call must give (`required`), the check and coercion of what is given (`adapter`, None when the
    schema is none or not one pydantic can read), and the context a binding gives (`bound`)."""

    required: tuple[str, ...]
    adapter: TypeAdapter[Any] | None
    bound: Mapping[str, Any] | None

    @classmethod
    def of(cls, runnable: Runnable[Any, Any], agent_id: str) -> RunContext | None:
        """The context rules of `runnable`, None when no graph takes its input: the context is
        passed as LangGraph takes it, with the input, so only such a graph can get it.

        Fields a binding gives (``graph.bind(context={...})``) are not required of the caller;
        when any remain, registration warns, as every call must then carry them.
        """
        found = leading_graph(runnable)
        if found is None:
            return None
        # A binding answers for the graph it wraps; its attributes are not the graph's own.
        graph = unwrap(found)[-1]
        bound = _bound_context(runnable)
        adapter = _adapter(getattr(graph, "context_schema", None))
        if adapter is None or (bound is not None and not isinstance(bound, Mapping)):
            # Unchecked, or a whole context object bound: nothing is asked of the caller.
            required: tuple[str, ...] = ()
        else:
            required = _required(adapter, set(bound or ()))
        if required:
            logger.warning(
                "agent %s is a LangGraph graph with a context schema: each call must carry "
                "context={%s}, or it is refused",
                agent_id,
                ", ".join(f"{key!r}: ..." for key in required),
            )
        return cls(required, adapter, bound)

    def kwargs(self, asked: Mapping[str, JsonValue] | None, agent_id: str) -> Mapping[str, Any]:
        """The keyword arguments that give the run its context: none when the call gives none
        (a binding's own context then holds), else the call's fields over the binding's, checked
        and shaped as the graph's schema says."""
        if asked is None:
            if self.required:
                raise _missing(self.required, agent_id)
            return _NONE
        bound = self.bound if isinstance(self.bound, Mapping) else _NONE
        context = {**bound, **asked}
        missing = tuple(key for key in self.required if key not in context)
        if missing:
            raise _missing(missing, agent_id)
        if self.adapter is None:
            return {"context": context}
        try:
            return {"context": self.adapter.validate_python(context)}
        except ValidationError as exc:
            error = describe_validation_error(exc)
            msg = f"context for agent {agent_id} does not fit its context schema: {error}"
            raise InvalidMessageError(msg) from None


def refuse_context(agent_id: str) -> InvalidMessageError:
    """The error for a context given to an agent that no graph takes it for."""
    msg = (
        f"context is for LangGraph graphs and create_agent agents (their runtime.context); agent "
        f"{agent_id} is not one, nor a chain or binding that starts with one"
    )
    return InvalidMessageError(msg)


def _missing(keys: tuple[str, ...], agent_id: str) -> InvalidMessageError:
    wanted = ", ".join(f"{key!r}: ..." for key in keys)
    msg = f"agent {agent_id} reads the run's context (runtime.context): call it with context={{{wanted}}}"
    needed: dict[str, JsonValue] = {key: f"<{key}>" for key in keys}
    return InvalidMessageError(msg, fix_options={"context": needed})


def _bound_context(runnable: Runnable[Any, Any]) -> Any | None:
    """The context a binding on the way to the graph gives: the outermost, as each binding passes
    the keyword arguments it gets over its own."""
    for layer in leading(runnable):
        kwargs = getattr(layer, "kwargs", None)
        if isinstance(kwargs, Mapping) and kwargs.get("context") is not None:
            return kwargs["context"]
    return None


def _adapter(schema: Any) -> TypeAdapter[Any] | None:
    if schema is None:
        return None
    try:
        return TypeAdapter(schema)
    except (PydanticSchemaGenerationError, TypeError) as exc:
        # A schema holding objects pydantic cannot read (a client, a connection): passed on as
        # given, unchecked, as LangGraph itself does.
        logger.debug("context schema %r is not checked: %r", schema, exc)
        return None


def _required(adapter: TypeAdapter[Any], given: set[str]) -> tuple[str, ...]:
    try:
        schema = adapter.json_schema()
    except Exception:  # noqa: BLE001 - a field without a JSON form: nothing to require by name
        return ()
    required = schema.get("required", [])
    return tuple(key for key in required if isinstance(key, str) and key not in given)
