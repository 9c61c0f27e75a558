"""A2A parts and the router's JSON payloads, both ways.

One rule for both sides of the adapter: a text travels as a text part, any other JSON as one data
part (``application/json``). A2A carries data in protobuf ``Value``s, where every number is a
double; numbers with no fraction come back as ints, so ``{"n": 1}`` is not ``{"n": 1.0}`` after a hop.
"""

from __future__ import annotations

import base64
import math
from collections.abc import Iterable, Sequence

from a2a.types.a2a_pb2 import Part
from google.protobuf import json_format, struct_pb2
from pydantic import JsonValue

from reach_adapters.errors import InvalidMessageError
from reach_adapters.router import text_of_task

__all__ = [
    "JSON_MEDIA_TYPE",
    "TEXT_MEDIA_TYPE",
    "data_value",
    "fill_part",
    "input_payload",
    "payload_parts",
    "result_payload",
]

JSON_MEDIA_TYPE = "application/json"
TEXT_MEDIA_TYPE = "text/plain"
# Doubles up to here hold integers exactly: an integral one within is an int.
_EXACT = 2**53


def payload_parts(payload: JsonValue) -> list[Part]:
    """A payload as parts: a string, or an object whose only field is ``text``, is one text part."""
    part = Part()
    fill_part(part, payload)
    return [part]


def fill_part(part: Part, payload: JsonValue) -> None:
    """Set `part` (empty) to `payload`'s one part, as `payload_parts` makes it; filled in place,
    as a request's ``parts.add()`` gives it, so nothing is copied on the way."""
    if isinstance(payload, str):
        part.text = payload
        return
    text = text_of_task(payload)
    if text is not None:
        part.text = text
        return
    part.media_type = JSON_MEDIA_TYPE
    _fill_value(part.data, payload)


def _fill_value(value: struct_pb2.Value, item: object) -> None:
    """`item` into `value` as ``json_format.ParseDict`` puts it (an empty object or list still
    sets its kind), without ParseDict's per-field descriptor walk: every request's data goes
    through here."""
    if isinstance(item, str):
        value.string_value = item
    elif isinstance(item, bool):
        value.bool_value = item
    elif isinstance(item, int | float):
        value.number_value = item
    elif isinstance(item, dict):
        struct = value.struct_value
        struct.SetInParent()
        fields = struct.fields
        for key, sub in item.items():
            _fill_value(fields[key], sub)
    elif isinstance(item, list | tuple):
        listed = value.list_value
        listed.SetInParent()
        values = listed.values
        for sub in item:
            _fill_value(values.add(), sub)
    elif item is None:
        value.null_value = struct_pb2.NULL_VALUE
    else:
        msg = f"Value {item} has unexpected type {type(item)}"
        raise json_format.ParseError(msg)


def data_value(value: struct_pb2.Value) -> JsonValue:
    """A protobuf ``Value`` as JSON, with integral doubles back as ints.

    What ``json_format.MessageToDict`` gives (an unset value is null, infinities and NaN are a
    `ValueError`), walked directly: every answer's data goes through here.
    """
    kind = value.WhichOneof("kind")
    if kind == "string_value":
        return value.string_value
    if kind == "number_value":
        number = value.number_value
        if number.is_integer() and abs(number) < _EXACT:
            return int(number)
        if math.isfinite(number):
            return number
        msg = f"a data part holds {number}, which JSON cannot carry"
        raise ValueError(msg)
    if kind == "struct_value":
        # Keys indexed: the map's items() is the Python-level Mapping view, twice the cost.
        fields = value.struct_value.fields
        return {key: data_value(fields[key]) for key in fields}
    if kind == "list_value":
        return [data_value(item) for item in value.list_value.values]
    if kind == "bool_value":
        return value.bool_value
    return None


def result_payload(parts: Sequence[Part]) -> JsonValue:
    """What an agent answered, as a result's payload: the text, the one data part's value, or,
    for several parts of different kinds or files, a list of each part in A2A's JSON form."""
    kinds = {part.WhichOneof("content") for part in parts}
    if not parts:
        return None
    if kinds == {"text"}:
        return "\n".join(part.text for part in parts)
    if len(parts) == 1 and kinds == {"data"}:
        return data_value(parts[0].data)
    return [_part_json(part) for part in parts]


def input_payload(parts: Iterable[Part]) -> dict[str, JsonValue]:
    """A message's parts as a capability's input: one data part holding an object is that object;
    text parts are ``{"text": ...}``, the form a chat agent's capability takes."""
    parts = list(parts)
    kinds = {part.WhichOneof("content") for part in parts}
    if kinds == {"text"}:
        return {"text": "\n".join(part.text for part in parts)}
    if len(parts) == 1 and kinds == {"data"}:
        value = data_value(parts[0].data)
        if isinstance(value, dict):
            return value
        msg = f"the message's data part is a {type(value).__name__}: send a JSON object (the skill's input)"
        raise InvalidMessageError(msg)
    msg = (
        f"the message has parts of kinds {sorted(str(kind) for kind in kinds)}: send text parts, "
        "or one data part holding a JSON object"
    )
    raise InvalidMessageError(msg)


def _part_json(part: Part) -> JsonValue:
    kind = part.WhichOneof("content")
    shown: dict[str, JsonValue] = {}
    if kind == "text":
        shown["text"] = part.text
    elif kind == "data":
        shown["data"] = data_value(part.data)
    elif kind == "raw":
        shown["raw"] = base64.b64encode(part.raw).decode("ascii")
    elif kind == "url":
        shown["url"] = part.url
    if part.media_type:
        shown["media_type"] = part.media_type
    if part.filename:
        shown["filename"] = part.filename
    return shown
