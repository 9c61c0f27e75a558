"""Tool schemas as every major model provider takes them for strict function calling.

The schemas models are shown are only adjusted where strict checks (OpenAI strict mode, Gemini)
would refuse them; the tool's arguments are still checked against the capability's own schema.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import unquote

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for
from referencing import Registry
from referencing.exceptions import Unresolvable

from reach_adapters.langchain.chat_schemas import MESSAGE_SCHEMA, MODEL_MESSAGE_SCHEMA, model_message_list

__all__ = ["for_models", "nullable_optionals", "without_nulls"]

# Where definitions sit: draft 2020-12's "$defs", draft-07's "definitions" (zod-to-json-schema and
# many MCP servers still emit those). A schema there counts only where a `$ref` points to it.
_DEF_KEYS = frozenset({"$defs", "definitions"})
# Keywords whose value maps names to schemas: a key there is a name (a property may be called
# "definitions"), never a keyword.
_NAMED = frozenset({"properties", "patternProperties", "dependentSchemas"}) | _DEF_KEYS

# Where a value sits in a schema document: its keys and list indexes from the root.
Path = tuple[str, ...]


def for_models(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` as strict function calling (OpenAI strict mode, Gemini) takes it: every array
    declares its items (a tuple's as any of its members), a `$ref` that would close a cycle (to
    a definition of either draft, the root ``#``, or any JSON pointer into the schema such as
    zod-to-json-schema's ``#/properties/tree``) is a plain object instead, and a chat message
    takes the role/content form only (a graph's messages a list of them). The arguments are
    still checked against the capability's own schema."""
    sites = {site: (target, defs_at) for site, target, defs_at in _ref_sites(schema, (), -1)}
    out: dict[str, Any] = _fix(schema, (), _cuts(sites))
    return out


def _ref_sites(node: Any, path: Path, defs_at: int) -> Iterator[tuple[Path, Path, int]]:
    """Each local `$ref` in the schema `node` at `path`: where it sits, where it points, and
    where the innermost definitions container above it sits (its depth, -1 for none)."""
    if isinstance(node, list):
        for index, item in enumerate(node):
            yield from _ref_sites(item, (*path, str(index)), defs_at)
        return
    if not isinstance(node, dict):
        return
    target = _pointer(node.get("$ref"))
    if target is not None:
        yield path, target, defs_at
    for key, value in node.items():
        if key in _NAMED and isinstance(value, dict):
            inner = len(path) if key in _DEF_KEYS else defs_at
            for name, body in value.items():
                yield from _ref_sites(body, (*path, key, name), inner)
        else:
            yield from _ref_sites(value, (*path, key), defs_at)


def _pointer(ref: Any) -> Path | None:
    """Where a local JSON-pointer `$ref` (``#``, ``#/$defs/Node``, ``#/properties/tree``)
    points; None for any other reference (another document, an anchor)."""
    if ref == "#":
        return ()
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return None
    return tuple(part.replace("~1", "/").replace("~0", "~") for part in unquote(ref[2:]).split("/"))


def _cuts(sites: dict[Path, tuple[Path, int]]) -> set[Path]:
    """The `$ref`s to replace so that no cycle is left: those a walk from the root (then from
    the definitions it did not reach) finds pointing back into a reference it is still inside.
    Following a `$ref` reaches the references its target holds, except those in definitions
    it holds, which count only where pointed to."""

    def under(target: Path) -> list[Path]:
        return [
            site
            for site, (_, defs_at) in sites.items()
            if site[: len(target)] == target and defs_at < len(target)
        ]

    following = {site: under(target) for site, (target, _) in sites.items()}
    cut: set[Path] = set()
    inside: set[Path] = set()
    done: set[Path] = set()

    def visit(site: Path) -> None:
        inside.add(site)
        for reached in following[site]:
            if reached in inside:
                cut.add(site)
                break
            if reached not in done:
                visit(reached)
        inside.discard(site)
        done.add(site)

    for site in [*under(()), *sites]:
        if site not in done:
            visit(site)
    return cut


def _fix(node: Any, path: Path, cut: set[Path]) -> Any:
    """The schema `node` at `path` with the `cut` references plain objects, every array's items
    declared and chat messages in their role/content form."""
    if isinstance(node, list):
        return [_fix(item, (*path, str(index)), cut) for index, item in enumerate(node)]
    if not isinstance(node, dict):
        return node
    if path in cut:
        return {"type": "object"}
    if node == MESSAGE_SCHEMA:
        return dict(MODEL_MESSAGE_SCHEMA)
    node = model_message_list(node) or node
    out = {
        key: {name: _fix(body, (*path, key, name), cut) for name, body in value.items()}
        if key in _NAMED and isinstance(value, dict)
        else _fix(value, (*path, key), cut)
        for key, value in node.items()
    }
    kinds = node.get("type")
    if (kinds == "array" or (isinstance(kinds, list) and "array" in kinds)) and "items" not in node:
        members = out.get("prefixItems")
        out["items"] = {"anyOf": members} if isinstance(members, list) and members else {}
    return out


def nullable_optionals(schema: dict[str, Any]) -> tuple[dict[str, Any], frozenset[str]]:
    """`schema`, the arguments object models are shown, with each optional argument that takes
    no null made nullable, and the names of those arguments. Strict function calling makes a
    model send every argument, so it could leave none out and would invent a value (which a
    graph writes into its state); null stands for "not given" there, and the tool drops it
    before it checks the arguments."""
    properties = schema.get("properties")
    if schema.get("type") != "object" or not isinstance(properties, dict):
        return schema, frozenset()
    required = set(schema.get("required", ()))
    # The draft the schema names, as the router's check reads it; and an empty registry: no
    # reference is fetched from the network to decide this.
    # (`Any`: jsonschema's Validator protocol leaves out `descend`, which its validators all have.)
    checker: Any = validator_for(schema, default=Draft202012Validator)(schema, registry=Registry())
    made = frozenset(
        name
        for name, field in properties.items()
        if name not in required and isinstance(field, dict) and not _takes_null(field, checker)
    )
    if not made:
        return schema, made
    shown = {name: _or_null(field) if name in made else field for name, field in properties.items()}
    return {**schema, "properties": shown}, made


def without_nulls(arguments: dict[str, Any], nullable: frozenset[str]) -> dict[str, Any]:
    """A model's `arguments` without the nulls it sent for `nullable` ones (`nullable_optionals`):
    a strict-mode model's way of not giving them."""
    return {key: value for key, value in arguments.items() if value is not None or key not in nullable}


def _takes_null(field: dict[str, Any], checker: Any) -> bool:
    """Whether the argument schema `field` admits null, as the router's check will judge it (with
    `checker`, of the arguments' schema): its `$ref`s followed, a schema of annotations only
    (``Any``) admitting it. One that cannot be judged (a reference out of the document) counts as
    admitting it: its nulls stay values."""
    try:
        return next(checker.descend(None, field), None) is None
    except (Unresolvable, SchemaError):
        return True


def _or_null(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` or null, its title and description kept where models read them."""
    said: dict[str, Any] = {key: schema[key] for key in ("title", "description") if key in schema}
    rest = {key: value for key, value in schema.items() if key not in said}
    if rest.keys() == {"anyOf"}:
        return {**said, "anyOf": [*rest["anyOf"], {"type": "null"}]}
    return {**said, "anyOf": [rest, {"type": "null"}]}
