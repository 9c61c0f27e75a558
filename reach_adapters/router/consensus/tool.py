"""The router's consensus as a tool, defined once for every surface that offers it (the MCP
server's ``reach_consensus``, the LangChain toolkit's): its name, what it says it does, its
arguments, how they become `Router.consensus` options, and what it answers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import JsonValue

from middleware import ConsensusHint, ReachResult
from middleware.models import MAX_VOTERS
from reach_adapters.router.schemas import schema_key

__all__ = [
    "MODEL_SCHEMA",
    "MODEL_SCHEMA_KEY",
    "SCHEMA",
    "SCHEMA_KEY",
    "TOOL_DESCRIPTION",
    "TOOL_NAME",
    "tool_answer",
    "tool_options",
]

TOOL_NAME = "reach_consensus"
TOOL_DESCRIPTION = (
    "Ask n (default 3) distinct agents offering a capability the same task at once and get what at "
    "least quorum (default 2) of them agreed on, or with vote 'judge' what the judge capability "
    "picked. Use it when one agent's answer is not trusted enough; it costs n agent calls. The "
    "answer has the decision and every agent's vote."
)

_REQUIRED: dict[str, Any] = {
    "capability": {"type": "string", "minLength": 1, "description": "The capability every agent is asked."},
    "payload": {"description": "The task, shaped as the capability's input schema."},
}
_COUNT = {"type": "integer", "minimum": 1, "maximum": MAX_VOTERS}
# The optional arguments: how the consensus decides, each with what it means.
_OPTIONAL: dict[str, tuple[dict[str, Any], str]] = {
    "n": (_COUNT, "How many distinct agents are asked."),
    "quorum": (_COUNT, "How many agreeing answers a decision needs."),
    "vote": ({"type": "string", "enum": ["majority", "judge"]}, "How the answers are decided."),
    "judge": (
        {"type": "string", "minLength": 1},
        "With vote 'judge': the capability that picks among the answers.",
    ),
}


def _defaulted(name: str, spec: dict[str, Any]) -> dict[str, Any]:
    default = ConsensusHint.model_fields[name].default
    return spec if default is None else {**spec, "default": default}


# For clients that leave out what they do not set (MCP): closed, each default shown.
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        **_REQUIRED,
        **{name: {**_defaulted(name, spec), "description": why} for name, (spec, why) in _OPTIONAL.items()},
    },
    "required": ["capability"],
    "additionalProperties": False,
}
# For models: strict function calling makes a model send every argument, so an optional one may
# be null, meaning its default. Open, as the toolkit's other tools are.
MODEL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        **_REQUIRED,
        **{
            name: {"anyOf": [spec, {"type": "null"}], "description": why}
            for name, (spec, why) in _OPTIONAL.items()
        },
    },
    "required": ["capability"],
}
SCHEMA_KEY = schema_key(SCHEMA)
MODEL_SCHEMA_KEY = schema_key(MODEL_SCHEMA)


def tool_options(arguments: Mapping[str, Any]) -> dict[str, Any]:
    """`Router.consensus`'s options from checked tool arguments: those given, null or left out
    meaning the default."""
    return {name: arguments[name] for name in _OPTIONAL if arguments.get(name) is not None}


def tool_answer(result: ReachResult) -> dict[str, JsonValue]:
    """What the tool answers: the decision, when there is one, and every agent's vote."""
    votes = result.extra.get("votes", [])
    return {"decision": result.payload, "votes": votes} if result.ok else {"votes": votes}
