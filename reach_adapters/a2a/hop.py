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
from typing import Any

from reach_adapters.errors import InvalidMessageError
from reach_adapters.router import META_PREFIX

__all__ = ["HOP_KEY", "pack", "unpack"]

HOP_KEY = "agent-reach"
_FLAT = frozenset(META_PREFIX + key for key in ("task_id", "trace_id", "caller_token"))
# Made once: `json.dumps` with separators builds an encoder per call.
_ENCODE = json.JSONEncoder(separators=(",", ":")).encode


def pack(carried: dict[str, Any]) -> dict[str, str]:
    """`request_meta`'s keys with all but the ids and hop token (strings all three) under the one
    `HOP_KEY`: every value a string."""
    flat = {key: value for key, value in carried.items() if key in _FLAT}
    rest = {key.removeprefix(META_PREFIX): value for key, value in carried.items() if key not in _FLAT}
    if rest:
        flat[HOP_KEY] = _ENCODE(rest)
    return flat


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
