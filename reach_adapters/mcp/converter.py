"""Moves MCP tool calls and `CallToolResult`s to and from the intermediate format."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from mcp.types import INVALID_PARAMS, CallToolResult, ContentBlock, TextContent
from pydantic import JsonValue, TypeAdapter

from middleware import (
    Fault,
    MetaInfo,
    NotJsonSafeError,
    ReachMessage,
    ReachResult,
    ResultStatus,
    RoutingHint,
    ensure_json,
)
from middleware.fast import amend, build_trusted
from reach_adapters.errors import InvalidMessageError
from reach_adapters.mcp.boxes import BOXED, RESULT
from reach_adapters.mcp.url_elicitation import url_error
from reach_adapters.router import (
    FIX_OPTIONS,
    META_PREFIX,
    error_result,
    input_required_result,
    meta_from_request,
    ok_result,
    request_meta,
)

__all__ = [
    "ASKED_META",
    "HOP_META",
    "INTERRUPTS_META",
    "META_PREFIX",
    "READS_TASK",
    "MCPConverter",
    "content_to_json",
    "meta_from_request",
    "request_meta",
]

# The experimental capability a reach router's MCP server declares: it reads the task carried in
# each request's `_meta` (`request_meta`'s keys), which other servers would only parse and drop.
READS_TASK = "agent-reach"
# Where a tool error's structured content is kept (an ok result's is its payload).
_ERROR_STRUCTURED = "structured_content"
# What an input-required answer asks, in its `_meta` when it goes without structured content.
ASKED_META = META_PREFIX + "asked"
# Each pending interrupt's id and value (a LangGraph graph's), so a client can resume by id.
INTERRUPTS_META = META_PREFIX + "interrupts"
_ASKING = "input required: "

_BLOCKS: TypeAdapter[list[ContentBlock]] = TypeAdapter(list[ContentBlock])


def content_to_json(blocks: Sequence[ContentBlock]) -> list[JsonValue]:
    """Content blocks (text, image, audio, resource) in their MCP wire form."""
    return [block.model_dump(mode="json", by_alias=True, exclude_none=True) for block in blocks]


class MCPConverter:
    """Tool arguments and `CallToolResult` on the MCP side; `ReachMessage`/`ReachResult` inside.

    A result keeps the server's content blocks in ``extra["content"]`` beside the payload, so
    serving it again over MCP (the gateway) hands clients the blocks they would have had directly.
    """

    def __init__(self, agent_id: str = "") -> None:
        # Stamped on results made from MCP replies; the gateway side never makes any.
        self.agent_id = agent_id

    def to_middleware(self, native: dict[str, Any] | None, meta: MetaInfo | None = None) -> ReachMessage:
        if native is not None and not isinstance(native, dict):
            msg = f"MCP tool arguments must be a JSON object, got {type(native).__name__}"
            raise InvalidMessageError(msg)
        try:
            payload = ensure_json(native or {}, where="arguments")
        except NotJsonSafeError as exc:
            msg = f"MCP tool arguments are not JSON data: {exc}"
            raise InvalidMessageError(msg) from None
        return build_trusted(
            ReachMessage,
            {"raw_payload": payload, "meta_info": meta or MetaInfo(), "routing_hint": RoutingHint()},
        )

    def from_middleware(self, message: ReachMessage) -> dict[str, Any]:
        payload = message.raw_payload
        if payload is None:
            return {}
        if not isinstance(payload, dict):
            msg = (
                f"MCP tools take a JSON object of arguments, got {type(payload).__name__}; "
                "send the tool's arguments as a dict"
            )
            raise InvalidMessageError(msg)
        return payload

    def result_to_middleware(
        self, native: CallToolResult, message: ReachMessage, *, unwrap: bool = False
    ) -> ReachResult:
        """`native` as a result; with `unwrap`, a successful one whose structured content is a box
        (``{"result": value}``, `boxes`) gives the value, as a local function returning it does."""
        content = content_to_json(native.content)
        structured = native.structured_content
        if native.meta and native.meta.get(META_PREFIX + "status") == ResultStatus.INPUT_REQUIRED:
            # Another reach router's agent asks for input (sent as an error when the tool has an
            # output schema the question does not fit): what it asks is the answer's payload.
            if isinstance(structured, dict):
                asked = structured.get("asked")
            else:
                asked = native.meta.get(ASKED_META, _text_of(content).removeprefix(_ASKING))
            extra: dict[str, JsonValue] = {"content": content}
            pending = native.meta.get(INTERRUPTS_META)
            if isinstance(pending, list):
                extra["interrupts"] = ensure_json(pending, where=INTERRUPTS_META)
            return input_required_result(message, self.agent_id, asked, extra=extra)
        if native.is_error:
            routed = _routed_outcome(native.meta)
            if routed is not None:
                # Another reach router answered: its status and whose fault it was carry over, so
                # a loop it refused stays the caller's and is not held against this agent.
                error = _text_of(content)
                kept = _kept(content, native.meta, structured)
                fix = native.meta.get(_FIX_META) if native.meta else None
                if isinstance(fix, dict):
                    # This router's callers are told in their own terms, by whatever serves them.
                    error = error.removesuffix(_fix_over_mcp(fix))
                    kept[FIX_OPTIONS] = ensure_json(fix, where=_FIX_META)
                failed = error_result(message, error=error, agent_id=self.agent_id or None, **routed)
                amend(failed, {"extra": kept})
                return failed
            if _refused_arguments(native.content):
                # The server's own check refused the arguments (an MCP SDK 1.x server says so in
                # a tool error): the caller's to fix, and any replica would refuse the same.
                status, kind, fault = ResultStatus.INVALID, "InvalidMessageError", Fault.CALLER
            else:
                # The tool ran and said no (the task's fault): another replica would say the same.
                status, kind, fault = ResultStatus.ERROR, "MCPToolError", Fault.TASK
            failed = error_result(
                message,
                status,
                kind,
                _text_of(content),
                fault=fault,
                agent_id=self.agent_id or None,
                delivered=True,
            )
            # Every block of the error, its structured content and `_meta`, for serving it again
            # unchanged.
            amend(failed, {"extra": _kept(content, native.meta, structured)})
            return failed
        payload = content if structured is None else structured
        if unwrap and structured is not None and RESULT in structured:
            payload = structured[RESULT]
        return ok_result(message, self.agent_id, payload, extra=_kept(content, native.meta))

    def refused(self, exc: InvalidMessageError) -> CallToolResult:
        """A request refused before any routing (a misspelt ``agent-reach/`` key, say): the
        caller's mistake, said in `_meta` as a failed result says it, so that a reach router
        calling this one blames its caller, not the tool."""
        kind = type(exc).__name__
        meta = _outcome_meta({"status": ResultStatus.INVALID, "error_type": kind, "fault": Fault.CALLER})
        text = f"{ResultStatus.INVALID}: {kind}: {exc}"
        return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True, _meta=meta)

    def result_from_middleware(self, result: ReachResult) -> CallToolResult:
        """`result` as an MCP tool result; one whose server needs its caller to open a URL first
        raises that server's `MCPError` (-32042, `url_elicitation`) instead."""
        # The ids let an MCP client ask the gateway why the call went where it went.
        ids: dict[str, Any] = {
            META_PREFIX + "task_id": result.task_id,
            META_PREFIX + "trace_id": result.trace_id,
        }
        if result.status is ResultStatus.INPUT_REQUIRED:
            # Not an error: the client (a person, a model) reads what the agent asks, and answers
            # on the same thread with `agent-reach/resume` in the request's `_meta`.
            ids[META_PREFIX + "status"] = result.status
            pending = result.extra.get("interrupts")
            if isinstance(pending, list):
                ids[INTERRUPTS_META] = pending
            asked = result.payload
            text = asked if isinstance(asked, str) else json.dumps(asked, ensure_ascii=False)
            asking = [TextContent(type="text", text=_ASKING + text)]
            return CallToolResult(content=asking, structured_content={"asked": asked}, _meta=ids)
        kept = result.extra.get("meta")
        if isinstance(kept, dict):
            # The upstream result's own `_meta`, under the ids.
            ids = {**kept, **ids}
        content = result.extra.get("content")
        if not result.ok:
            needs_url = url_error(result)
            if needs_url is not None:
                # Said only as a JSON-RPC error, which MCP clients know to act on (open the URL).
                raise needs_url
            # Whose fault and how it ended, for a reach router on the calling side (`_routed_outcome`).
            ids.update(_outcome_meta({key: getattr(result, key) for key in _OUTCOME}))
            details = result.extra.get(_ERROR_STRUCTURED)
            structured = details if isinstance(details, dict) else None
            fix = result.extra.get(FIX_OPTIONS)
            if isinstance(fix, dict):
                # Kept whole for a reach router calling this one (said for MCP clients below).
                ids[_FIX_META] = fix
            if isinstance(content, list) and (content or structured is not None):
                # An upstream tool's own error (or another router's, its hint in the text
                # already): its blocks and structured content as it sent them.
                blocks = _BLOCKS.validate_python(content)
                return CallToolResult(content=blocks, structured_content=structured, is_error=True, _meta=ids)
            text = f"{result.status}: {result.error_type}: {result.error}"
            if isinstance(fix, dict):
                text += _fix_over_mcp(fix)
            return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True, _meta=ids)
        payload = result.payload
        if isinstance(content, list):
            blocks = _BLOCKS.validate_python(content)
        else:
            text = payload if isinstance(payload, str) else json.dumps(payload, ensure_ascii=False)
            blocks = [TextContent(type="text", text=text)]
        if isinstance(payload, dict):
            structured = payload
        elif isinstance(content, list) and payload == content:
            # An upstream's blocks, passed on as the payload they were: the hop gives the same.
            structured = None
        else:
            # Structured content is a JSON object in every protocol version a client may speak:
            # a bare value goes boxed, as the SDK's servers box a function's, and the box is
            # marked for a reach router calling this one, which has no output schema to know it
            # by; the text stays for clients that read text.
            structured = {RESULT: payload}
            ids[BOXED] = True
        return CallToolResult(content=blocks, structured_content=structured, _meta=ids)


# The fields of a failed result that travel in `_meta`, beside the ids.
_OUTCOME = ("status", "error_type", "fault", "delivered", "retryable")


def _outcome_meta(outcome: Mapping[str, Any]) -> dict[str, Any]:
    """The `_meta` keys of a failed result's outcome fields (`_OUTCOME`) that have a value."""
    return {META_PREFIX + key: value for key, value in outcome.items() if value is not None}


def _routed_outcome(meta: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The outcome fields a reach router put in a failed result's `_meta`, or None if there are none."""
    if not meta or META_PREFIX + "status" not in meta:
        return None
    try:
        status = ResultStatus(meta[META_PREFIX + "status"])
        fault = None if meta.get(META_PREFIX + "fault") is None else Fault(meta[META_PREFIX + "fault"])
        if fault is Fault.AGENT:
            # An agent behind that router failed, and that router already judged it: the router
            # itself answered, so it is not held against it (the task may go elsewhere).
            fault = Fault.ROUTER
        return {
            "status": status,
            "error_type": str(meta.get(META_PREFIX + "error_type") or "MCPToolError"),
            "fault": fault,
            "delivered": meta.get(META_PREFIX + "delivered") is True,
            "retryable": meta.get(META_PREFIX + "retryable") is True,
        }
    except ValueError:
        return None


def _kept(
    content: list[JsonValue], meta: Mapping[str, Any] | None, structured: dict[str, Any] | None = None
) -> dict[str, JsonValue]:
    """What a result keeps of the MCP reply beside its payload: the content blocks and `_meta`,
    and an error's `structured` content (an ok result's is its payload)."""
    kept: dict[str, JsonValue] = {"content": content}
    if structured is not None:
        kept[_ERROR_STRUCTURED] = ensure_json(structured, where="structured_content")
    if meta:
        # The protocol's keys (the upstream's serverInfo stamp) and a reach router's ids and
        # outcome describe that hop, not this one.
        own = {key: value for key, value in meta.items() if not key.startswith(HOP_META)}
        if own:
            kept["meta"] = ensure_json(own, where="_meta")
    return kept


# The `_meta` keys of a request or result that belong to its hop: the protocol's own, and the
# task and outcome keys a reach router writes for the hop it makes.
HOP_META = ("io.modelcontextprotocol/", META_PREFIX)
_FIX_META = META_PREFIX + FIX_OPTIONS


def _fix_over_mcp(fix: Mapping[str, JsonValue]) -> str:
    """How an MCP client gives the call options `fix` names: the error's text says it as a Python
    caller writes it (``configurable={...}``), which no MCP client can send."""
    keys = {META_PREFIX + option: value for option, value in fix.items()}
    return f" (over MCP, in the request's _meta: {json.dumps(keys, ensure_ascii=False)})"


# How MCP SDK 1.x servers (Python, TypeScript) begin the tool error by which they refuse a call's
# arguments, the JSON-RPC "invalid params" error said as text.
_INVALID_PARAMS = f"MCP error {INVALID_PARAMS}:"


def _refused_arguments(blocks: Sequence[ContentBlock]) -> bool:
    """Whether a tool error is the server's refusal of the arguments: its first text block
    starts ``MCP error -32602:``."""
    text = next((block.text for block in blocks if isinstance(block, TextContent)), None)
    return text is not None and text.startswith(_INVALID_PARAMS)


def _text_of(content: list[JsonValue]) -> str:
    texts: list[str] = []
    for block in content:
        text = block.get("text") if isinstance(block, dict) else None
        if isinstance(text, str):
            texts.append(text)
    return "\n".join(texts) or "the tool reported an error without a message"
