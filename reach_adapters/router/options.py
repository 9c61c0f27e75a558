"""The keyword options of `Router.route`, `send`, `broadcast`, `stream` and their sync twins.

A TypedDict, so editors complete them and mypy rejects a misspelt one; `build_message` checks them
again at run time, since options also come from JSON (the gateway's ``options``, ``reach query``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypedDict

from pydantic import JsonValue

__all__ = ["CALL_OPTIONS", "CallOptions"]


class CallOptions(TypedDict, total=False):
    """Every option is a `MetaInfo` field, except ``fallback``, ``strategy`` and ``defer``
    (`RoutingHint`)."""

    task_id: str
    """Your id for the task; a repeat within the idempotency window gets the first result."""
    trace_id: str
    version: str | None
    """Only agents declaring exactly this capability version serve."""
    namespace: str | None
    """Only agents in this namespace serve."""
    source: str | None
    """Agent id of the caller, when an agent calls."""
    principal: str | None
    """Who the call is made for, under the router's guard (security.yaml): its permissions, quota
    and visibility apply. None: the program itself."""
    caller_token: str | None
    """A hop token another gateway signed for its calling agent (see docs/security.md)."""
    text: str | None
    """The task in words, matched against capabilities when none is named."""
    tags: list[str]
    attributes: Mapping[str, JsonValue]
    """Free fields that capability triggers test."""
    priority: int
    """0 lowest .. 9 highest; BUSY agents serve only high priorities."""
    timeout_ms: int | None
    """Budget for the whole call, retries and fallbacks included."""
    deadline: float | None
    """Absolute Unix time the task must end by; the earlier of it and ``timeout_ms`` holds."""
    depth: int
    """Routed calls enclosing this one, for a task passed on from elsewhere."""
    lineage: list[str]
    """Agent ids of the enclosing routed calls, outermost first, for a task passed on."""
    configurable: Mapping[str, JsonValue] | None
    """Settings of the agent's run, e.g. ``{"thread_id": "alice"}``."""
    context: Mapping[str, JsonValue] | None
    """The run's context of a LangGraph graph or ``create_agent`` agent (its ``runtime.context``),
    e.g. ``{"user_id": "u-1"}``."""
    resume: JsonValue
    """The answer to an agent that stopped for input (status ``input_required``)."""
    stream_mode: str | list[str] | None
    """For `Router.stream`: what to stream, e.g. LangGraph's ``"messages"``."""
    subgraphs: bool
    """For `Router.stream` of a LangGraph graph: its subgraphs' chunks too, each with its namespace."""
    fallback: list[str]
    """Agent ids to try when no candidate can serve."""
    strategy: str | None
    """Override the policy's selection strategy for this call."""
    defer: bool
    """When nothing can serve now, wait in the deferred queue until a capable agent registers or
    becomes usable, within the deadline (else ``policy.defer_timeout_s``); see docs/reliability.md."""


CALL_OPTIONS = CallOptions.__optional_keys__
