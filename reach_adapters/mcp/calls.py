"""One tool call on a live session, with every way it can fail mapped to what the router expects."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any, cast

from mcp import Client
from mcp.shared.exceptions import MCPError
from mcp.types import (
    CONNECTION_CLOSED,
    INVALID_PARAMS,
    INVALID_REQUEST,
    LOG_LEVEL_META_KEY,
    MISSING_REQUIRED_CLIENT_CAPABILITY,
    URL_ELICITATION_REQUIRED,
    ContentBlock,
    RequestParamsMeta,
    TextContent,
)
from mcp.types.version import MODERN_PROTOCOL_VERSIONS
from pydantic import ValidationError

from middleware import Fault, ReachMessage, ReachResult, ResultStatus
from reach_adapters.mcp.boxes import BOXED, BOXED_INPUT, INPUT, marked
from reach_adapters.mcp.converter import READS_TASK, MCPConverter, request_meta
from reach_adapters.mcp.errors import (
    MCPConnectionError,
    MCPOfflineError,
    MCPProtocolError,
    MCPSessionExpiredError,
    MCPUnavailableError,
)
from reach_adapters.mcp.upstream import Call, Relays
from reach_adapters.mcp.url_elicitation import elicitation_ids, url_required
from reach_adapters.router import UNKNOWN_OUTCOME, CallerWait, ErrorKind, error_result, onward

__all__ = ["TOOL_GONE", "ToolRoute", "call_tool", "reads_task", "session_gone", "tool_gone"]

# The SDK server's words (`NoBackChannelError`) for a request a session cannot carry; the client
# side sees only the JSON-RPC error.
_NO_BACK_CHANNEL = "no back-channel for server-initiated requests"
# The SDK client's answers to such requests when it has no callback for them (relay_requests off).
_NOT_RELAYED = frozenset({"Elicitation not supported", "Sampling not supported"})
# What a streamable HTTP server answers (404) a request on a session it does not know: the MCP SDK
# servers' words (the TypeScript SDK's with its code -32001), and the Python SDK client's own when
# the 404 has no JSON-RPC body. Exact, so that a tool's own error that merely mentions a session
# is not taken for it.
_SESSION_GONE = frozenset({"session not found", "session terminated"})
_SESSION_GONE_CODES = frozenset({INVALID_REQUEST, -32001})
# The `error_type` of a call to a tool the server no longer has (`_gone`).
TOOL_GONE = "MCPToolGoneError"


@dataclass(frozen=True, slots=True)
class ToolRoute:
    """The server's name for a capability's tool, whether the tool is safe to run twice,
    whether its structured result wraps a non-object value as ``{"result": value}``, whether
    it declares an output schema (so its results must carry structured content), whether it
    takes the capability's (non-object) input as its one argument ``input``, and whether it is
    another reach router's tool for a capability that takes any payload (`box_any`: a
    non-object one goes as ``input``, the request's `_meta` saying so)."""

    tool: str
    safe: bool
    unwrap: bool = False
    structured: bool = False
    box_input: bool = False
    box_any: bool = False


def reads_task(client: Client) -> bool:
    """Whether the server declares it reads the task carried in `_meta` (`READS_TASK`)."""
    experimental = client.server_capabilities.experimental
    return experimental is not None and READS_TASK in experimental


async def call_tool(
    client: Client,
    route: ToolRoute,
    message: ReachMessage,
    converter: MCPConverter,
    relays: Relays,
    *,
    carry_task: bool = True,
    signed: bool = False,
    relaying: bool = True,
) -> ReachResult:
    """Call `route.tool` with the message's arguments; `carry_task`: with the task in the
    request's `_meta` (for another reach router; any other server would parse it for nothing,
    about 30 µs of an SDK server's time a call); `signed`: with a hop token for the server
    (another reach serve); `relaying`: the agent relays the server's requests to callers
    (`MCPOptions.relay_requests`).

    A tool error is an error result nobody should retry; a server that misbehaves gives a
    retryable one; a tool the server no longer has gives one another replica may take
    (`tool_gone`); a connection that is gone raises `MCPConnectionError`, which the router's
    delivery classes as transient; an HTTP connection that could not be opened raises
    `MCPOfflineError`, one the server answered with HTTP 429 or 503 `MCPUnavailableError`, and a
    session the server forgot `MCPSessionExpiredError` (for the agent to open a new one): none of
    these calls ran, so a replica may take it.

    No timeout of its own: the router's watchdog cancels the call at its deadline (one timer per
    event loop), and the SDK then tells the server. The SDK's read timeout would arm and cancel a
    loop timer on every call (about 30,000 instructions of a ~1.1 million-instruction call) for a
    deadline that never comes first.
    """
    agent_id = converter.agent_id
    # The router checked the bare input against the capability's schema, the box's value.
    payload = message.raw_payload
    boxed = route.box_any and payload is not None and not isinstance(payload, dict)
    arguments = {INPUT: payload} if route.box_input or boxed else converter.from_middleware(message)
    meta: dict[str, Any] = {}
    if carry_task:
        meta = request_meta(onward(message.meta_info, agent_id, route.tool if signed else None))
    if boxed:
        meta[BOXED_INPUT] = True
    try:
        with relays.calling() as call:
            relay = call.relay
            if relay is not None:
                # While the server's questions wait on the caller, the time is the caller's.
                call.waiting = CallerWait()
                # What the calling client put in its request's `_meta` (for the call it made, not
                # calls made for it), and its opt-in to log messages, passed on to the server as
                # the client would have sent them.
                if relay.task_id == message.meta_info.task_id:
                    meta.update(relay.own_meta())
                if relay.log_level is not None:
                    meta[LOG_LEVEL_META_KEY] = relay.log_level
            native = await client.call_tool(
                route.tool,
                arguments,
                progress_callback=None if relay is None else relay.progress,
                meta=cast(RequestParamsMeta, meta) if meta else None,
            )
    except MCPError as exc:
        turned_away = getattr(call, "turned_away", None)
        if turned_away is not None:
            raise _unavailable(agent_id, route.tool, *turned_away) from None
        relayed = _relay_failure(message, agent_id, route.tool, call, exc.message)
        if relayed is not None:
            return relayed
        if _not_carried_here(exc):
            # The tool asked its client something this session or agent cannot pass on: any
            # replica would ask the same, and the server is not failing.
            error = _not_carried(agent_id, route.tool, exc, relaying)
            return error_result(
                message,
                ResultStatus.ERROR,
                MCPProtocolError.__name__,
                error,
                fault=Fault.TASK,
                agent_id=agent_id,
                delivered=True,
            )
        if exc.code == URL_ELICITATION_REQUIRED:
            # The caller's user must open a URL before the server runs it (`url_required`).
            relays.completions.expect(elicitation_ids(exc.error.data), call)
            return url_required(message, agent_id, route.tool, exc)
        if exc.code == INVALID_PARAMS and _unknown_tool(route.tool, exc.message):
            return _gone(message, agent_id, route.tool, exc.message)
        if exc.code == INVALID_PARAMS:
            # The server refused the arguments before running anything: the caller's to fix.
            error = f"MCP server {agent_id} refused the arguments for {route.tool!r}: {exc.message}"
            return error_result(
                message,
                ResultStatus.INVALID,
                "InvalidMessageError",
                error,
                fault=Fault.CALLER,
                agent_id=agent_id,
            )
        if session_gone(client, exc):
            # Refused before anything ran: the server restarted and forgot the session, which only
            # a new initialize replaces (the agent opens one); a replica may take the call now.
            msg = (
                f"MCP server {agent_id} no longer knows this session ({exc.message}: did it restart?) "
                f"and did not run {route.tool!r}; a new session is being opened"
            )
            raise MCPSessionExpiredError(msg) from None
        if exc.code != CONNECTION_CLOSED:
            error = (
                f"MCP server {agent_id} rejected the call to {route.tool!r}: error {exc.code}: {exc.message}"
            )
            return _failed(message, agent_id, MCPProtocolError.__name__, error, retryable=True)
        if getattr(call, "unsent", False):
            # The connection for it could not be opened: nothing ran, and a replica may take it.
            msg = f"MCP server {agent_id} could not be reached: {route.tool!r} was never sent"
            raise MCPOfflineError(msg) from None
        error = (
            f"MCP server {agent_id} lost the connection during a call to {route.tool!r}; {UNKNOWN_OUTCOME}"
        )
        # The request may have run before the connection went: only a safe tool may run again.
        return _failed(message, agent_id, MCPConnectionError.__name__, error, retryable=route.safe)
    except ValidationError as exc:
        error = f"MCP server {agent_id} sent a malformed result for {route.tool!r}: {exc}"
        return _failed(message, agent_id, MCPProtocolError.__name__, error, retryable=True)
    except RuntimeError as exc:
        # The SDK checks structured content against the tool's output schema and raises this
        # after a listing of its own (`checked_by_router`); the core does not re-send
        # "OutputValidationError" for tools that are not safe to repeat.
        return _failed(message, agent_id, ErrorKind.OUTPUT_VALIDATION, str(exc), retryable=True)
    if route.structured and native.structured_content is None and not native.is_error:
        # The one check of the SDK's the router's own (of the payload) cannot make: content
        # blocks alone may well fit the schema of the value the SDK wraps.
        error = (
            f"MCP server {agent_id}: tool {route.tool!r} has an output schema but returned "
            "no structured content"
        )
        return _failed(message, agent_id, ErrorKind.OUTPUT_VALIDATION, error, retryable=True)
    if native.is_error:
        said = _only_text(native.content)
        if said is not None and _unknown_tool(route.tool, said):
            return _gone(message, agent_id, route.tool, said)
    unwrap = route.unwrap or marked(native.meta, BOXED)
    result = converter.result_to_middleware(native, message, unwrap=unwrap)
    if (call.refusal is not None or call.unguessed is not None) and not result.ok:
        # A server that turns a failed request into a tool error (MCP SDK 1.x tools do) still
        # failed on the router's refusal: judged as that refusal, not as the task's failure.
        return _relay_failure(message, agent_id, route.tool, call, result.error or "") or result
    return result


def _relay_failure(
    message: ReachMessage, agent_id: str, tool: str, call: Call, said: str
) -> ReachResult | None:
    """The outcome of a call that failed on a request of the server's the router refused, when
    what the server `said` carries that refusal: None when it was something else."""
    if call.refusal is not None and call.refusal in said:
        # The server asked the caller for something the caller cannot give: the caller's to
        # change, and any replica would ask the same.
        error = f"MCP server {agent_id} needs {tool!r}'s caller to answer: {call.refusal}"
        return error_result(
            message, ResultStatus.REJECTED, "MCPRelayError", error, fault=Fault.CALLER, agent_id=agent_id
        )
    if call.unguessed is not None and call.unguessed in said:
        # The router would not guess whose call the server's request was: its own limit, so the
        # server is not to blame, and a replica with that call alone could serve it.
        error = f"MCP server {agent_id} asked the caller of {tool!r} for input: {call.unguessed}"
        return error_result(
            message,
            ResultStatus.ERROR,
            "MCPRelayError",
            error,
            fault=Fault.ROUTER,
            agent_id=agent_id,
            retryable=True,
            delivered=True,
        )
    return None


def _unavailable(agent_id: str, tool: str, status: int, retry_after: str | None) -> MCPUnavailableError:
    """The server's HTTP refusal of the call, said as the status it answered (the SDK says only
    "Server returned an error response")."""
    wait = "" if retry_after is None else f", Retry-After: {retry_after}"
    msg = (
        f"MCP server {agent_id} turned the call to {tool!r} away with HTTP {status} "
        f"({HTTPStatus(status).phrase}{wait}) and did not run it; another replica may take it"
    )
    return MCPUnavailableError(msg, status)


def _unknown_tool(tool: str, said: str) -> bool:
    """Whether the server said it has no tool `tool`, in the words MCP servers use for it: the
    spec's "Unknown tool: x" (a JSON-RPC -32602; the Python SDK's `MCPServer` and FastMCP answer
    it as an `isError` result), the TypeScript SDK's -32602 "Tool x not found" (its 1.x
    `McpServer` answers it as an `isError` "MCP error -32602: Tool x not found"). Exact, and for
    the tool called: an argument refusal, or a tool's error naming another tool, stays what it
    was."""
    return said in (
        f"Unknown tool: {tool}",
        f"Tool {tool} not found",
        f"MCP error -32602: Tool {tool} not found",
    )


def _only_text(blocks: Sequence[ContentBlock]) -> str | None:
    """The text of a result that is one text block, as servers answer for an unknown tool."""
    if len(blocks) == 1 and isinstance(blocks[0], TextContent):
        return blocks[0].text
    return None


def _gone(message: ReachMessage, agent_id: str, tool: str, said: str) -> ReachResult:
    """A call to a tool the server listed and no longer has (dropped without a
    ``tools/list_changed``); the agent lists its tools again on seeing `TOOL_GONE`."""
    error = (
        f"MCP server {agent_id} no longer has tool {tool!r} ({said}) and did not run it; another "
        "replica may take the call, and the agent lists the server's tools again"
    )
    return tool_gone(message, agent_id, error)


def tool_gone(message: ReachMessage, agent_id: str, error: str) -> ReachResult:
    """A call routed on a tool list that is out of date: nothing ran, so another replica may take
    it, even work not safe to repeat. The request was fine and the server answers as it should:
    the router's fault (DESIGN §6), so the server's breaker and health are untouched."""
    return error_result(
        message,
        ResultStatus.ERROR,
        TOOL_GONE,
        error,
        fault=Fault.ROUTER,
        agent_id=agent_id,
        retryable=True,
        delivered=False,
    )


def session_gone(client: Client, exc: MCPError) -> bool:
    """Whether the server refused a request because it does not know the session it came on:
    only handshake-era sessions are kept by the server (2026-07-28 has none)."""
    return (
        exc.code in _SESSION_GONE_CODES
        and exc.message.lower() in _SESSION_GONE
        and client.protocol_version not in MODERN_PROTOCOL_VERSIONS
    )


def _not_carried_here(exc: MCPError) -> bool:
    """Whether the server refused because this session does not carry what the tool asks its
    client: a request it cannot send, or a client capability the agent does not declare."""
    if exc.code == MISSING_REQUIRED_CLIENT_CAPABILITY:
        return True
    return exc.code == INVALID_REQUEST and (_NO_BACK_CHANNEL in exc.message or exc.message in _NOT_RELAYED)


def _not_carried(agent_id: str, tool: str, exc: MCPError, relaying: bool) -> str:
    """Why the tool's question to its client went unanswered, and what would carry it."""
    said = exc.message
    if not relaying:
        fix = "connect the server with relay_requests on"
        if _NO_BACK_CHANNEL in said:
            fix += " and protocol 2025-11-25 (MCPOptions(protocol='2025-11-25'))"
    elif exc.code == MISSING_REQUIRED_CLIENT_CAPABILITY:
        # Sampling and elicitation are declared and relayed; roots and sampling with tools, which
        # would hold for every caller of the one session, are not (docs/mcp.md).
        fix = (
            "agent-reach relays sampling (without tools) and elicitation only, not roots; "
            "call the server directly"
        )
    else:
        fix = "connect the server with MCPOptions(protocol='2025-11-25')"
    return (
        f"MCP server {agent_id}: tool {tool!r} asked its client for input mid-call, which this "
        f"session cannot pass on ({said}); {fix}"
    )


def _failed(
    message: ReachMessage, agent_id: str, error_type: str, error: str, *, retryable: bool
) -> ReachResult:
    """The server or its connection failed the call: the agent's fault, whatever the tool does."""
    return error_result(
        message,
        ResultStatus.ERROR,
        error_type,
        error,
        fault=Fault.AGENT,
        agent_id=agent_id,
        retryable=retryable,
        delivered=True,
    )
