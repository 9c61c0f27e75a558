"""JSON Schemas of `typing.TypedDict` graph states, which pydantic refuses before Python 3.12.

LangGraph cannot describe such a state, so the adapter does: each key by pydantic, a nested
`typing.TypedDict` (in a key, a list, a union...) remade as a `typing_extensions` one, which
pydantic takes on any Python. A key that still cannot be described is left open (``{}``); the
others keep their schemas.
"""

from __future__ import annotations

import logging
import types
import typing
from typing import Any

import typing_extensions
from pydantic import ConfigDict, create_model

__all__ = ["typed_dict_schema"]

logger = logging.getLogger(__name__)

# A key's annotation and its pydantic default (``...``: required).
_Field = tuple[Any, Any]


def typed_dict_schema(state: Any, *, required: bool) -> dict[str, Any] | None:
    """The JSON Schema of a TypedDict's keys, with the keys it requires required if `required`;
    None when its annotations cannot be read."""
    try:
        hints = typing.get_type_hints(state)
    except Exception:  # noqa: BLE001 - no readable annotations: leave the schema open
        return None
    needed = getattr(state, "__required_keys__", frozenset(hints)) if required else frozenset()
    fields: dict[str, _Field] = {
        name: (hint, ... if name in needed else None) for name, hint in hints.items()
    }
    name = getattr(state, "__name__", "State")
    # One TypedDict remade once, so that the keys holding it share one definition.
    remade: dict[Any, Any] = {}
    try:
        schema = _model_schema(name, fields, remade)
    except Exception:  # noqa: BLE001 - some key pydantic cannot describe: describe them one by one
        schema = _schema_by_key(name, fields, remade)
    for prop in schema.get("properties", {}).values():
        # The None that marks a key optional here is no value a caller may send.
        if isinstance(prop, dict) and prop.get("default", ...) is None:
            del prop["default"]
    return schema


def _model_schema(name: str, fields: dict[str, _Field], remade: dict[Any, Any]) -> dict[str, Any]:
    described: dict[str, Any] = {
        key: (_describable(hint, remade, frozenset()), default) for key, (hint, default) in fields.items()
    }
    model = create_model(name, __config__=ConfigDict(arbitrary_types_allowed=True), **described)
    schema: dict[str, Any] = model.model_json_schema()
    return schema


def _schema_by_key(name: str, fields: dict[str, _Field], remade: dict[Any, Any]) -> dict[str, Any]:
    """The schema of the keys described one at a time; a key that cannot be is left open."""
    properties: dict[str, Any] = {}
    defs: dict[str, Any] = {}
    for key, field in fields.items():
        properties[key] = {}
        try:
            one = _model_schema(name, {key: field}, remade)
        except Exception as exc:  # noqa: BLE001 - this key stays open, the others described
            logger.debug("no JSON Schema for the key %r of the graph state %s: %s", key, name, exc)
            continue
        found: dict[str, Any] = one.get("$defs", {})
        if any(defs.get(ref, body) != body for ref, body in found.items()):
            # Another key defines a type of that name otherwise: its references would be wrong.
            continue
        defs.update(found)
        properties[key] = one["properties"][key]
    schema: dict[str, Any] = {"properties": properties, "title": name, "type": "object"}
    needed = [key for key, (_, default) in fields.items() if default is ...]
    if needed:
        schema["required"] = needed
    if defs:
        schema["$defs"] = defs
    return schema


def _describable(hint: Any, remade: dict[Any, Any], inside: frozenset[Any]) -> Any:
    """`hint` with every `typing.TypedDict` in it remade as a `typing_extensions` one; raises
    `TypeError` for a TypedDict that holds itself (`inside` are those being remade)."""
    if isinstance(hint, type) and typing.is_typeddict(hint) and type(hint).__module__ == "typing":
        return _remade(hint, remade, inside)
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin is None or not args or origin is typing.Literal:
        return hint
    described = tuple(_describable(arg, remade, inside) for arg in args)
    if described == args:
        return hint
    if origin in (typing.Union, types.UnionType):
        return typing.Union[described]  # noqa: UP007 - a union built from a tuple of types
    return origin[described]


def _remade(state: Any, remade: dict[Any, Any], inside: frozenset[Any]) -> Any:
    if state in remade:
        return remade[state]
    if state in inside:
        msg = f"{state.__name__} holds itself"
        raise TypeError(msg)
    inside = inside | {state}
    required = state.__required_keys__
    keys = {
        key: (typing_extensions.Required if key in required else typing_extensions.NotRequired)[
            _describable(hint, remade, inside)
        ]
        for key, hint in typing.get_type_hints(state).items()
    }
    # Called through a plain name: type checkers read `TypedDict(...)` as a class definition.
    make: Any = typing_extensions.TypedDict
    made = make(state.__name__, keys)
    made.__doc__ = state.__doc__
    remade[state] = made
    return made
