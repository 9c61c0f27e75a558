"""The gateway's consensus as one MCP tool: ask several agents the same task and decide.

Offered beside the capability tools when `RouterMCPServer` is built with ``consensus_tool=True``:
each call costs n agent calls, so a model is not offered it unasked. It never takes a
capability's tool name: when a capability is called ``reach_consensus``, the tool is
``reach_consensus_2`` (or the next free number).
"""

from __future__ import annotations

import json
from collections.abc import Collection, Mapping
from typing import Any

from mcp.types import CallToolResult, TextContent, Tool, ToolAnnotations

from middleware import ReachResult
from middleware.models import MAX_VOTERS
from reach_adapters.errors import InvalidMessageError
from reach_adapters.router import Router, compiled_validator, first_error, schema_key

__all__ = ["CONSENSUS_TOOL", "call_consensus", "consensus_tool", "consensus_tool_name"]

CONSENSUS_TOOL = "reach_consensus"

_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "capability": {
            "type": "string",
            "minLength": 1,
            "description": "The capability every agent is asked.",
        },
        "payload": {"description": "The task, shaped as the capability's input schema."},
        "n": {"type": "integer", "minimum": 1, "maximum": MAX_VOTERS, "default": 3},
        "quorum": {"type": "integer", "minimum": 1, "maximum": MAX_VOTERS, "default": 2},
        "vote": {"type": "string", "enum": ["majority", "judge"], "default": "majority"},
        "judge": {
            "type": "string",
            "minLength": 1,
            "description": "With vote 'judge': the judging capability.",
        },
    },
    "required": ["capability"],
    "additionalProperties": False,
}
_SCHEMA_KEY = schema_key(_SCHEMA)


def consensus_tool_name(taken: Collection[str]) -> str:
    """``reach_consensus``, or the first numbered name no capability tool has."""
    name, n = CONSENSUS_TOOL, 1
    while name in taken:
        n += 1
        name = f"{CONSENSUS_TOOL}_{n}"
    return name


def consensus_tool(name: str) -> Tool:
    return Tool(
        name=name,
        title="Consensus",
        description=(
            "Ask n distinct agents offering a capability the same task at once, and answer what at "
            "least quorum of them agreed on (vote 'majority'), or what the capability named as judge "
            "picked. Costs n agent calls. The result has the decision and every agent's vote."
        ),
        input_schema=_SCHEMA,
        annotations=ToolAnnotations(title="Consensus", read_only_hint=False, open_world_hint=True),
    )


def schema() -> Mapping[str, Any]:
    return _SCHEMA


async def call_consensus(router: Router, arguments: Mapping[str, Any], principal: str | None) -> ReachResult:
    """Run the consensus the arguments ask for; `InvalidMessageError` for bad ones: those its
    declared schema refuses (``"n": "3"``, ``true``, an unknown argument) included."""
    problem = first_error(compiled_validator(_SCHEMA_KEY), dict(arguments), "(arguments)")
    if problem is not None:
        msg = f"invalid {CONSENSUS_TOOL} arguments: {problem}; see the tool's input schema"
        raise InvalidMessageError(msg)
    return await router.consensus(
        arguments.get("capability"),  # type: ignore[arg-type]
        arguments.get("payload"),
        n=arguments.get("n", 3),
        quorum=arguments.get("quorum", 2),
        vote=arguments.get("vote", "majority"),
        judge=arguments.get("judge"),
        principal=principal,
    )


def consensus_answer(result: ReachResult, answer: CallToolResult) -> CallToolResult:
    """`answer` (the converter's) with the decision and the votes as structured content."""
    votes = result.extra.get("votes", [])
    if result.ok:
        structured = {"decision": result.payload, "votes": votes}
        text = json.dumps(structured, ensure_ascii=False)
        return CallToolResult(
            content=[TextContent(type="text", text=text)], structured_content=structured, _meta=answer.meta
        )
    answer.structured_content = {"votes": votes}
    return answer
