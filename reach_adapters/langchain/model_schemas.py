"""Tool schemas as every major model provider takes them for strict function calling.

The schemas models are shown are only adjusted where strict checks (OpenAI strict mode, Gemini)
would refuse them; the tool's arguments are still checked against the capability's own schema.
"""

from __future__ import annotations

from typing import Any

from reach_adapters.langchain.chat_schemas import DEFS, MESSAGE_SCHEMA, MODEL_MESSAGE_SCHEMA

__all__ = ["for_models"]


def for_models(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` as strict function calling (OpenAI strict mode, Gemini) takes it: every array
    declares its items (a tuple's as any of its members), a `$ref` that would close a cycle of
    definitions is a plain object instead, and a chat message takes the role/content form only.
    The arguments are still checked against the capability's own schema."""
    defs: dict[str, Any] = schema.get("$defs", {})
    edges = {name: _refs(body) for name, body in defs.items()}

    def reaches(start: str) -> set[str]:
        seen: set[str] = set()
        pending = [start]
        while pending:
            for name in edges.get(pending.pop(), ()):
                if name not in seen:
                    seen.add(name)
                    pending.append(name)
        return seen

    def fix(node: Any, owner: str | None) -> Any:
        if isinstance(node, list):
            return [fix(item, owner) for item in node]
        if not isinstance(node, dict):
            return node
        if node == MESSAGE_SCHEMA:
            return dict(MODEL_MESSAGE_SCHEMA)
        ref = node.get("$ref")
        if owner is not None and isinstance(ref, str):
            target = ref.removeprefix(DEFS)
            if target == owner or owner in reaches(target):
                return {"type": "object"}
        out = {key: fix(value, owner) for key, value in node.items() if key != "$defs"}
        kinds = node.get("type")
        if (kinds == "array" or (isinstance(kinds, list) and "array" in kinds)) and "items" not in node:
            members = out.get("prefixItems")
            out["items"] = {"anyOf": members} if isinstance(members, list) and members else {}
        return out

    out: dict[str, Any] = fix(schema, None)
    if defs:
        out["$defs"] = {name: fix(body, name) for name, body in defs.items()}
    return out


def _refs(node: Any) -> set[str]:
    """The definitions `node` refers to."""
    if isinstance(node, list):
        return set().union(*(_refs(item) for item in node)) if node else set()
    if not isinstance(node, dict):
        return set()
    found = {node["$ref"].removeprefix(DEFS)} if isinstance(node.get("$ref"), str) else set()
    return found.union(*(_refs(value) for value in node.values()))
