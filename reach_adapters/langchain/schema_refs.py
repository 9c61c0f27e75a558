"""Local `$ref`s in the schemas models are shown: where they point, and copies of what a JSON
pointer into the schema points to, so that the place it points to may change for models
(`nested_nulls`) while the reference keeps reading what it read."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import quote, unquote

from reach_adapters.langchain.schema_keywords import DATA
from reach_adapters.router import DEFINITIONS, NAMED, numbered

__all__ = [
    "CUT",
    "OWN_BASE",
    "Path",
    "as_pointer",
    "at",
    "holds_resource",
    "is_definition",
    "pointer",
    "repointed",
    "schemas",
    "with_copied_targets",
]

# What `for_models` puts in place of a reference that would close a cycle.
CUT: dict[str, Any] = {"type": "object"}
# What gives a subschema a base URI of its own ("id" in drafts 4 and earlier): its "#/..."
# references point into it, not into the document.
OWN_BASE = frozenset({"$id", "id"})
# What a reference may find other than by path: a schema holding one is never copied.
_RESOURCE = OWN_BASE | {"$anchor", "$dynamicAnchor", "$recursiveAnchor"}

# Where a value sits in a schema document: its keys and list indexes from the root.
Path = tuple[str, ...]


def pointer(ref: Any) -> Path | None:
    """Where a local JSON-pointer `$ref` (``#``, ``#/$defs/Node``, ``#/properties/tree``)
    points; None for any other reference (another document, an anchor)."""
    if ref == "#":
        return ()
    if not isinstance(ref, str) or not ref.startswith("#/"):
        return None
    return tuple(part.replace("~1", "/").replace("~0", "~") for part in unquote(ref[2:]).split("/"))


def as_pointer(path: Path) -> str:
    """The local `$ref` to `path`."""
    parts = (quote(part.replace("~", "~0").replace("/", "~1"), safe="~!$&'()*+,;=:@") for part in path)
    return "#/" + "/".join(parts) if path else "#"


def at(schema: Any, path: Path) -> Any:
    """What sits at `path` in `schema` (None where nothing does)."""
    node = schema
    for part in path:
        if isinstance(node, dict):
            node = node.get(part)
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


def schemas(node: Any, *, nested_bases: bool) -> Iterator[dict[str, Any]]:
    """Each schema object in the schema `node`, itself first; those with a base URI of their own
    (a nested `$id`) and what they hold only with `nested_bases`. Never what data keywords
    (``default``, ``const``...) hold. (A stack of its own: schemas may nest deeper than Python's
    recursion limit.)"""
    pending: list[tuple[Any, bool]] = [(node, True)]
    while pending:
        node, root = pending.pop()
        if isinstance(node, list):
            pending.extend((item, False) for item in reversed(node))
            continue
        if not isinstance(node, dict) or (not root and not nested_bases and OWN_BASE & node.keys()):
            continue
        yield node
        inner: list[Any] = []
        for key, value in node.items():
            if key in DATA or not isinstance(value, dict | list):
                continue
            if key in NAMED and isinstance(value, dict):
                inner.extend(value.values())
            else:
                inner.append(value)
        pending.extend((body, False) for body in reversed(inner))


def holds_resource(node: Any) -> bool:
    """Whether the schema `node` or one inside it has a base URI or an anchor of its own: a copy
    of it would be a second resource of that name."""
    return any(_RESOURCE & inner.keys() for inner in schemas(node, nested_bases=True))


def with_copied_targets(schema: dict[str, Any]) -> tuple[dict[str, Any], frozenset[Path], dict[Path, Path]]:
    """`schema` with each JSON-pointer `$ref` to a place other than a definition (zod-to-json-schema's
    ``#/properties/billing`` for a schema used twice) pointed at a copy of that place put among
    the definitions, so that the place may change for models without the reference reading the
    change; and the places such references point to that could not be copied (in or holding a
    schema with a base URI or an anchor of its own): those must neither change nor move; and
    where each copy came from. A boolean schema pointed to is copied too (its parent may change)."""
    targets = set()
    for node in schemas(schema, nested_bases=False):
        target = pointer(node.get("$ref"))
        if target and not is_definition(target) and at(schema, target) is not None:
            targets.add(target)
    copyable = sorted(
        target
        for target in targets
        if isinstance(at(schema, target), dict | bool) and _copyable(schema, target)
    )
    key = "definitions" if "definitions" in schema and "$defs" not in schema else "$defs"
    defs = schema.get(key, {})
    if not copyable or not isinstance(defs, dict):
        return schema, frozenset(targets), {}
    taken = set(defs)
    names: dict[Path, str] = {}
    for target in copyable:
        names[target] = numbered(".".join(target), taken)
        taken.add(names[target])
    moved = {target: as_pointer((key, name)) for target, name in names.items()}
    out = repointed(schema, moved, root=True)
    copies = {name: repointed(at(schema, target), moved, root=False) for target, name in names.items()}
    out[key] = {**out.get(key, {}), **copies}
    origins: dict[Path, Path] = {(key, name): target for target, name in names.items()}
    return out, frozenset(targets.difference(copyable)), origins


def is_definition(path: Path) -> bool:
    """Whether `path` is that of a definition of the document's root."""
    return len(path) == 2 and path[0] in DEFINITIONS


def _copyable(schema: dict[str, Any], target: Path) -> bool:
    """Whether the schema at `target` reads the same copied among the definitions: neither it nor
    a schema on the way to it or in it has a base URI or an anchor of its own."""
    node: Any = schema
    among_names = False
    for part in target:
        names_next = not among_names and part in NAMED
        node = at(node, (part,))
        among_names = names_next
        if isinstance(node, dict) and not among_names and _RESOURCE & node.keys():
            return False
    return not holds_resource(node)


def repointed(node: Any, moved: dict[Path, str], *, root: bool) -> Any:
    """The schema `node` with each `$ref` to a place in `moved` pointed where that maps it; a
    schema with a base URI of its own is left whole, its references being into itself."""
    if isinstance(node, list):
        return [repointed(item, moved, root=False) for item in node]
    if not isinstance(node, dict) or (not root and OWN_BASE & node.keys()):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        target = pointer(value) if key == "$ref" else None
        if target is not None:
            out[key] = moved.get(target, value)
        elif key in DATA:
            out[key] = value
        elif key in NAMED and isinstance(value, dict):
            out[key] = {name: repointed(body, moved, root=False) for name, body in value.items()}
        else:
            out[key] = repointed(value, moved, root=False)
    return out
