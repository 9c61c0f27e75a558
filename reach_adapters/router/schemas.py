"""JSON Schema checking, compiled once per distinct schema."""

from __future__ import annotations

import json
from functools import lru_cache
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from jsonschema.protocols import Validator
from jsonschema.validators import validator_for

__all__ = ["check_schema", "compiled_validator", "first_error", "schema_key"]


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
    return None


@lru_cache(maxsize=4096)
def compiled_validator(key: str) -> Validator:
    schema = json.loads(key)
    cls = validator_for(schema, default=Draft202012Validator)
    validator: Validator = cls(schema)
    return validator


def first_error(validator: Validator, instance: Any) -> str | None:
    """The most relevant validation error as one line naming the field, or None when valid."""
    errors = sorted(validator.iter_errors(instance), key=lambda e: e.path)
    if not errors:
        return None
    err = errors[0]
    where = ".".join(str(p) for p in err.absolute_path) or "(payload)"
    return f"field '{where}': {err.message}"
