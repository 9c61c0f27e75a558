"""Validate one parsed config file against its model, with pydantic's first error turned into a
`ConfigFileError` naming the file, the line and the field."""

from __future__ import annotations

import types
from collections.abc import Sequence
from typing import Any, TypeVar, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError
from pydantic_core import ErrorDetails

from reach_adapters.config.errors import ConfigFileError
from reach_adapters.config.source import Document

__all__ = ["mapping_of", "validate"]

M = TypeVar("M", bound=BaseModel)

_SCHEMA_KEY = "$schema"


def mapping_of(doc: Document) -> dict[str, Any]:
    """The file's top-level mapping, without the ``$schema`` key editors use."""
    data = doc.data
    if data is None:
        raise ConfigFileError(doc.path, "is empty; it must hold a mapping of keys to values", line=1)
    if not isinstance(data, dict):
        problem = f"must hold a mapping of keys to values, not a {type(data).__name__}"
        raise ConfigFileError(doc.path, problem, line=doc.line_of(()))
    schema = data.pop(_SCHEMA_KEY, None)
    if schema is not None and not isinstance(schema, str):
        raise doc.error((_SCHEMA_KEY,), "must be a string: the URL or path of the file's JSON Schema")
    return data


def validate(doc: Document, model: type[M], data: dict[str, Any]) -> M:
    """`data` as a `model`; the first problem raised with its line, and how many more there are."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors(include_url=False)
        problem = _problem(model, errors[0])
        if len(errors) > 1:
            problem += f" (and {len(errors) - 1} more problem(s) in this file)"
        raise doc.error(errors[0]["loc"], problem) from None


def _problem(model: type[BaseModel], error: ErrorDetails) -> str:
    if error["type"] == "extra_forbidden":
        known = _keys_at(model, error["loc"][:-1])
        return f"unknown key; the keys allowed here are: {', '.join(known)}" if known else "unknown key"
    if error["type"] == "missing":
        return "missing; this field is required"
    return error["msg"].removeprefix("Value error, ")


def _keys_at(model: type[BaseModel], loc: Sequence[str | int]) -> list[str]:
    """The fields of the model found at `loc`, following nested models, lists and dicts."""
    annotation: Any = model
    for part in loc:
        annotation = _unwrap(annotation)
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            field = annotation.model_fields.get(str(part))
            if field is None:
                return []
            annotation = field.annotation
        elif get_origin(annotation) in (list, dict):
            annotation = get_args(annotation)[-1]
        else:
            return []
    annotation = _unwrap(annotation)
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return list(annotation.model_fields)
    return []


def _unwrap(annotation: Any) -> Any:
    """``X | None`` and ``Annotated[X, ...]`` → ``X``."""
    while True:
        origin = get_origin(annotation)
        if origin in (Union, types.UnionType):
            options = [arg for arg in get_args(annotation) if arg is not type(None)]
            if len(options) != 1:
                return annotation
            annotation = options[0]
        elif origin is not None and hasattr(annotation, "__metadata__"):
            annotation = get_args(annotation)[0]
        else:
            return annotation
