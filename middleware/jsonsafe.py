"""Turn agent outputs into JSON-safe values, or say exactly what could not be turned.

Values JSON has no type for but pydantic serialises (datetime, UUID, Decimal, Enum members,
bytes, Path...) get pydantic's JSON form: the form `model_dump(mode="json")` gives them inside a
model, and the one the schemas pydantic derives describe (``format: date-time``, ``uuid``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator, Mapping
from typing import Any, TypeGuard

from pydantic import BaseModel, JsonValue
from pydantic_core import to_jsonable_python

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
    become lists, subclasses of builtins become the builtins, and other values take pydantic's
    JSON form (a datetime its ISO text); a value with none (an arbitrary object, a generator, a
    NaN) raises `NotJsonSafeError` naming the type and its path.
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
        return _pydantic_form(value, where)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _dataclass_form(value, where)
    if isinstance(value, Mapping):
        return _convert(dict(value), where)
    return _pydantic_form(value, where)


def _dataclass_form(value: Any, where: str) -> JsonValue:
    """Its fields by name, each converted here, so that a value with no JSON form is named by
    its field (`output.quote.handle`). That is pydantic's form of a plain dataclass too, and
    unlike `dataclasses.asdict` copies nothing (a lock in a field cannot be copied). A pydantic
    dataclass may serialise its fields its own way (`field_serializer`): its serializer decides."""
    if hasattr(type(value), "__pydantic_serializer__"):
        return _pydantic_form(value, where)
    return {
        field.name: _convert(getattr(value, field.name), f"{where}.{field.name}")
        for field in dataclasses.fields(value)
    }


def _pydantic_form(value: Any, where: str) -> JsonValue:
    """`value` as pydantic serialises it to JSON; only reached for values that are no JSON data,
    so the common output never pays for it."""
    if isinstance(value, Iterator):
        # pydantic would drain it into a list: an output is a value, and a generator returned
        # by mistake (or one that never ends) should be said, not consumed.
        msg = f"{where} is {_type_name(value)}, an iterator, which has no JSON form; return a list"
        raise NotJsonSafeError(msg)
    try:
        if isinstance(value, BaseModel):
            # Builtins only: returned unwalked, as a model's output may be large.
            model: JsonValue = value.model_dump(mode="json")
            return model
        dumped = to_jsonable_python(value)
    except ValueError as exc:
        # PydanticSerializationError (a type pydantic does not know, here or inside a model) and
        # UnicodeDecodeError (bytes that are not UTF-8 text) both are.
        raise NotJsonSafeError(_no_form(value, where, exc)) from None
    # Builtins only now, but a NaN may be among them: refused as above.
    return dumped if is_json(dumped) else _convert(dumped, where)


def _no_form(value: Any, where: str, exc: ValueError) -> str:
    if isinstance(value, bytes | bytearray):
        kind = _type_name(value)
        return f"{where} is {kind} that is not UTF-8 text, which has no JSON form; send text or base64"
    if isinstance(value, BaseModel) or dataclasses.is_dataclass(value):
        return f"{where} is {_type_name(value)} holding a value with no JSON form: {exc}"
    return (
        f"{where} is {_type_name(value)}, which has no JSON form; return str, int, float, bool, None, "
        "lists, dicts, a pydantic model, a dataclass or a value pydantic serialises (datetime, UUID, "
        "Decimal, Enum...)"
    )


def _type_name(value: Any) -> str:
    kind = type(value)
    return f"a {kind.__module__}.{kind.__qualname__}"
