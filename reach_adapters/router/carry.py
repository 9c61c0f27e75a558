"""The task carried across a protocol hop: ids, deadline, lineage and call options as flat
metadata keys (MCP's request `_meta`, A2A's message metadata), and back into a `MetaInfo`."""

from __future__ import annotations

from collections.abc import Mapping
from difflib import get_close_matches
from typing import Any

from pydantic import ValidationError

from middleware import MetaInfo
from reach_adapters.errors import InvalidMessageError, describe_validation_error

__all__ = ["META_PREFIX", "meta_from_request", "request_meta"]

# Metadata keys carrying the task across hops (MCP reserves prefixes like this one), and the
# call options a client may set there: `configurable` (a thread id), `context` and `resume`.
META_PREFIX = "agent-reach/"
_SENT = (
    "task_id",
    "trace_id",
    "source",
    "deadline",
    "depth",
    "lineage",
    "configurable",
    "context",
    "resume",
    "caller_token",
)
# How a stream's chunks look: sent with streamed calls only, as they shape a unary call's answer
# on the far side (a graph's chunks in those modes) where the near one ignores them.
_STREAM_SHAPE = ("stream_mode", "subgraphs")
_CARRIED = _SENT + _STREAM_SHAPE
# Every key of ours a server reads: A2A's `unary` too (see a2a/hop.py), taken out before this.
_KNOWN = (*_CARRIED, "unary")


def request_meta(meta: MetaInfo, *, stream: bool = False) -> dict[str, Any]:
    """The task's ids, deadline, lineage and call options as metadata of an outgoing request;
    with `stream`, also how its chunks look (`stream_mode`, `subgraphs` when true)."""
    values = {key: getattr(meta, key) for key in _SENT}
    carried = {META_PREFIX + key: value for key, value in values.items() if value not in (None, [])}
    if "resume" in meta.__pydantic_fields_set__:
        # Any answer resumes, null and [] included.
        carried[META_PREFIX + "resume"] = meta.resume
    if stream:
        if meta.stream_mode is not None:
            carried[META_PREFIX + "stream_mode"] = meta.stream_mode
        if meta.subgraphs:
            carried[META_PREFIX + "subgraphs"] = True
    return carried


def meta_from_request(meta: Mapping[str, Any] | None, capability: str | None) -> MetaInfo:
    """A served call's `MetaInfo`, continuing the caller's task when its metadata carries one.

    Keeping the caller's task id makes a retried call from an upstream router a duplicate here,
    answered from the first delivery instead of run twice.
    """
    carried = {
        key: meta[META_PREFIX + key] for key in _CARRIED if meta is not None and META_PREFIX + key in meta
    }
    if meta is not None and len(meta) > len(carried):
        _refuse_misspelt(meta)
    try:
        return MetaInfo(capability=capability, **carried)
    except ValidationError as exc:
        error = describe_validation_error(exc)
        msg = f"the request's metadata carries an invalid {META_PREFIX} field: {error}"
        raise InvalidMessageError(msg) from None


def _refuse_misspelt(meta: Mapping[str, Any]) -> None:
    """Refuse a key of ours spelt close to one we read (``agent-reach/configurabel``): dropped, it
    would leave the call without its thread or answer and the caller without a clue. Keys far
    from any are left alone, as another version or protocol may carry them."""
    for key in meta:
        name = key[len(META_PREFIX) :] if key.startswith(META_PREFIX) else None
        if name is None or name in _KNOWN:
            continue
        # Case and separators aside (taskId, Task-ID): the spellings a client most often tries.
        close = get_close_matches(name.lower().replace("-", "_"), _KNOWN, n=1, cutoff=0.8)
        if close:
            msg = (
                f"the request's metadata has {key!r}, which is not read: did you mean "
                f"{META_PREFIX + close[0]!r}?"
            )
            raise InvalidMessageError(msg)
