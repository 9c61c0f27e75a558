"""Tool schemas as every major model provider takes them for strict function calling.

The schemas models are shown are only adjusted where strict checks (OpenAI strict mode, Gemini)
would refuse them; the tool's arguments are still checked against the capability's own schema.
"""

from __future__ import annotations

from typing import Any

from reach_adapters.langchain.chat_schemas import MESSAGE_SCHEMA, MODEL_MESSAGE_SCHEMA

__all__ = ["for_models"]


# Where definitions sit: draft 2020-12's "$defs", draft-07's "definitions" (zod-to-json-schema and
# many MCP servers still emit those).
_DEF_KEYS = ("$defs", "definitions")
# Keywords whose value maps names to schemas: a key there is a name (a property may be called
# "definitions"), never a keyword.
_NAMED = frozenset({"properties", "patternProperties", "dependentSchemas"})
# A reference to the whole schema.
_ROOT = "#"


def for_models(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` as strict function calling (OpenAI strict mode, Gemini) takes it: every array
    declares its items (a tuple's as any of its members), a `$ref` that would close a cycle (to a
    definition of either draft, or to the root ``#``) is a plain object instead, and a chat
    message takes the role/content form only. The arguments are still checked against the
    capability's own schema."""
    root = {key: value for key, value in schema.items() if key not in _DEF_KEYS}
    defs = _definitions(schema)
    edges = {ref: _refs(body) for ref, body in defs.items()}
    edges[_ROOT] = _refs(root)

    def closes_cycle(ref: str, owner: str) -> bool:
        # From the root, only a reference to itself: the cycle is cut where it comes back.
        return ref == owner or (owner != _ROOT and owner in _reached(edges, ref))

    def fix(node: Any, owner: str) -> Any:
        if isinstance(node, list):
            return [fix(item, owner) for item in node]
        if not isinstance(node, dict):
            return node
        if node == MESSAGE_SCHEMA:
            return dict(MODEL_MESSAGE_SCHEMA)
        ref = node.get("$ref")
        if isinstance(ref, str) and closes_cycle(ref, owner):
            return {"type": "object"}
        out = {key: fix_keyword(key, value, owner) for key, value in node.items() if key not in _DEF_KEYS}
        kinds = node.get("type")
        if (kinds == "array" or (isinstance(kinds, list) and "array" in kinds)) and "items" not in node:
            members = out.get("prefixItems")
            out["items"] = {"anyOf": members} if isinstance(members, list) and members else {}
        return out

    def fix_keyword(key: str, value: Any, owner: str) -> Any:
        if key in _NAMED and isinstance(value, dict):
            return {name: fix(body, owner) for name, body in value.items()}
        return fix(value, owner)

    out: dict[str, Any] = fix(root, _ROOT)
    for key in _DEF_KEYS:
        if isinstance(schema.get(key), dict):
            out[key] = {name: fix(body, f"#/{key}/{name}") for name, body in schema[key].items()}
    return out


def _definitions(schema: dict[str, Any]) -> dict[str, Any]:
    """The schema's definitions of either draft, by the `$ref` that points to each."""
    return {
        f"#/{key}/{name}": body
        for key in _DEF_KEYS
        if isinstance(schema.get(key), dict)
        for name, body in schema[key].items()
    }


def _reached(edges: dict[str, set[str]], start: str) -> set[str]:
    """Every `$ref` reached from `start` by following the references in `edges`."""
    seen: set[str] = set()
    pending = [start]
    while pending:
        for ref in edges.get(pending.pop(), ()):
            if ref not in seen:
                seen.add(ref)
                pending.append(ref)
    return seen


def _refs(node: Any) -> set[str]:
    """The `$ref`s in the schema `node`, outside the definitions it holds."""
    if isinstance(node, list):
        return set().union(*(_refs(item) for item in node)) if node else set()
    if not isinstance(node, dict):
        return set()
    found = {node["$ref"]} if isinstance(node.get("$ref"), str) else set()
    for key, value in node.items():
        if key in _NAMED and isinstance(value, dict):
            found = found.union(*(_refs(body) for body in value.values()))
        elif key not in _DEF_KEYS:
            found |= _refs(value)
    return found
