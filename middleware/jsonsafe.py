"""Turn agent outputs into JSON-safe values, or say exactly what could not be turned."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any, TypeGuard

from pydantic import BaseModel, JsonValue

__all__ = ["NotJsonSafeError", "ensure_json", "is_json"]

_EXACT_SCALARS = frozenset({str, int, bool, type(None)})


class NotJsonSafeError(TypeError):
    """A value has no JSON form; the message names its type and where it sits."""


def is_json(value: Any) -> TypeGuard[JsonValue]:
    """Whether `value` is JSON data already: exact builtin types all the way down."""
    kind = type(value)
    if kind in _EXACT_SCALARS:
        return True
    if kind is float:
        return math.isfinite(value)
    # Plain loops, not all(...): no generator to build, and this runs for every payload.
    if kind is dict:
        for key, item in value.items():  # noqa: SIM110
            if type(key) is not str or not is_json(item):
                return False
        return True
    if kind is list:
        for item in value:  # noqa: SIM110
            if not is_json(item):
                return False
        return True
    return False


def ensure_json(value: Any, *, where: str = "payload") -> JsonValue:
    """Return `value` as plain JSON data.

    Values that are JSON data already come back as they are (not copied): the common case is
    checked without building anything. Pydantic models and dataclasses are dumped, tuples and sets
    become lists, subclasses of builtins become the builtins; anything else that JSON cannot carry
    raises `NotJsonSafeError` naming the type and its path.
    """
    if is_json(value):
        return value
    return _convert(value, where)


def _convert(value: Any, where: str) -> JsonValue:
    kind = type(value)
    if kind in _EXACT_SCALARS:
        scalar: JsonValue = value
        return scalar
    if isinstance(value, str):
        # str subclasses (LangChain's TextAccessor, StrEnum members) become plain str, which
        # every JSON encoder and the compiled schema validators accept.
        return str.__str__(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        if math.isfinite(value):
            return value if kind is float else float(value)
        msg = f"{where} is {value!r}; JSON has no NaN or infinity"
        raise NotJsonSafeError(msg)
    if isinstance(value, dict):
        out: dict[str, JsonValue] = {}
        for key, item in value.items():
            if not isinstance(key, str):
                msg = f"{where} has a key of type {type(key).__name__}; JSON object keys are strings"
                raise NotJsonSafeError(msg)
            out[key] = _convert(item, f"{where}.{key}")
        return out
    if isinstance(value, list | tuple | set | frozenset):
        return [_convert(item, f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, BaseModel):
        dumped: JsonValue = value.model_dump(mode="json")
        return dumped
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _convert(dataclasses.asdict(value), where)
    if isinstance(value, Mapping):
        return _convert(dict(value), where)
    msg = (
        f"{where} is a {type(value).__module__}.{type(value).__qualname__}, which has no JSON form; "
        "return str, int, float, bool, None, lists, dicts, a pydantic model or a dataclass"
    )
    raise NotJsonSafeError(msg)
