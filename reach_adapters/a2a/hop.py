"""The task's hop metadata in an A2A message: its ids as flat keys, the rest as one JSON string.

The a2a-sdk server checks every protobuf sub-message of a request in Python: each metadata
value, each list item. All the ``agent-reach/*`` keys flat (as MCP's ``_meta`` carries them) cost
the server about 200 µs a call; packed, the deadline, depth, lineage and call options cost it one
value. The task and trace ids stay flat keys, where any A2A agent can read them, and so does a hop
token (the request handler takes it out of the message before the task stores it). A reach
server reads both forms, so clients that write every key flat keep working.
"""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from typing import Any

import orjson
from google.protobuf import struct_pb2

from reach_adapters.errors import InvalidMessageError
from reach_adapters.router import META_PREFIX

__all__ = ["HOP_KEY", "pack", "unpack"]

HOP_KEY = "agent-reach"
_FLAT = frozenset(META_PREFIX + key for key in ("task_id", "trace_id", "caller_token"))
_PREFIX_LENGTH = len(META_PREFIX)
# For what orjson refuses (integers past 64 bits, lone surrogates): the same JSON, slower.
_ENCODE = json.JSONEncoder(separators=(",", ":")).encode


def pack(carried: dict[str, Any], fields: MutableMapping[str, struct_pb2.Value]) -> None:
    """`request_meta`'s keys into a message's metadata `fields`: the ids and hop token (strings
    all three) as they are, the rest as one JSON string under `HOP_KEY`. Set as the strings
    they are, in one pass: no Struct.update type dispatch, no dict built per kind of key."""
    rest: dict[str, Any] = {}
    for key, value in carried.items():
        if key in _FLAT:
            fields[key].string_value = value
        else:
            rest[key[_PREFIX_LENGTH:]] = value
    if rest:
        fields[HOP_KEY].string_value = _json(rest)


def _json(values: dict[str, Any]) -> str:
    """Compact JSON; orjson, as `json` costs ten times more per call. The values are JSON-safe
    (finite numbers: the router checks payloads), where both read back the same."""
    try:
        return orjson.dumps(values).decode()
    except orjson.JSONEncodeError:
        return _ENCODE(values)


def unpack(metadata: dict[str, Any]) -> None:
    """Spread a message's `HOP_KEY` into flat ``agent-reach/*`` keys, in place; flat keys the
    message carries itself win."""
    raw = metadata.pop(HOP_KEY, None)
    if raw is None:
        return
    try:
        fields = json.loads(raw) if isinstance(raw, str) else None
    except ValueError:
        fields = None
    if not isinstance(fields, dict):
        msg = f"metadata {HOP_KEY!r} must be a JSON object in a string, as reach clients send it"
        raise InvalidMessageError(msg)
    for key, value in fields.items():
        metadata.setdefault(META_PREFIX + key, value)
