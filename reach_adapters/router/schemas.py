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
from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for

__all__ = [
    "CompiledSchema",
    "check_schema",
    "compiled_validator",
    "first_error",
    "json_kind",
    "schema_key",
    "wrap_field",
]

CompiledSchema = jsonschema_rs.Validator


def schema_key(schema: dict[str, Any]) -> str:
    """A canonical text of the schema: replicas declaring the same schema share one validator."""
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


def check_schema(schema: dict[str, Any]) -> str | None:
    """Return a description of what is wrong with `schema` as a JSON Schema, or None."""
    cls = validator_for(schema, default=Draft202012Validator)
    try:
        cls.check_schema(schema)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "(root)"
        return f"{exc.message} (at {where})"
    try:
        jsonschema_rs.validator_for(schema)
    except (ValueError, jsonschema_rs.ReferencingError) as exc:
        return str(exc)
    return None


@lru_cache(maxsize=4096)
def compiled_validator(key: str) -> CompiledSchema:
    return jsonschema_rs.validator_for(json.loads(key))


def first_error(validator: CompiledSchema, instance: Any, root: str = "(payload)") -> str | None:
    """The first validation error as one line naming the field (`root` for the whole instance),
    or None when valid."""
    for err in validator.iter_errors(instance):
        path = [str(p) for p in err.instance_path]
        if isinstance(err.kind, jsonschema_rs.ValidationErrorKind.Required):
            # Name the missing field itself, not the object that lacks it.
            path.append(str(err.kind.property).strip('"'))
        where = ".".join(path) or root
        return f"field '{where}': {err.message}"
    return None


_KINDS: tuple[tuple[type, str], ...] = (
    (bool, "a boolean"),
    (int, "an integer"),
    (float, "a number"),
    (str, "a string"),
    (list, "an array"),
    (dict, "an object"),
)


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
    take and give only objects (an ``input`` argument, a ``result`` box); $defs stay at the root,
    where the references inside point."""
    inner = {key: value for key, value in schema.items() if key != "$defs"}
    wrapped: dict[str, Any] = {"type": "object", "properties": {field: inner}, "required": [field]}
    if title is not None:
        wrapped["title"] = title
    if "$defs" in schema:
        wrapped["$defs"] = schema["$defs"]
    return wrapped
