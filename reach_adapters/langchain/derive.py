"""A capability derived from what a runnable says about itself: name, description, schemas.

The schemas are the runnable's own, adjusted to what really travels (see `native_schemas`), with
chat messages in their role/content form (`chat_schemas`).
"""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from langchain_core.messages import BaseMessage
from langchain_core.runnables import (
    Runnable,
    RunnableGenerator,
    RunnableLambda,
    RunnableParallel,
    RunnablePassthrough,
    RunnableSequence,
    RunnableWithFallbacks,
)
from langchain_core.runnables.base import RunnableBindingBase, RunnableEach
from langchain_core.runnables.passthrough import RunnableAssign, RunnablePick
from langchain_core.tools import BaseTool, Tool
from pydantic import BaseModel, TypeAdapter
from typing_extensions import is_typeddict

from reach_adapters.errors import InvalidDeclarationError
from reach_adapters.langchain.chat_schemas import DEFS, with_message_schema, without_prompt_values
from reach_adapters.langchain.describe import description
from reach_adapters.langchain.graph_input import GraphInput, graph_input
from reach_adapters.langchain.graphs import (
    find_graph,
    graph_schemas,
    leading,
    leading_graph,
    unwrap,
)
from reach_adapters.langchain.payload_schemas import payload_schema
from reach_adapters.langchain.prompt_schemas import mustache_input
from reach_adapters.langchain.typed_dicts import typed_dict_schema
from reach_adapters.router import Capability, check_schema, parse_agent_id

__all__ = ["completed", "derive_capability", "input_type", "native_schemas"]

logger = logging.getLogger(__name__)

# What LangChain's schemas say of an untyped synthetic root field.
_ROOT = {"title": "Root"}
# Names every instance of a kind shares; a capability named so would merge unrelated agents.
_GENERIC_NAMES = frozenset({"LangGraph"})


def derive_capability(
    runnable: Runnable[Any, Any],
    agent_id: str,
    *,
    native: tuple[dict[str, Any] | None, dict[str, Any] | None] | None,
) -> Capability:
    """One capability named after the runnable (else the agent id's type), with its `native`
    schemas (`native_schemas`) as the payload's. Without them the capability is open: for
    converters that change the native shapes."""
    try:
        return Capability(name=_name(runnable, agent_id), **_described(runnable, native))
    except InvalidDeclarationError as exc:
        msg = (
            f"agent {agent_id}: cannot derive a capability from the runnable ({exc}); pass capabilities=[...]"
        )
        raise InvalidDeclarationError(msg) from None


def completed(
    declared: Sequence[Capability | Mapping[str, Any]],
    runnable: Runnable[Any, Any],
    native: tuple[dict[str, Any] | None, dict[str, Any] | None],
) -> list[Capability | Mapping[str, Any]]:
    """The `declared` capabilities of `runnable`, each given the description and the `native`
    input schema a derived one has where it leaves them out: one declared to add keywords or a
    timeout takes what the runnable takes, and its tool shows so. Not the output schema: replicas
    declared alike would then differ in it, and no longer be replicas of one capability."""
    derived = _described(runnable, native)
    fields = {key: derived[key] for key in ("description", "input_schema")}
    if check_schema(fields["input_schema"]) is not None:
        # What derivation cannot describe (a pattern in Python's own dialect, say) is left open,
        # as for a declaration before: declaring is the way out of it.
        del fields["input_schema"]
    out: list[Capability | Mapping[str, Any]] = []
    for capability in declared:
        if isinstance(capability, Capability):
            left = {key: value for key, value in fields.items() if key not in capability.model_fields_set}
            out.append(capability.model_copy(update=left) if left else capability)
        elif isinstance(capability, Mapping):
            out.append({**fields, **capability})
        else:
            out.append(capability)  # refused by `validate_capabilities`, naming what it is
    return out


def _described(
    runnable: Runnable[Any, Any], native: tuple[dict[str, Any] | None, dict[str, Any] | None] | None
) -> dict[str, Any]:
    """A derived capability's description and schemas: open ones without `native` schemas."""
    if native is None:
        return {"description": description(runnable), "input_schema": {}, "output_schema": None}
    inputs, outputs = native
    return {
        "description": description(runnable),
        "input_schema": with_message_schema(inputs or {}),
        "output_schema": payload_schema(outputs, whole=_given_whole(runnable)),
    }


def native_schemas(
    runnable: Runnable[Any, Any], agent_id: str
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The runnable's input and output JSON Schemas as it really takes and gives them.

    A LangGraph graph's state keys are optional (also under `.with_fallbacks()`, and in the input
    of a chain that starts with a graph); LangChain's synthetic ``root`` field (of a
    `RunnableParallel` or `.assign()` over an input of any type) stands for the input itself; a
    language model takes a string or messages, not the prompt-value objects it also lists.
    """
    graph = find_graph(runnable)
    inner = unwrap(runnable)[-1]
    mapped = find_graph(inner.bound) if isinstance(inner, RunnableEach) else None
    first = leading_graph(runnable)
    if graph is not None:
        inputs, outputs = graph_schemas(graph)
    elif mapped is not None:
        # A graph's `.map()`: a list of its states in, a list out.
        inputs, outputs = (_list_of(schema) for schema in graph_schemas(mapped))
    else:
        # A chain that starts with a graph (`graph | step`) takes what the graph takes.
        inputs = (
            graph_schemas(first)[0]
            if first is not None
            else _tool_input(runnable)
            or mustache_input(runnable)
            or _schema(runnable.get_input_jsonschema, agent_id, "input", runnable.InputType)
        )
        outputs = (
            None
            if _mapped(runnable)
            else _schema(runnable.get_output_jsonschema, agent_id, "output", runnable.OutputType)
        )
    if not _fallbacks_agree(runnable, agent_id):
        outputs = None
    inputs = _without_root(without_prompt_values(inputs))
    if inputs is not None and inputs.keys() <= {"title", "description"} and _takes_dicts(runnable):
        inputs = {"type": "object"}
    return _resolved(inputs), _resolved(_without_root(outputs))


def _takes_dicts(runnable: Runnable[Any, Any]) -> bool:
    """Whether the input goes first to `.assign()` or `.pick()`, which take a dict whatever the
    steps after them take: through bindings and a chain's first step, and for a
    `.with_fallbacks()`, in each of its runnables (one fallback may take anything)."""
    if isinstance(runnable, RunnableBindingBase):
        return _takes_dicts(runnable.bound)
    if isinstance(runnable, RunnableWithFallbacks):
        return all(_takes_dicts(each) for each in runnable.runnables)
    if isinstance(runnable, RunnableSequence):
        return _takes_dicts(next((step for step in runnable.steps if not _bare(step)), runnable.last))
    return isinstance(runnable, RunnableAssign | RunnablePick)


def _bare(step: Runnable[Any, Any]) -> bool:
    """A `RunnablePassthrough()`, bound or not: it gives its input on as it is (a ``func`` of it
    only sees the input)."""
    while isinstance(step, RunnableBindingBase):
        step = step.bound
    return type(step) is RunnablePassthrough


def _tool_input(runnable: Runnable[Any, Any]) -> dict[str, Any] | None:
    """What a tool takes, or a runnable whose input goes to one (through bindings, as a chain's
    first step or a fallback's primary), where LangChain's input schema says otherwise: a single-input
    `Tool` takes a string (LangChain's schema of it lists its ``_run`` method's ``args``, ``config``
    and ``kwargs``), and a tool whose ``args_schema`` is a JSON Schema takes what that says
    (LangChain's schema of it is any input's)."""
    tool = leading(runnable)[-1]
    if not isinstance(tool, BaseTool):
        return None
    if isinstance(tool.args_schema, dict):
        return {key: value for key, value in tool.args_schema.items() if key not in ("title", "description")}
    if tool.args_schema is None and isinstance(tool, Tool):
        return {"type": "string"}
    return None


def input_type(runnable: Runnable[Any, Any]) -> TypeAdapter[Any] | GraphInput | None:
    """The pydantic model or dataclass the functions that first take the input are typed to take
    (a `RunnableLambda` over ``f(patch: Patch)``, a ``@chain``, a generator), through bindings,
    the first step of a chain, a `.with_fallbacks()`'s primary and the branches of a parallel
    step that agree: LangChain hands them the input as given, and JSON is no model, so the
    converter makes one of the payload. A declared ``.with_types(input_type=...)`` is trusted
    as it is (LangServe's way to describe a runnable that takes dicts), and a message is made by
    the converter too (`one_message`).

    A graph that gets the input as it is (`leading_graph`) makes its own state, but from a
    pydantic model or dataclass it builds inside the run: its `GraphInput` checks the payload
    first, so that what the model refuses is the caller's mistake, not the agent's failure."""
    graph = leading_graph(runnable)
    if graph is not None:
        return graph_input(graph)
    kind = _first_input_type(runnable)
    return TypeAdapter(kind) if _model_type(kind) else None


def _first_input_type(runnable: Runnable[Any, Any]) -> Any:
    if isinstance(runnable, RunnableBindingBase):
        if getattr(runnable, "custom_input_type", None) is not None:
            return None
        return _first_input_type(runnable.bound)
    if isinstance(runnable, RunnableSequence):
        return _first_input_type(runnable.first)
    if isinstance(runnable, RunnableWithFallbacks):
        return _first_input_type(runnable.runnable)
    if isinstance(runnable, RunnableParallel):
        kinds = {_first_input_type(step) for step in runnable.steps__.values()}
        return kinds.pop() if len(kinds) == 1 else None
    if isinstance(runnable, RunnableLambda | RunnableGenerator):
        return runnable.InputType
    return None


def _fallbacks_agree(runnable: Runnable[Any, Any], agent_id: str) -> bool:
    """Whether a `.with_fallbacks()` that gives the output (itself, or a chain's last step) has
    runnables whose payloads are all described alike, and described at all. LangChain describes
    its output as the primary's, but a fallback may return anything (``"sorry, try later"``):
    declaring the primary's schema would fail the runs that fell back."""
    inner = unwrap(runnable)[-1]
    if isinstance(inner, RunnableSequence):
        return _fallbacks_agree(inner.last, agent_id)
    if not isinstance(inner, RunnableWithFallbacks):
        return True
    first, *others = (
        payload_schema(native_schemas(each, agent_id)[1], whole=_given_whole(each))
        for each in inner.runnables
    )
    return first is not None and all(other == first for other in others)


def _given_whole(runnable: Runnable[Any, Any]) -> bool:
    """Whether the runnable's output is a pydantic model (no message) or a dataclass, which the
    converter gives as its JSON form even when it holds messages (a ``Transcript`` with
    ``messages`` and ``resolved``). A graph gives a dict of its state, whatever its state is."""
    if find_graph(runnable) is not None:
        return False
    try:
        kind = runnable.OutputType
    except Exception:  # noqa: BLE001 - a runnable that cannot say gives no model we know of
        return False
    return _model_type(kind)


def _model_type(kind: Any) -> bool:
    """Whether `kind` is a pydantic model that is no chat message, or a dataclass."""
    if not isinstance(kind, type):
        return False
    model = issubclass(kind, BaseModel) and not issubclass(kind, BaseMessage)
    return model or dataclasses.is_dataclass(kind)


def _list_of(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """A list of what `schema` describes, its $defs kept at the root where its refs point."""
    if schema is None:
        return None
    items = {key: value for key, value in schema.items() if key != "$defs"}
    out: dict[str, Any] = {"type": "array", "items": items}
    if "$defs" in schema:
        out["$defs"] = schema["$defs"]
    return out


def _mapped(runnable: Runnable[Any, Any]) -> bool:
    """Whether the output is a `RunnableParallel` or `.assign()` mapping, whose output schema
    LangChain builds from each branch's declared type, not what the branch returns (a retriever's
    documents come out described as a string): declaring it would fail good runs."""
    inner = unwrap(runnable)[-1]
    steps = getattr(inner, "steps", None)
    last = steps[-1] if isinstance(inner, RunnableSequence) and steps else inner
    # `.pick()` after a mapping gives part of it, typed the same way.
    return isinstance(last, RunnableParallel | RunnableAssign | RunnablePick)


def _resolved(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """`schema` with a top-level ``$ref`` into its own ``$defs`` (a TypedDict input or output)
    replaced by what it points to, so its fields can be read."""
    ref = schema.get("$ref") if schema else None
    if schema is None or not isinstance(ref, str) or not ref.startswith(DEFS):
        return schema
    defs = schema.get("$defs", {})
    target = defs.get(ref.removeprefix(DEFS))
    if not isinstance(target, dict):
        return schema
    out = {key: value for key, value in schema.items() if key != "$ref"}
    out.update(target)
    return out


def _without_root(schema: dict[str, Any] | None) -> dict[str, Any] | None:
    """`schema` without LangChain's untyped ``root`` field: the whole value, not a key of it."""
    properties = schema.get("properties") if schema else None
    if schema is None or not isinstance(properties, dict) or properties.get("root") != _ROOT:
        return schema
    rest = {key: value for key, value in properties.items() if key != "root"}
    if not rest:
        # The input is the root value itself, of any type.
        return {}
    out = {**schema, "properties": rest}
    required = [key for key in schema.get("required", []) if key != "root"]
    if required:
        out["required"] = required
    else:
        out.pop("required", None)
    return out


def _schema(
    getter: Callable[[], dict[str, Any]], agent_id: str, which: str, kind: Any
) -> dict[str, Any] | None:
    try:
        return getter()
    except Exception as exc:  # noqa: BLE001 - any failure to describe itself leaves the schema open
        # A `typing.TypedDict` before Python 3.12, which pydantic refuses (LangGraph's docs use
        # it): described key by key here, as for a graph's state.
        described = typed_dict_schema(kind, required=True) if is_typeddict(kind) else None
        if described is not None:
            return described
        logger.warning(
            "agent %s: the runnable cannot describe its %s (%s: %s); it is left unchecked",
            agent_id,
            which,
            type(exc).__name__,
            exc,
        )
        return None


def _name(runnable: Runnable[Any, Any], agent_id: str) -> str:
    # A run name set for tracing ("Refund Agent") is often no valid capability name; the
    # runnable's own name is the next best, and only then the agent id's type.
    generic = _class_names(runnable) | _GENERIC_NAMES
    for name in (_run_name(runnable), runnable.get_name()):
        if name is not None and name not in generic and _valid_name(name):
            return name
    return parse_agent_id(agent_id).type


def _run_name(runnable: Runnable[Any, Any]) -> str | None:
    """The name `.with_config(run_name=...)` gave (a binding, or a graph, keeps it): an explicit name."""
    for wrapper in unwrap(runnable):
        config = getattr(wrapper, "config", None)
        name = config.get("run_name") if isinstance(config, dict) else None
        if isinstance(name, str) and name:
            return name
    return None


def _class_names(runnable: Runnable[Any, Any]) -> set[str]:
    # A binding reports the name of what it wraps, so a wrapped chain says "RunnableSequence".
    return {type(wrapper).__name__ for wrapper in unwrap(runnable)}


def _valid_name(name: str) -> bool:
    try:
        Capability(name=name)
    except InvalidDeclarationError:
        return False
    return True
