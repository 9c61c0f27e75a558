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
from difflib import get_close_matches
from typing import Any

from langchain_core.runnables import Runnable, RunnableWithFallbacks
from pydantic import JsonValue, TypeAdapter, ValidationError

from reach_adapters.errors import InvalidMessageError, describe_validation_error
from reach_adapters.langchain.graphs import leading, leading_graph, unwrap

__all__ = ["NO_CONTEXT", "RunContext", "refuse_context"]

logger = logging.getLogger(__name__)

NO_CONTEXT: Mapping[str, Any] = {}
"""The keyword arguments of a run given no context (shared: never written to)."""


@dataclass(frozen=True, slots=True)
class _Schema:
    """A context schema pydantic reads: its check and coercion, its fields, the fields a call
    must give, and whether it takes fields it does not name."""

    adapter: TypeAdapter[Any]
    fields: frozenset[str]
    required: tuple[str, ...]
    open: bool


@dataclass(frozen=True, slots=True)
class RunContext:
    """What the graph that takes the agent's input asks of the run's context: its schema (None
    when it has none or pydantic cannot read it), and the context a binding gives (`bound`)."""

    schema: _Schema | None
    bound: Any | None

    @classmethod
    def of(cls, runnable: Runnable[Any, Any], agent_id: str) -> RunContext | None:
        """The context rules of `runnable`, None when no graph takes its input: the context is
        passed as LangGraph takes it, a keyword argument with the input, so only a graph can take
        it, and every runnable on its way must hand it on (a fallback that is no graph would
        fail on it).

        Fields a binding gives (``graph.bind(context={...})``) are not required of the caller;
        when any remain, registration warns, as every call must then carry them.
        """
        found = leading_graph(runnable)
        if found is None or not _handed_on(runnable):
            return None
        # A binding answers for the graph it wraps; its attributes are not the graph's own.
        graph = unwrap(found)[-1]
        bound = _bound_context(runnable)
        schema = _schema_of(getattr(graph, "context_schema", None), bound)
        if schema is not None and schema.required:
            logger.warning(
                "agent %s is a LangGraph graph with a context schema: each call must carry "
                "context={%s}, or it is refused",
                agent_id,
                ", ".join(f"{key!r}: ..." for key in schema.required),
            )
        return cls(schema, bound)

    def kwargs(self, asked: Mapping[str, JsonValue] | None, agent_id: str) -> Mapping[str, Any]:
        """The keyword arguments that give the run its context: the call's fields over the
        binding's, checked and shaped as the graph's schema says. A call that gives none leaves
        a binding's context as it is, and otherwise gets the schema's defaults when it has them
        all (LangGraph would give the graph None, which its nodes cannot read)."""
        schema = self.schema
        if asked is None and (self.bound is not None or schema is None):
            return NO_CONTEXT
        context = {**(self.bound if isinstance(self.bound, Mapping) else NO_CONTEXT), **(asked or {})}
        if schema is None:
            return {"context": context}
        missing = tuple(key for key in schema.required if key not in context)
        if missing:
            raise _missing(missing, agent_id)
        if not schema.open:
            _refuse_unknown(context, schema.fields, agent_id)
        try:
            return {"context": schema.adapter.validate_python(context)}
        except ValidationError as exc:
            error = describe_validation_error(exc)
            msg = f"context for agent {agent_id} does not fit its context schema: {error}"
            raise InvalidMessageError(msg) from None


def refuse_context(agent_id: str) -> InvalidMessageError:
    """The error for a context given to an agent that no graph takes it for."""
    msg = (
        f"agent {agent_id} takes no context: context= reaches a LangGraph graph (or create_agent "
        "agent) that gets the agent's input, as it is or through bindings, a chain's first step "
        "or .with_fallbacks() whose fallbacks are graphs too"
    )
    return InvalidMessageError(msg)


def _missing(keys: tuple[str, ...], agent_id: str) -> InvalidMessageError:
    wanted = ", ".join(f"{key!r}: ..." for key in keys)
    msg = f"agent {agent_id} reads the run's context (runtime.context): call it with context={{{wanted}}}"
    needed: dict[str, JsonValue] = {key: f"<{key}>" for key in keys}
    return InvalidMessageError(msg, fix_options={"context": needed})


def _refuse_unknown(context: Mapping[str, Any], fields: frozenset[str], agent_id: str) -> None:
    """A field the schema does not name would be dropped (a pydantic model, a TypedDict) or make
    LangGraph fail mid-run (a dataclass): a misspelt one is said, as LangGraph would say it."""
    unknown = sorted(set(context) - fields)
    if not unknown:
        return
    close = get_close_matches(unknown[0], fields, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else f"; it has {sorted(fields)}"
    msg = f"context for agent {agent_id} has fields its context schema does not: {unknown}{hint}"
    raise InvalidMessageError(msg)


def _handed_on(runnable: Runnable[Any, Any]) -> bool:
    """Whether each `.with_fallbacks()` on the way to the graph has only graphs as fallbacks:
    LangChain hands a run's keyword arguments to each runnable it tries."""
    return all(
        all(leading_graph(fallback) is not None for fallback in layer.fallbacks)
        for layer in leading(runnable)
        if isinstance(layer, RunnableWithFallbacks)
    )


def _bound_context(runnable: Runnable[Any, Any]) -> Any | None:
    """The context a binding on the way to the graph gives: the outermost, as each binding passes
    the keyword arguments it gets over its own."""
    for layer in leading(runnable):
        kwargs = getattr(layer, "kwargs", None)
        if isinstance(kwargs, Mapping) and kwargs.get("context") is not None:
            return kwargs["context"]
    return None


def _schema_of(kind: Any, bound: Any | None) -> _Schema | None:
    if kind is None:
        return None
    try:
        adapter: TypeAdapter[Any] = TypeAdapter(kind)
        described = adapter.json_schema()
    except Exception as exc:  # noqa: BLE001 - a schema of objects pydantic cannot read or describe
        # (a client, a connection): passed on as given, unchecked, as LangGraph itself does.
        logger.debug("context schema %r is not checked: %r", kind, exc)
        return None
    properties = described.get("properties", {})
    extra = described.get("additionalProperties")
    # A whole context object bound gives every field; a bound mapping the fields it has.
    given = set(bound) if isinstance(bound, Mapping) else None if bound is not None else set()
    required = (
        ()
        if given is None
        else tuple(key for key in described.get("required", ()) if isinstance(key, str) and key not in given)
    )
    return _Schema(adapter, frozenset(properties), required, extra is True or isinstance(extra, dict))
