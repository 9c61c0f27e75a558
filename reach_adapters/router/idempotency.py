"""Deliver each task id at most once within a window; repeats get the first delivery's result.

A task id is bound to the request it was first used for, as payment APIs bind an idempotency
key: a repeat of the same request shares the first result, a different request under the same
id is refused, never served someone else's answer.

The results kept are bounded by their total size. A result larger than the per-result bound is
handed to the callers already waiting for it, then kept as its fingerprint only; past the total
bound, the oldest results kept give way to their fingerprints. A later repeat of such a task is
refused (`IdempotencyConflictError`, "not kept") rather than delivered a second time, so a task id
still means at most one delivery within the window.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import time
from collections import OrderedDict
from typing import NamedTuple

import orjson

from middleware import MetaInfo, ReachMessage, ReachResult
from reach_adapters.errors import IdempotencyConflictError

__all__ = ["Fingerprint", "IdempotencyStore", "fingerprint", "payload_size", "result_size", "stream_shape"]


# Canonical JSON: key order must not make two requests differ (a retry from a Go client need not
# order a map's keys as the first try did). orjson, as `json` costs 10-20 times more per call.
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class Fingerprint(NamedTuple):
    """What makes two requests the same: where they go, the options that route them, the payload.

    Only digests of the payload and attributes are kept, so a held task id costs a few bytes.
    """

    mode: str
    capability: str | None
    target: str | None
    # Version, namespace, how the answers are merged (a broadcast) or decided (a consensus), attributes.
    options: tuple[str | None, str | None, object, bytes | None]
    payload: bytes
    # Another principal's task id is never the same request: it may not read that result.
    principal: str | None = None
    # A stream's chunks as the call asks them (`stream_mode`, `subgraphs`): a repeat asking
    # another shape would be answered with chunks it cannot read.
    shape: tuple[object, bool] | None = None

    def request(self) -> str:
        if self.mode == "directed":
            named = f" ({self.capability!r})" if self.capability else ""
            return f"send to agent {self.target}{named}"
        verbs = {"broadcast": "broadcast to", "consensus": "ask a consensus of", "stream": "stream from"}
        verb = verbs.get(self.mode, "route to")
        if self.capability is None:
            return f"{verb} whatever matches its task text"
        return f"{verb} {self.capability!r}"

    def differences(self, first: Fingerprint) -> list[str]:
        """What this request changes from the `first` one under the same task id; nothing of the
        first request when another principal made it."""
        if self.principal != first.principal:
            return ["another caller uses it; choose task ids of your own"]
        out = []
        if (self.mode, self.capability, self.target) != (first.mode, first.capability, first.target):
            out.append(f"it was first used to {first.request()}, this request would {self.request()}")
        if self.payload != first.payload:
            out.append("the payload differs")
        if self.options != first.options:
            decided = "consensus" if self.mode == "consensus" else "merge"
            names = ("version", "namespace", decided, "attributes")
            out.append(f"the routing options differ ({_changed(names, self.options, first.options)})")
        if self.shape != first.shape and self.shape is not None and first.shape is not None:
            shaped = ("stream_mode", "subgraphs")
            out.append(f"the stream's chunks differ ({_changed(shaped, self.shape, first.shape)})")
        return out


def _changed(names: tuple[str, ...], ours: tuple[object, ...], theirs: tuple[object, ...]) -> str:
    """The names of the values that differ, in order."""
    return ", ".join(name for name, a, b in zip(names, ours, theirs, strict=True) if a != b)


def fingerprint(message: ReachMessage, capability: str | None = None) -> Fingerprint:
    """The request's fingerprint; ids, deadlines, priority and lineage do not change what it asks.

    `capability` is the one a directed call reaches when it names none (the agent's only one), so
    naming it or not is the same request. No payload is the same as ``{}``, as an MCP hop sends it.
    """
    meta = message.meta_info
    hint = message.routing_hint
    capability = meta.capability or capability
    options = (
        meta.version,
        meta.namespace,
        hint.merge if hint.mode == "broadcast" else hint.consensus if hint.mode == "consensus" else None,
        _digest(meta.attributes) if meta.attributes else None,
    )
    payload = {} if message.raw_payload is None else message.raw_payload
    if capability is None:
        # A task matched from its text is defined by that text.
        payload = [meta.text, payload]
    return Fingerprint(hint.mode, capability, hint.target, options, _digest(payload), meta.principal)


def stream_shape(meta: MetaInfo) -> tuple[object, bool]:
    """How a stream's chunks look (`Fingerprint.shape`): its ``stream_mode`` and ``subgraphs``.
    A list of modes is a set to LangGraph, so neither their order nor a repeated one changes it."""
    mode = meta.stream_mode
    return (tuple(sorted(set(mode))) if isinstance(mode, list) else mode, meta.subgraphs)


def _digest(value: object) -> bytes:
    try:
        text = orjson.dumps(value, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        # Integers past 64 bits, which orjson refuses and JSON allows.
        text = _CANONICAL.encode(value).encode()
    return hashlib.blake2b(text, digest_size=16).digest()


def result_size(result: ReachResult) -> int:
    """About how many bytes keeping `result` costs: its payload and texts as JSON, plus the rest."""
    size = _OVERHEAD + len(result.error or "") + len(result.error_type or "") + payload_size(result.payload)
    if result.results:
        size += sum(result_size(part) for part in result.results)
    return size


def payload_size(value: object) -> int:
    """The bytes of `value` as JSON."""
    return len(_encode(value))


def _encode(value: object) -> bytes:
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return _CANONICAL.encode(value).encode()


# Ids, timings, flags and the object around them, per kept result.
_OVERHEAD = 512


class _Entry(NamedTuple):
    expires: float
    # None once the result was too large to keep: only the fingerprint stays.
    future: asyncio.Future[ReachResult] | None
    fingerprint: Fingerprint
    size: int = 0


class IdempotencyStore:
    """Task id → the first delivery's result (or the future of one still in flight).

    Entries expire after `window_s`, and the oldest are dropped past `max_entries` or once the
    results kept pass `max_bytes` (see `result_size`), so memory stays bounded however many tasks
    pass through; an entry still in flight is never dropped. A result over `max_result_bytes` is
    kept as its fingerprint only. `settle` and `abandon` take the future `claim` handed out, so a
    late first caller can never touch an entry that a later delivery owns.
    """

    def __init__(self, window_s: float, max_entries: int, max_bytes: int, max_result_bytes: int) -> None:
        self._entries: OrderedDict[str, _Entry] = OrderedDict()
        self.bytes = 0
        self.reconfigure(window_s, max_entries, max_bytes, max_result_bytes)

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def max_result_bytes(self) -> int:
        """The largest result kept whole; a stream stops gathering its chunks past it."""
        return self._max_result_bytes

    def reconfigure(self, window_s: float, max_entries: int, max_bytes: int, max_result_bytes: int) -> None:
        """Applies to tasks claimed from now on; entries already held keep their expiry."""
        self._window_s = window_s
        self._max_entries = max_entries
        self._max_bytes = max_bytes
        self._max_result_bytes = min(max_result_bytes, max_bytes)

    def claim(self, task_id: str, request: Fingerprint) -> tuple[asyncio.Future[ReachResult], bool]:
        """The task's future, and True when the caller is the first and must deliver it.

        Raises `IdempotencyConflictError` naming what differs when the id is held for another
        request.
        """
        entries = self._entries
        now = time.monotonic()
        entry = entries.get(task_id)
        if entry is not None:
            if entry.expires > now or (entry.future is not None and not entry.future.done()):
                if entry.fingerprint != request:
                    differences = "; ".join(request.differences(entry.fingerprint))
                    msg = (
                        f"task_id {task_id!r} was already used for another request in the last "
                        f"{self._window_s:g} s: {differences}. A repeat must be the same request; "
                        "give a new request a new task_id"
                    )
                    raise IdempotencyConflictError(msg)
                if entry.future is None:
                    msg = (
                        f"task_id {task_id!r} was already delivered in the last {self._window_s:g} s, "
                        "and its result was not kept (larger than policy dedupe_max_result_bytes, "
                        f"{self._max_result_bytes} bytes, or given way to newer ones past "
                        f"dedupe_max_bytes, {self._max_bytes}), so it is not delivered again; the "
                        "first caller got the result. Give a new task_id to run the task again"
                    )
                    raise IdempotencyConflictError(msg)
                return entry.future, False
            self._drop(task_id)
        future = asyncio.get_running_loop().create_future()
        entries[task_id] = _Entry(now + self._window_s, future, request)
        self._evict(now)
        return future, True

    def settle(
        self, task_id: str, future: asyncio.Future[ReachResult], result: ReachResult, keep: bool = True
    ) -> None:
        """Record the first delivery's result; outcomes that reached no agent are forgotten, so a
        repeat may try again. With ``keep=False`` only its fingerprint stays, as for a result too
        large to keep: later repeats are refused."""
        entry = self._entries.get(task_id)
        if entry is not None and entry.future is future:
            if not result.delivered:
                self._drop(task_id)
            else:
                size = result_size(result)
                if keep and size <= self._max_result_bytes:
                    self._entries[task_id] = _Entry(entry.expires, future, entry.fingerprint, size)
                    self.bytes += size
                else:
                    self._entries[task_id] = _Entry(entry.expires, None, entry.fingerprint)
                self._evict_if_due(time.monotonic())
        if not future.done():
            # Callers already waiting get the result, whether or not it is kept.
            future.set_result(result)

    def abandon(self, task_id: str, future: asyncio.Future[ReachResult]) -> None:
        """The first caller was cancelled: forget the claim; waiters then deliver it themselves."""
        entry = self._entries.get(task_id)
        if entry is not None and entry.future is future:
            self._drop(task_id)
        if not future.done():
            future.cancel()

    def _drop(self, task_id: str) -> None:
        self.bytes -= self._entries.pop(task_id).size

    def _evict_if_due(self, now: float) -> None:
        """`_evict`, when it would do anything: past a bound, or the oldest entry expired."""
        entries = self._entries
        if (
            self.bytes > self._max_bytes
            or len(entries) > self._max_entries
            or (entries and next(iter(entries.values())).expires <= now)
        ):
            self._evict(now)

    def _evict(self, now: float) -> None:
        entries = self._entries
        while entries:
            task_id, entry = next(iter(entries.items()))
            if entry.expires > now and len(entries) <= self._max_entries:
                break
            if entry.future is not None and not entry.future.done():
                # Over the bound but still in flight: keep it, its waiters need it.
                entries.move_to_end(task_id)
                break
            self._drop(task_id)
        if self.bytes > self._max_bytes:
            self._shed()

    def _shed(self) -> None:
        """Past the byte bound, the oldest results kept give way to their fingerprints: their
        task ids stay held (a repeat is refused), as for a result too large to keep."""
        entries = self._entries
        shed: list[str] = []
        excess = self.bytes - self._max_bytes
        for task_id, entry in entries.items():
            if excess <= 0:
                break
            if entry.size and entry.future is not None and entry.future.done():
                shed.append(task_id)
                excess -= entry.size
        for task_id in shed:
            entry = entries[task_id]
            self.bytes -= entry.size
            entries[task_id] = entry._replace(future=None, size=0)
