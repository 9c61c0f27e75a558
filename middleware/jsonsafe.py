"""Turn agent outputs into JSON-safe values, or say exactly what could not be turned."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, JsonValue

__all__ = ["NotJsonSafeError", "ensure_json"]

_EXACT_SCALARS = frozenset({str, int, bool, type(None)})


class NotJsonSafeError(TypeError):
    """A value has no JSON form; the message names its type and where it sits."""


def ensure_json(value: Any, *, where: str = "payload") -> JsonValue:
    """Return `value` as plain JSON data.

    Pydantic models and dataclasses are dumped, tuples and sets become lists; anything else that
    JSON cannot carry raises `NotJsonSafeError` naming the type and its path.
    """
    kind = type(value)
    if kind in _EXACT_SCALARS:
        scalar: JsonValue = value
        return scalar
    if isinstance(value, bool):
        return bool(value)
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
            out[key] = ensure_json(item, where=f"{where}.{key}")
        return out
    if isinstance(value, list | tuple | set | frozenset):
        return [ensure_json(item, where=f"{where}[{i}]") for i, item in enumerate(value)]
    if isinstance(value, BaseModel):
        dumped: JsonValue = value.model_dump(mode="json")
        return dumped
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return ensure_json(dataclasses.asdict(value), where=where)
    if isinstance(value, Mapping):
        return ensure_json(dict(value), where=where)
    msg = (
        f"{where} is a {type(value).__module__}.{type(value).__qualname__}, which has no JSON form; "
        "return str, int, float, bool, None, lists, dicts, a pydantic model or a dataclass"
    )
    raise NotJsonSafeError(msg)
