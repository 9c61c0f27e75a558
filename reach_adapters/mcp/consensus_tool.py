"""The gateway's consensus as one MCP tool: ask several agents the same task and decide.

Offered beside the capability tools when `RouterMCPServer` is built with ``consensus_tool=True``:
each call costs n agent calls, so a model is not offered it unasked. It never takes a
capability's tool name: when a capability is called ``reach_consensus``, the tool is
``reach_consensus_2`` (or the next free number). The tool itself (arguments, answer) is the
core's (exported by `reach_adapters.router`), as the LangChain toolkit's is.
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

from mcp.types import CallToolResult, TextContent, Tool, ToolAnnotations

from middleware import MetaInfo, ReachResult
from reach_adapters.errors import InvalidMessageError
from reach_adapters.mcp.boxes import BOXED
from reach_adapters.router import (
    CONSENSUS_TOOL_DESCRIPTION,
    CONSENSUS_TOOL_NAME,
    CONSENSUS_TOOL_SCHEMA,
    CONSENSUS_TOOL_SCHEMA_KEY,
    Router,
    compiled_validator,
    consensus_tool_answer,
    consensus_tool_options,
    first_error,
    numbered,
)

__all__ = ["CONSENSUS_TOOL", "call_consensus", "consensus_tool", "consensus_tool_name"]

CONSENSUS_TOOL = CONSENSUS_TOOL_NAME


def consensus_tool_name(taken: Collection[str]) -> str:
    """``reach_consensus``, or the first numbered name no capability tool has."""
    return numbered(CONSENSUS_TOOL, taken)


def consensus_tool(name: str) -> Tool:
    return Tool(
        name=name,
        title="Consensus",
        description=CONSENSUS_TOOL_DESCRIPTION,
        input_schema=CONSENSUS_TOOL_SCHEMA,
        annotations=ToolAnnotations(title="Consensus", read_only_hint=False, open_world_hint=True),
    )


def schema() -> Mapping[str, Any]:
    return CONSENSUS_TOOL_SCHEMA


async def call_consensus(router: Router, arguments: Mapping[str, Any], meta: MetaInfo) -> ReachResult:
    """Run the consensus the arguments ask for, as the task `meta` (the request's: its ids, call
    options and principal) that every voter gets; `InvalidMessageError` for bad arguments: those
    its declared schema refuses (``"n": "3"``, ``true``, an unknown argument) included."""
    problem = first_error(compiled_validator(CONSENSUS_TOOL_SCHEMA_KEY), dict(arguments), "(arguments)")
    if problem is not None:
        msg = f"invalid {CONSENSUS_TOOL} arguments: {problem}; see the tool's input schema"
        raise InvalidMessageError(msg)
    # The fields the request set (`resume` only when it did: any value resumes), the principal,
    # and the task id always: the served call's relay knows the routed call by it (`serving`).
    carried = {key: getattr(meta, key) for key in meta.model_fields_set if key != "capability"}
    carried.update(task_id=meta.task_id, principal=meta.principal)
    return await router.consensus(
        arguments["capability"], arguments.get("payload"), **consensus_tool_options(arguments), **carried
    )


def consensus_answer(result: ReachResult, answer: CallToolResult) -> CallToolResult:
    """`answer` (the converter's) with the decision and the votes as structured content."""
    structured = consensus_tool_answer(result)
    if result.ok:
        text = json.dumps(structured, ensure_ascii=False)
        # The decision's own content replaces the converter's, boxed or not.
        meta = {key: value for key, value in (answer.meta or {}).items() if key != BOXED}
        return CallToolResult(
            content=[TextContent(type="text", text=text)], structured_content=structured, _meta=meta
        )
    answer.structured_content = structured
    return answer
