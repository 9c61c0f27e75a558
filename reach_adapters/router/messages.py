"""Build and check the messages that `route`, `broadcast`, `send` and `dispatch` deliver."""

from __future__ import annotations

import hashlib
import time
from collections.abc import Mapping
from functools import lru_cache
from typing import Any, cast

from pydantic import ValidationError

from middleware import MetaInfo, NotJsonSafeError, ReachMessage, RoutingHint, ensure_json
from middleware.fast import build_trusted
from middleware.ids import MAX_ID_LENGTH
from reach_adapters.errors import InvalidMessageError, describe_validation_error
from reach_adapters.router.hops import current_guard, current_hop
from reach_adapters.router.options import CALL_OPTIONS, CallOptions

__all__ = [
    "MAX_NAME_LENGTH",
    "MAX_OPTION_ITEMS",
    "MAX_TASK_ID_LENGTH",
    "build_message",
    "check_sizes",
    "derived_task_id",
    "inherit_hop",
    "onward",
    "parse_message",
    "refused_call",
    "require_name",
    "time_left",
]

# Names and lists a caller sends become keys, labels and log fields: bounded, so one call cannot
# cost more than a call should. Task and trace ids are bounded by `MetaInfo` itself.
MAX_NAME_LENGTH = 256
MAX_OPTION_ITEMS = 256
# `MetaInfo.task_id`'s own bound.
MAX_TASK_ID_LENGTH = MAX_ID_LENGTH
_NAMED_OPTIONS = ("capability", "version", "namespace", "source")
_COUNTED_META = ("tags", "attributes", "lineage")

_HINT_OPTIONS = ("fallback", "strategy", "defer")
_CAPABILITY_ONLY = frozenset({"capability"})
# The options whose size `check_sizes` bounds (the capability's own is checked by `require_name`):
# most calls give none of them and skip it.
_SIZED = frozenset({*_NAMED_OPTIONS, *_COUNTED_META}) - _CAPABILITY_ONLY


def refused_call(msg: str) -> InvalidMessageError:
    """The refusal of a call's own arguments, marked so: raised inside an agent serving a task,
    the mistake is that agent's, not its caller's (`from_exception`)."""
    exc = InvalidMessageError(msg)
    exc.call_arguments = True
    return exc


def require_name(value: object, what: str) -> str:
    if not isinstance(value, str) or not value:
        msg = f"{what} must be a non-empty string, got {value!r}; see router.catalog()"
        raise refused_call(msg)
    if len(value) > MAX_NAME_LENGTH:
        raise _too_long(what, value)
    return value


def _too_long(what: str, value: str) -> InvalidMessageError:
    msg = (
        f"{what} is {len(value)} characters long, over the limit of {MAX_NAME_LENGTH} "
        f"(starts {value[:40]!r}); names in the catalog are shorter, see router.catalog()"
    )
    return refused_call(msg)


def check_sizes(meta: MetaInfo, hint: RoutingHint) -> None:
    """Refuse names over `MAX_NAME_LENGTH` and lists or maps over `MAX_OPTION_ITEMS` entries."""
    for name in _NAMED_OPTIONS:
        value = getattr(meta, name)
        if value is not None and len(value) > MAX_NAME_LENGTH:
            raise _too_long(name, value)
    for name, value in (("target", hint.target), ("strategy", hint.strategy)):
        if value is not None and len(value) > MAX_NAME_LENGTH:
            raise _too_long(name, value)
    counted = [(name, len(getattr(meta, name))) for name in _COUNTED_META]
    for name, count in [*counted, ("fallback", len(hint.fallback))]:
        if count > MAX_OPTION_ITEMS:
            msg = f"{name} has {count} entries, over the limit of {MAX_OPTION_ITEMS}; send fewer"
            raise refused_call(msg)


def derived_task_id(parent: str, suffix: str) -> str:
    """The task id of work done for task `parent` (a chain's step, an undo, a consensus's judge):
    ``<parent>/<suffix>``, so a reader sees the link. When that would pass `MAX_TASK_ID_LENGTH`,
    a digest of `parent` stands in for it: the id stays within the limit, and the same for the
    same parent, which the idempotency window relies on."""
    derived = f"{parent}/{suffix}"
    if len(derived) <= MAX_TASK_ID_LENGTH:
        return derived
    room = MAX_TASK_ID_LENGTH - len(suffix) - 1
    if room < 16:
        # A suffix too long to keep beside a digest worth the name: a digest of the whole.
        return hashlib.sha256(derived.encode()).hexdigest()
    return f"{hashlib.sha256(parent.encode()).hexdigest()[:room]}/{suffix}"


def build_message(
    payload: Any,
    call_options: CallOptions,
    *,
    mode: str,
    capability: str | None = None,
    target: str | None = None,
    merge: str = "all",
) -> ReachMessage:
    """A message from call arguments: the options are `CallOptions`, checked here as well because
    they also come from JSON."""
    try:
        raw = ensure_json(payload)
    except NotJsonSafeError as exc:
        msg = f"payload is not JSON data: {exc}"
        raise refused_call(msg) from None
    # The caller's ``**options``: a dict of this call's own, so it is filled in rather than copied.
    options = cast("dict[str, Any]", call_options)
    if options and not options.keys() <= CALL_OPTIONS:
        unknown = ", ".join(map(repr, sorted(options.keys() - CALL_OPTIONS)))
        msg = f"unknown call option(s) {unknown}; the options are {', '.join(sorted(CALL_OPTIONS))}"
        raise refused_call(msg)
    hint_fields = {key: options.pop(key) for key in _HINT_OPTIONS if key in options} if options else {}
    try:
        if capability is not None:
            options["capability"] = capability
        # The common call names only a capability, already checked: nothing left to validate.
        meta = build_trusted(MetaInfo, options) if options.keys() <= _CAPABILITY_ONLY else MetaInfo(**options)
        if hint_fields:
            hint = RoutingHint.model_validate({"mode": mode, "target": target, "merge": merge, **hint_fields})
        else:
            hint = _plain_hint(mode, merge, target)
    except ValidationError as exc:
        msg = f"invalid call options: {describe_validation_error(exc)}"
        raise refused_call(msg) from None
    except TypeError as exc:
        msg = f"invalid call options: {exc}"
        raise refused_call(msg) from None
    if hint_fields or not _SIZED.isdisjoint(options.keys()):
        check_sizes(meta, hint)
    message = build_trusted(ReachMessage, {"raw_payload": raw, "meta_info": meta, "routing_hint": hint})
    if current_hop() is not None:
        inherit_hop(message)
    return message


@lru_cache(maxsize=1024)
def _plain_hint(mode: str, merge: str, target: str | None) -> RoutingHint:
    """Hints are frozen, so calls without fallbacks or overrides share one per (mode, merge,
    target): a directed call to an agent called often builds its hint once."""
    return RoutingHint.model_validate({"mode": mode, "merge": merge, "target": target})


def parse_message(message: ReachMessage | Mapping[str, Any], method: str = "dispatch") -> ReachMessage:
    """A `ReachMessage` of the router's own, from a message (copied: the router writes into it,
    and the caller's must stay as it was) or a dict given to `method`."""
    if isinstance(message, ReachMessage):
        parsed = message.model_copy(update={"meta_info": message.meta_info.model_copy()})
    elif not isinstance(message, Mapping):
        msg = f"{method}() takes a ReachMessage or a dict, got {type(message).__name__}"
        raise refused_call(msg)
    else:
        try:
            parsed = ReachMessage.model_validate(message)
        except ValidationError as exc:
            msg = f"invalid message: {describe_validation_error(exc)}"
            raise refused_call(msg) from None
    check_sizes(parsed.meta_info, parsed.routing_hint)
    return parsed


def inherit_hop(message: ReachMessage) -> None:
    """Continue the enclosing routed call, if the code runs inside one.

    Same trace, one level deeper, the enclosing agent appended to the lineage and its deadline as
    an upper bound. Fields the caller set explicitly (trace_id, source) are kept; a message that
    already carries a lineage came from elsewhere and is left alone.
    """
    hop = current_hop()
    meta = message.meta_info
    if hop is None or meta.lineage:
        return
    parent = hop.meta
    explicit = meta.model_fields_set
    if "trace_id" not in explicit:
        meta.trace_id = parent.trace_id
    if meta.source is None:
        meta.source = hop.agent_id
    meta.depth = parent.depth + 1
    meta.lineage = [*parent.lineage, hop.agent_id]
    if parent.deadline is not None:
        meta.deadline = parent.deadline if meta.deadline is None else min(meta.deadline, parent.deadline)


def onward(meta: MetaInfo, agent_id: str, target: str | None = None) -> MetaInfo:
    """The task as the next router sees it when agent `agent_id` passes it on over the network
    (an MCP or A2A hop) to `target` (the tool or skill it calls there): same ids and deadline, one
    level deeper, `agent_id` in the lineage, and a hop token signed for that hop when the router
    has a guard with hop tokens. The caller's own principal stays behind: the far side
    authenticates this hop itself.

    `inherit_hop` is the same step for calls inside this process; carrying it across hops is
    what lets the far side refuse a task that loops back instead of serving it again.
    """
    guard = current_guard()
    token = None if guard is None or target is None else guard.hop_token(meta, agent_id, target)
    update = {"depth": meta.depth + 1, "lineage": [*meta.lineage, agent_id], "caller_token": token}
    return meta.model_copy(update={**update, "principal": None})


def time_left(message: ReachMessage, cap_s: float) -> float:
    """Seconds the agent may still spend on `message`: what is left of its deadline, at most
    `cap_s` (the agent's own timeout), never below a millisecond.

    For adapters that hand the task on with a timeout of their own (a remote call, a subprocess),
    so the far side gives up when the caller does. The router cancels the call at the deadline
    anyway; this only lets the other end know.
    """
    deadline = message.meta_info.deadline
    if deadline is None:
        return cap_s
    return max(min(cap_s, deadline - time.time()), 0.001)
