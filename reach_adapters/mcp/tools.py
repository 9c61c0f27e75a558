"""An MCP server's tool list, and the capabilities the router sees for it."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from mcp import Client
from mcp.types import Tool

from reach_adapters.errors import InvalidDeclarationError
from reach_adapters.mcp.boxes import ANY_INPUT, BOXED_INPUT, BOXED_OUTPUT, INPUT, RESULT, TOOL_MARKS, marked
from reach_adapters.mcp.calls import ToolRoute
from reach_adapters.mcp.errors import MCPProtocolError
from reach_adapters.mcp.options import MCPOptions
from reach_adapters.mcp.spec import ServerSpec
from reach_adapters.router import META_PREFIX, Capability, unwrap_field

__all__ = ["ANNOTATION_TITLE", "OWN_META", "Declared", "checked_by_router", "declare", "list_all_tools"]

logger = logging.getLogger(__name__)

# Where a capability keeps its MCP tool's `annotations.title` (in `Capability.meta`, the
# adapter's own place); the served tool has it in its annotations, not its `_meta`.
ANNOTATION_TITLE = META_PREFIX + "annotation_title"
# The keys of a tool's `_meta` that describe it as served on that hop, not the capability.
OWN_META = frozenset({ANNOTATION_TITLE, *TOOL_MARKS})
# A listing longer than this is a server that never stops paginating, not a big catalog.
_MAX_PAGES = 1000


async def list_all_tools(client: Client, server: str) -> list[Tool]:
    """Every tool the server offers, following ``next_cursor`` to the last page; none for a server
    that declares no tools capability, which would answer ``tools/list`` with "method not found"."""
    tools: list[Tool] = []
    if client.server_capabilities.tools is None:
        return tools
    cursor: str | None = None
    seen: set[str] = set()
    for _ in range(_MAX_PAGES):
        page = await client.list_tools(cursor=cursor)
        tools.extend(page.tools)
        cursor = page.next_cursor
        if cursor is None:
            checked_by_router(client, tools)
            return tools
        if cursor in seen:
            msg = f"MCP server {server!r} repeated tools/list cursor {cursor!r}; its pagination never ends"
            raise MCPProtocolError(msg)
        seen.add(cursor)
    msg = f"MCP server {server!r} returned more than {_MAX_PAGES} pages of tools; its pagination never ends"
    raise MCPProtocolError(msg)


def checked_by_router(client: Client, tools: Sequence[Tool]) -> None:
    """Have the SDK leave the listed tools' results unchecked against their output schemas: the
    router checks every result against its capability's schema (the tool's, or the value inside
    the SDK's wrapping) with a compiled validator, where the SDK's jsonschema pass costs ~10x
    more (about 20 µs a call) and would only check the same thing again.

    The SDK has no switch for it; it skips tools whose cached output schema is None, its cache
    being refilled by each listing it absorbs. A listing taken without this call (the SDK's own
    re-list before resending a call) only means both check again, as before.
    """
    schemas: dict[str, dict[str, Any] | None] | None = getattr(client.session, "_tool_output_schemas", None)
    if schemas is not None:
        for tool in tools:
            schemas[tool.name] = None


@dataclass(slots=True)
class Declared:
    """The capabilities made from a tool list, and which tool serves each capability."""

    capabilities: list[Capability] = field(default_factory=list)
    routes: dict[str, ToolRoute] = field(default_factory=dict)
    skipped: list[str] = field(default_factory=list)


def declare(tools: Sequence[Tool], spec: ServerSpec) -> Declared:
    """One capability per tool; a tool the router cannot accept is skipped with a warning."""
    out = Declared()
    for tool in tools:
        name = spec.options.prefix + tool.name
        if name in out.routes:
            logger.warning("MCP server %r: skipped tool %r: its name is listed twice", spec.name, tool.name)
            out.skipped.append(tool.name)
            continue
        if tool.execution is not None and tool.execution.task_support == "required":
            # The MCP SDK this project builds on has no client side of task-augmented calls, so
            # such a tool would be offered and fail on every call.
            logger.warning(
                "MCP server %r: skipped tool %r: it runs only as an MCP task (taskSupport: required), "
                "which the MCP SDK in use cannot call",
                spec.name,
                tool.name,
            )
            out.skipped.append(tool.name)
            continue
        boxed = result_box(tool)
        # Another reach router's tool for a capability whose input is not an object: the
        # capability takes the bare input, as it does there, and the call boxes it.
        taken = unwrap_field(INPUT, tool.input_schema) if marked(tool.meta, BOXED_INPUT) else None
        # Another reach router's capability that takes any payload takes it here too.
        any_input = taken is None and marked(tool.meta, ANY_INPUT)
        declared = None if any_input else tool.input_schema if taken is None else taken
        try:
            capability = _capability(name, tool, spec.options, boxed, declared)
        except InvalidDeclarationError as exc:
            logger.warning("MCP server %r: skipped tool %r: %s", spec.name, tool.name, exc)
            out.skipped.append(tool.name)
            continue
        out.capabilities.append(capability)
        out.routes[name] = ToolRoute(
            tool.name,
            safe=capability.safe_to_repeat,
            unwrap=boxed is not None,
            box_input=taken is not None,
            structured=tool.output_schema is not None,
            box_any=any_input,
        )
    return out


def _capability(
    name: str, tool: Tool, options: MCPOptions, boxed: dict[str, Any] | None, taken: dict[str, Any] | None
) -> Capability:
    """`boxed`: the schema of the value in the tool's result box, if boxed; `taken`: the input
    schema the capability declares (the value's in an input box), None for any payload."""
    hints = tool.annotations
    read_only = bool(hints and hints.read_only_hint)
    # A read-only tool is safe to repeat; otherwise only an explicit idempotent hint allows retries.
    # destructiveHint does not forbid retries (delete by id is idempotent); it is kept as a flag.
    idempotent = read_only or bool(hints and hints.idempotent_hint)
    # The MCP default for a tool that is not read-only is destructive.
    destructive = not read_only and (hints is None or hints.destructive_hint is not False)
    hinted = hints.title if hints else None
    title = tool.title or hinted
    # Left out, the input schema is the default one, which takes any payload.
    declared = {} if taken is None else {"input_schema": taken}
    return Capability(
        name=name,
        description=tool.description or title or "",
        **declared,
        output_schema=tool.output_schema if boxed is None else boxed,
        timeout_ms=options.timeout_ms,
        max_concurrency=options.max_concurrency,
        weight=options.weight,
        read_only=read_only,
        idempotent=idempotent,
        destructive=destructive,
        # The MCP default is open world: only an explicit false says otherwise.
        open_world=not (hints is not None and hints.open_world_hint is False),
        title=title,
        icons=[icon.model_dump(mode="json", by_alias=True, exclude_none=True) for icon in tool.icons or ()],
        meta=_meta(tool, hinted),
    )


def _meta(tool: Tool, hinted: str | None) -> dict[str, Any]:
    """The tool's `_meta`, with its ``annotations.title`` under `ANNOTATION_TITLE`: the capability
    has one title, and the tool may show another in its annotations, to be served again as such."""
    meta = {key: value for key, value in (tool.meta or {}).items() if key not in OWN_META}
    if hinted is not None:
        meta[ANNOTATION_TITLE] = hinted
    return meta


def result_box(tool: Tool) -> dict[str, Any] | None:
    """The schema of the value a tool's structured results box as ``{"result": value}``, with the
    definitions its references point to; None for a tool whose results are not boxed.

    A reach router's box is marked in the tool's `_meta` (its value may be any schema, a model
    or ``Model | None`` among them); the SDK's own is recognised by its shape (`wraps_result`).
    """
    output = tool.output_schema
    if output is None or not (marked(tool.meta, BOXED_OUTPUT) or wraps_result(tool)):
        return None
    return unwrap_field(RESULT, output)


def wraps_result(tool: Tool) -> bool:
    """Whether the tool's output schema is the SDK's wrapping of a non-object result: one
    required ``result`` field, titled after the function (``addOutput`` for ``def add``). A model
    of the user's own (``SearchOutput``, or one whose ``result`` is an object or a model) is not:
    the SDK never wraps those."""
    output = tool.output_schema
    if (
        output is None
        or list(output.get("properties", {})) != ["result"]
        or output.get("required") != ["result"]
    ):
        return False
    title = str(output.get("title", ""))
    function = title.removesuffix("Output")
    if function == title or not function or function[0].isupper():
        return False
    inner = output["properties"]["result"]
    return isinstance(inner, dict) and inner.get("type") != "object" and "$ref" not in inner
