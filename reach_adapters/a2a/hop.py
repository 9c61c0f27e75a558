"""The task's hop metadata in an A2A message: one JSON string, and the hop token beside it.

The a2a-sdk server checks every protobuf sub-message of a request in Python: each metadata
value, each list item, and every value of the message is converted again when the task stores
it and when it is answered. A metadata key costs such a server tens of µs a call (the task's two
ids as keys of their own made a trivial call 1.9 % slower), so the task's ids, deadline, depth,
lineage and call options travel as one value under `HOP_KEY`. Only a hop token stays a key of its
own: the request handler takes it out of the message before the task stores it (one inside the
string is ignored). A reach server reads both forms, so clients that write every
``agent-reach/*`` key flat keep working.
"""

from __future__ import annotations

import json
from collections.abc import MutableMapping
from typing import Any

import orjson
from google.protobuf import struct_pb2

from reach_adapters.errors import InvalidMessageError
from reach_adapters.router import META_PREFIX

__all__ = ["HOP_KEY", "NO_THREAD", "UNARY", "pack", "unpack"]

HOP_KEY = "agent-reach"
# Sent by a reach client with a call it streams only as the transport (the agent's card offers
# streaming) and wants one answer of: a reach server routes it as a call, not a stream, so it
# answers as the agent would in process (a graph's output, not its chunks).
UNARY = META_PREFIX + "unary"
# Sent by a reach client whose caller named no thread: the contextId the server makes for the
# message is then no thread either, so an agent keeping one conversation per thread (a checkpointed
# graph) refuses the call as in its own process, instead of asking what nobody could answer.
NO_THREAD = META_PREFIX + "no_thread"
_TOKEN = META_PREFIX + "caller_token"
_PREFIX_LENGTH = len(META_PREFIX)
# For what orjson refuses (integers past 64 bits, lone surrogates): the same JSON, slower.
_ENCODE = json.JSONEncoder(separators=(",", ":")).encode


def pack(carried: dict[str, Any], fields: MutableMapping[str, struct_pb2.Value]) -> None:
    """`request_meta`'s keys into a message's metadata `fields`: the hop token (a string) as it
    is, the rest as one JSON string under `HOP_KEY`. Set as strings: no Struct.update type
    dispatch."""
    rest: dict[str, Any] = {}
    for key, value in carried.items():
        if key == _TOKEN:
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
        # A hop token counts only as a key of its own, which the request handler takes out before
        # the task stores the message: one inside this string would be kept in its history.
        if META_PREFIX + key != _TOKEN:
            metadata.setdefault(META_PREFIX + key, value)
