"""JSON Schema checking, compiled once per distinct schema.

Declarations are meta-validated with `jsonschema`, which explains a bad schema well. Payloads
are checked on every call, so they go through `jsonschema-rs`, a compiled validator: the same
drafts (2020-12 unless ``$schema`` says otherwise) at a small fraction of the cost per call.
"""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

import jsonschema_rs
from jsonschema import Draft202012Validator
from jsonschema.exceptions import best_match
from jsonschema.validators import validator_for

__all__ = [
    "DEFINITIONS",
    "NAMED",
    "CompiledSchema",
    "check_schema",
    "compiled_validator",
    "first_error",
    "json_kind",
    "schema_key",
    "text_of_task",
    "unwrap_field",
    "wrap_field",
]

CompiledSchema = jsonschema_rs.Validator


def schema_key(schema: dict[str, Any]) -> str:
    """A canonical text of the schema: replicas declaring the same schema share one validator."""
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


def check_schema(schema: dict[str, Any]) -> str | None:
    """Return a description of what is wrong with `schema` as a JSON Schema, or None.

    Its patterns are checked as the validator compiles them (``\\p{L}`` and ``(?<name>...)``
    included, as pydantic and zod write them), not as Python's `re` reads them.
    """
    cls = validator_for(schema, default=Draft202012Validator)
    # Against the draft's meta-schema as `check_schema` does, but with no format checker, which
    # would compile each pattern with `re`.
    meta = validator_for(cls.META_SCHEMA, default=cls)(cls.META_SCHEMA)
    error = best_match(meta.iter_errors(schema))
    if error is not None:
        where = "/".join(str(p) for p in error.absolute_path) or "(root)"
        return f"{error.message} (at {where})"
    try:
        jsonschema_rs.validator_for(schema, retriever=_not_fetched)
    except (ValueError, jsonschema_rs.ReferencingError) as exc:
        # Its first paragraph says what is wrong; the rest repeats the schema around it.
        return str(exc).split("\n\n", 1)[0]
    return None


@lru_cache(maxsize=4096)
def compiled_validator(key: str) -> CompiledSchema:
    return jsonschema_rs.validator_for(json.loads(key), retriever=_not_fetched)


def _not_fetched(uri: str) -> Any:
    # Schemas come from MCP servers and A2A agents, others' too: fetching what they refer to would
    # let any of them make the router request any URL, internal ones included, or read its files.
    msg = f"the router fetches no schema another refers to ({uri}); give it in the schema's $defs"
    raise ValueError(msg)


def text_of_task(payload: Any) -> str | None:
    """The text of a text task's object, ``{"text": "..."}`` (what an A2A message of text parts
    becomes), else None."""
    if isinstance(payload, dict) and len(payload) == 1:
        text = payload.get("text")
        if isinstance(text, str):
            return text
    return None


# A value none of whose options fit; the errors of each option are in its context.
_UNIONS = (jsonschema_rs.ValidationErrorKind.AnyOf, jsonschema_rs.ValidationErrorKind.OneOfNotValid)
_TYPE_NAMES = {
    "string": "a string",
    "array": "an array",
    "object": "an object",
    "integer": "an integer",
    "number": "a number",
    "boolean": "a boolean",
    "null": "null",
}


def first_error(validator: CompiledSchema, instance: Any, root: str = "(payload)") -> str | None:
    """The first validation error as one line naming the field (`root` for the whole instance),
    or None when valid. Only runs on a payload found invalid, so it may take its time."""
    for found in validator.iter_errors(instance):
        err = _in_union(found)
        path = [str(p) for p in err.instance_path]
        if isinstance(err.kind, jsonschema_rs.ValidationErrorKind.Required):
            # Name the missing field itself, not the object that lacks it.
            path.append(str(err.kind.property).strip('"'))
        where = ".".join(path) or root
        if isinstance(err.kind, jsonschema_rs.ValidationErrorKind.Constant):
            # '"red" was expected' alone does not say what was sent instead.
            return f"field '{where}': {err.message}, got {json_kind(err.instance)}"
        return f"field '{where}': {err.message}{_expected(err)}"
    return None


def refused_whole(validator: CompiledSchema, instance: Any) -> bool:
    """Whether the schema refuses `instance` as a whole (its type, or as none of the values it
    lists), not something in it."""
    for found in validator.iter_errors(instance):
        err = _in_union(found)
        return not err.instance_path and isinstance(err.kind, _WHOLE)
    return False


def refused_type(validator: CompiledSchema, instance: Any) -> bool:
    """Whether the schema refuses `instance` for its type alone: it takes no value of that type
    (an object for a text schema, a text for a number's), whatever is in it."""
    return any(
        not found.instance_path and _types_refused([found], found.instance_path)
        for found in validator.iter_errors(instance)
    )


def _in_union(err: jsonschema_rs.ValidationError) -> jsonschema_rs.ValidationError:
    """For a value no option of an anyOf/oneOf takes: when one option took the value's type and
    failed inside it, while every other refused the type, that option's own first error (it says
    what is wrong inside); else `err` itself."""
    if not isinstance(err.kind, _UNIONS):
        return err
    here = err.instance_path
    inside = [option for option in err.kind.context if option and _deeper(option, here)]
    refused = [option for option in err.kind.context if _types_refused(option, here)]
    if len(inside) == 1 and len(inside) + len(refused) == len(err.kind.context):
        return _in_union(inside[0][0])
    return err


# Refusals of a value as a whole, which say nothing of what is wrong inside it.
_WHOLE = (
    *_UNIONS,
    jsonschema_rs.ValidationErrorKind.Type,
    jsonschema_rs.ValidationErrorKind.Constant,
    jsonschema_rs.ValidationErrorKind.Enum,
    jsonschema_rs.ValidationErrorKind.Not,
    jsonschema_rs.ValidationErrorKind.FalseSchema,
)


def _deeper(option: list[jsonschema_rs.ValidationError], here: list[str | int]) -> bool:
    """Whether an option took the value as a whole and refused something in it (a field, a
    missing key, an item)."""
    return not any(each.instance_path == here and isinstance(each.kind, _WHOLE) for each in option)


def _types_refused(option: list[jsonschema_rs.ValidationError], here: list[str | int]) -> list[str]:
    """The types an option of a union takes, when it refused the value itself for its type (a
    nested union that refused it so in each of its options counts too); else nothing."""
    for each in option:
        if each.instance_path != here:
            continue
        if isinstance(each.kind, jsonschema_rs.ValidationErrorKind.Type):
            return list(each.kind.types)
        if isinstance(each.kind, _UNIONS):
            nested = [_types_refused(inner, here) for inner in each.kind.context]
            if nested and all(nested):
                return [kind for kinds in nested for kind in kinds]
    return []


def _expected(err: jsonschema_rs.ValidationError) -> str:
    """What a union takes, when every option refused the value for its type: "; expected a
    string or an array" (the bare "not valid under any of the schemas" says nothing of what
    would be)."""
    if not isinstance(err.kind, _UNIONS):
        return ""
    kinds = [_types_refused(option, err.instance_path) for option in err.kind.context]
    if not kinds or not all(kinds):
        return ""
    names = [_TYPE_NAMES.get(kind, kind) for kind in dict.fromkeys(k for each in kinds for k in each)]
    *others, last = names
    return f"; expected {', '.join(others)} or {last}" if others else f"; expected {last}"


_KINDS: tuple[tuple[type, str], ...] = (
    (bool, "a boolean"),
    (int, "an integer"),
    (float, "a number"),
    (str, "a string"),
    (list, "an array"),
    (dict, "an object"),
)


# Where a schema keeps the subschemas its ``#/...`` references point to: 2020-12's ``$defs`` and
# draft-07's ``definitions`` (zod-to-json-schema and many MCP servers still emit those), both at
# the root of the document.
DEFINITIONS = ("$defs", "definitions")
# Keywords whose value maps names (of properties, definitions) to schemas: a key there is a name
# (a property may be called "definitions"), never a keyword.
NAMED = frozenset({"properties", "patternProperties", "dependentSchemas", *DEFINITIONS})


def json_kind(value: Any, preview: int = 40) -> str:
    """What `value` is in JSON's words, with the start of it: ``a string "PX-7"``."""
    if value is None:
        return "null"
    # bool before int: True is an int to Python, a boolean to JSON.
    kind = next((name for cls, name in _KINDS if isinstance(value, cls)), type(value).__name__)
    text = json.dumps(value, default=str)
    return f"{kind} {text if len(text) <= preview else text[: preview - 3] + '...'}"


def wrap_field(field: str, schema: dict[str, Any], *, title: str | None = None) -> dict[str, Any]:
    """An object schema holding `schema` as its one required `field`, for tool protocols that
    take and give only objects (an ``input`` argument, a ``result`` box); the definitions
    (``$defs``, or draft-07's ``definitions``) stay at the root, where the references inside point."""
    inner = {key: value for key, value in schema.items() if key not in DEFINITIONS}
    wrapped: dict[str, Any] = {"type": "object", "properties": {field: inner}, "required": [field]}
    if title is not None:
        wrapped["title"] = title
    for key in DEFINITIONS:
        if key in schema:
            wrapped[key] = schema[key]
    return wrapped


def unwrap_field(field: str, schema: dict[str, Any]) -> dict[str, Any] | None:
    """The schema `wrap_field` boxed as `field`, with the root's definitions its references point
    to; None when `schema` is no such box (an object with `field` as its one, required, property)."""
    properties = schema.get("properties")
    if (
        schema.get("type") != "object"
        or not isinstance(properties, dict)
        or list(properties) != [field]
        or schema.get("required") != [field]
        or not isinstance(properties[field], dict)
    ):
        return None
    inner = dict(properties[field])
    for key in DEFINITIONS:
        root, own = schema.get(key), inner.get(key)
        if isinstance(root, dict):
            inner[key] = {**own, **root} if isinstance(own, dict) else root
    return inner
