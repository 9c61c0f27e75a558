"""Optional properties shown to models as nullable, and the nulls a model sends for them dropped
before the arguments are checked and routed.

Strict function calling (OpenAI strict mode) makes a model send every property of every object,
so it would invent a value for an optional one (which a graph writes into its state); null stands
for "not given" there. Only simple places change: the arguments' object, and the objects reached
from it through ``properties``, an array's one ``items`` schema, a map's ``additionalProperties``
schema, a ``$ref`` to a definition, and ``anyOf``/``oneOf`` options a value's JSON type tells
apart. Anywhere else (a tuple's positions, pattern properties, ``allOf``, ``not``, conditionals, a
schema with a base URI of its own, options that overlap...) is left exactly as it is, its nulls
kept: whatever the schema shown admits, less the nulls dropped, the capability's own admits.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from jsonschema.validators import validator_for
from referencing import Registry
from referencing.exceptions import Unresolvable

from reach_adapters.langchain.schema_keywords import (
    matched,
    notes_only,
    shape_ok,
    takes_no_null,
    takes_null_surely,
)
from reach_adapters.langchain.schema_refs import (
    CUT,
    OWN_BASE,
    Path,
    as_pointer,
    at,
    holds_resource,
    is_definition,
    pointer,
    repointed,
    schemas,
    with_copied_targets,
)
from reach_adapters.router import DEFINITIONS, numbered

__all__ = ["Nulls", "nullable_optionals", "without_nulls"]

# Keywords whose meaning depends on where a schema is reached from: a schema holding one is left as
# it is, whole.
_DYNAMIC = frozenset({"$dynamicRef", "$dynamicAnchor", "$recursiveRef", "$recursiveAnchor"})
# How many schemas deep the arguments are looked into; below, things are as they are. It also
# bounds the depth of the `Nulls` tree, which `without_nulls` walks for every call.
_MAX_DEPTH = 40


@dataclass(frozen=True)
class Nulls:
    """Where a model's nulls mean "not given" in a value: the properties of an object whose null is
    dropped (`drop`), and where to look further in: the values of its properties (`fields`, for
    those it `named`), of its other keys (`others`, a map's values) and an array's `items`.
    `height`: how many levels deep it goes."""

    drop: frozenset[str] = frozenset()
    named: frozenset[str] = frozenset()
    fields: Mapping[str, Nulls] = field(default_factory=dict)
    others: Nulls | None = None
    items: Nulls | None = None
    height: int = 1


def nullable_optionals(
    schema: dict[str, Any], original: dict[str, Any] | None = None
) -> tuple[dict[str, Any], Nulls | None]:
    """`schema`, the arguments object models are shown, with each optional property that takes no
    null made nullable where the module says, and where the nulls are dropped (None: nowhere).
    Whether a property takes null is judged on `original` too, the schema the arguments are
    checked against, where `schema` is `for_models`' version of it (a cycle cut there is a plain
    object, which takes no null where the definition did). Worked out once, when the tool is made."""
    if schema.get("type") != "object" or not isinstance(schema.get("properties"), dict) or _opaque(schema):
        return schema, None
    moved, pinned, origins = with_copied_targets(schema)
    walk = _Walk(moved, pinned, _Original(original, origins) if original is not None else None)
    shown, nulls = walk.schema_at(moved, (), 0)
    if nulls is None:
        return schema, None
    return walk.with_definitions(shown), nulls


def without_nulls(value: Any, nulls: Nulls) -> Any:
    """A model's `value` (the arguments, at first) without the nulls it sent for properties made
    nullable: a strict-mode model's way of not giving them. Only where `nulls` leads is it walked."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if item is None and key in nulls.drop:
                continue
            inner = nulls.fields.get(key) if key in nulls.named else nulls.others
            out[key] = item if inner is None else without_nulls(item, inner)
        return out
    if isinstance(value, list) and nulls.items is not None:
        return [without_nulls(item, nulls.items) for item in value]
    return value


@dataclass(frozen=True)
class _Made:
    """A definition as models are shown it, where (`copy`) until it is known whether it can take
    the original's place, and where nulls are dropped in its values."""

    shown: dict[str, Any]
    copy: Path
    nulls: Nulls


class _Walk:
    """One look into an arguments schema (`schema`, whose JSON-pointer targets are copied among
    the definitions but for the `pinned` ones, which must neither change nor move)."""

    def __init__(self, schema: dict[str, Any], pinned: frozenset[Path], original: _Original | None) -> None:
        self.schema = schema
        self.pinned = pinned
        self.original = original
        # The draft the schema names, as the router's check reads it; and an empty registry: no
        # reference is fetched from the network to decide this.
        self.checker = _checker(schema)
        self.made: dict[Path, _Made | None] = {}
        # The names in each definitions container, the copies' among them.
        self.taken = {key: set(defs) for key in DEFINITIONS if isinstance(defs := schema.get(key), dict)}
        self.open: set[Path] = set()

    def schema_at(self, node: Any, path: Path, depth: int) -> tuple[Any, Nulls | None]:
        """The schema `node` at `path` as models are shown it, and where nulls are dropped in its
        values; None, and `node` itself, where nothing changes."""
        if depth > _MAX_DEPTH or not isinstance(node, dict) or self._in_pinned(path):
            return node, None
        if "$ref" in node:
            return self._reference(node, depth)
        for key in ("anyOf", "oneOf"):
            if key in node:
                return self._options(node, path, key, depth)
        if shape_ok(node, root=not path):
            return self._shape(node, path, depth)
        return node, None

    def with_definitions(self, shown: dict[str, Any]) -> dict[str, Any]:
        """The `shown` arguments schema with the definitions it changed: in place of the original
        where nothing left as it is reads that, else beside it under a name of their own."""
        made = {target: done for target, done in self.made.items() if done is not None}
        out = {**shown, **{key: dict(shown[key]) for key in {target[0] for target in made}}}
        for done in made.values():
            out[done.copy[0]][done.copy[1]] = done.shown
        read = _reached(out)
        back: dict[Path, str] = {}
        for target, done in made.items():
            if done.copy not in read:
                del out[done.copy[0]][done.copy[1]]
            elif target not in read:
                out[target[0]][target[1]] = out[done.copy[0]].pop(done.copy[1])
                back[done.copy] = as_pointer(target)
        return repointed(out, back, root=True) if back else out

    def _shape(self, node: dict[str, Any], path: Path, depth: int) -> tuple[Any, Nulls | None]:
        properties = node.get("properties", {})
        required = node.get("required", [])
        if not isinstance(properties, dict) or not isinstance(required, list):
            return node, None
        # A property a pattern matches has its value read by that pattern's schema as well: it may
        # be left out, but nothing in it changes. Keys no property declares are the pattern's or
        # the map's: its values change only where there are no patterns.
        patterns = node.get("patternProperties")
        also_read = matched(properties, patterns)
        shown: dict[str, Any] = {}
        drop: set[str] = set()
        fields: dict[str, Nulls] = {}
        for name, body in properties.items():
            where = (*path, "properties", name)
            if name not in also_read:
                shown[name], inner = self.schema_at(body, where, depth + 1)
                if inner is not None:
                    fields[name] = inner
            else:
                shown[name] = body
            # (A draft-3 property says it is required in its own schema.)
            optional = name not in required and not (isinstance(body, dict) and body.get("required") is True)
            if optional and self._nullable(body, where):
                shown[name] = _or_null(shown[name])
                drop.add(name)
        extra, others = node.get("additionalProperties"), None
        if not patterns:
            extra, others = self.schema_at(extra, (*path, "additionalProperties"), depth + 1)
        each, items = self.schema_at(node.get("items"), (*path, "items"), depth + 1)
        if not (drop or fields or others or items):
            return node, None
        out = {**node, "properties": shown} if "properties" in node else dict(node)
        if others is not None:
            out["additionalProperties"] = extra
        if items is not None:
            out["items"] = each
        return out, _nulls(frozenset(drop), frozenset(properties), fields, others, items)

    def _reference(self, node: dict[str, Any], depth: int) -> tuple[Any, Nulls | None]:
        target = pointer(node["$ref"])
        if target is None or not is_definition(target) or not notes_only(node, "$ref"):
            return node, None
        done = self._definition(target, depth + 1)
        # A definition already looked into from higher up may go deeper than the limit from here.
        if done is None or depth + done.nulls.height > _MAX_DEPTH:
            return node, None
        return {**node, "$ref": as_pointer(done.copy)}, done.nulls

    def _definition(self, target: Path, depth: int) -> _Made | None:
        """The definition at `target` as models are shown it, worked out once wherever it is used
        (None: left as it is)."""
        if target in self.made:
            return self.made[target]
        body = at(self.schema, target)
        # A cycle (which `for_models` cuts) is not followed; a copy of a definition holding a base
        # URI or an anchor would be a second resource of that name.
        if target in self.open or not isinstance(body, dict) or holds_resource(body):
            return None
        self.open.add(target)
        shown, nulls = self.schema_at(body, target, depth)
        self.open.discard(target)
        self.made[target] = None
        if nulls is not None:
            copy = (target[0], numbered(f"{target[1]}_nullable", self.taken[target[0]]))
            self.taken[target[0]].add(copy[1])
            self.made[target] = _Made(shown, copy, nulls)
        return self.made[target]

    def _options(self, node: dict[str, Any], path: Path, key: str, depth: int) -> tuple[Any, Nulls | None]:
        """A union whose options a value's JSON type tells apart (at most one takes objects, one
        arrays), which is all that makes a null dropped in an option's value safe: no other option
        reads that value."""
        options = node[key]
        if not isinstance(options, list) or not notes_only(node, key):
            return node, None
        kinds = [self._types(option) for option in options]
        objects = [index for index, kind in enumerate(kinds) if kind is not None and "object" in kind]
        arrays = [index for index, kind in enumerate(kinds) if kind is not None and "array" in kind]
        if None in kinds or len(objects) > 1 or len(arrays) > 1:
            return node, None
        shown = list(options)
        found: dict[int, Nulls | None] = {}
        for index in {*objects, *arrays}:
            shown[index], found[index] = self.schema_at(options[index], (*path, key, str(index)), depth + 1)
        of_objects = found[objects[0]] if objects else None
        of_arrays = found[arrays[0]] if arrays else None
        items = None if of_arrays is None else of_arrays.items
        if of_objects is None and items is None:
            return node, None
        whole = of_objects or Nulls()
        return {**node, key: shown}, _nulls(whole.drop, whole.named, whole.fields, whole.others, items)

    def _types(self, option: Any) -> frozenset[str] | None:
        """The JSON types an option takes at most, as its ``type`` (or, with a `$ref`, its
        definition's: drafts before 2019-09 ignore a reference's siblings) says; None where it says
        none."""
        if not isinstance(option, dict) or option == CUT:
            # What `for_models` leaves of a reference that closed a cycle stands for a definition
            # that may take more than objects: the union is not told apart by type.
            return None
        kind = option.get("type")
        if "$ref" in option:
            target = pointer(option["$ref"])
            body = at(self.schema, target) if target is not None and is_definition(target) else None
            kind = body.get("type") if isinstance(body, dict) and "$ref" not in body and body != CUT else None
        if isinstance(kind, str):
            return frozenset({kind})
        if isinstance(kind, list) and all(isinstance(each, str) for each in kind):
            return frozenset(kind)
        return None

    def _in_pinned(self, path: Path) -> bool:
        """Whether `path` is at or in a place a reference points to that must not change."""
        return bool(self.pinned) and any(path[:depth] in self.pinned for depth in range(len(path) + 1))

    def _nullable(self, body: Any, where: Path) -> bool:
        """Whether the optional property of schema `body` at `where` is shown nullable: it takes no
        null of its own, and wrapping it moves nothing a reference points to."""
        if not isinstance(body, dict):
            return False
        moves = not _appends_null(body) and any(pin[: len(where)] == where for pin in self.pinned)
        if moves or _takes_null(body, self.checker):
            return False
        return self.original is None or not self.original.takes_null(where)


class _Original:
    """The schema the arguments are checked against (`for_models`' input), read where the one
    looked into has a place of its own: a copy among the definitions (`origins`)."""

    def __init__(self, schema: dict[str, Any], origins: dict[Path, Path]) -> None:
        self.schema = schema
        self.origins = origins
        self.checker: Any = None

    def takes_null(self, where: Path) -> bool:
        """Whether the schema at `where` (a place of the schema looked into) admits null there."""
        if where[:2] in self.origins:
            where = (*self.origins[where[:2]], *where[2:])
        body = at(self.schema, where)
        if not isinstance(body, dict):
            return body is True
        if takes_no_null(body):
            return False
        if self.checker is None:
            self.checker = _checker(self.schema)
        return _takes_null(body, self.checker)


def _checker(schema: dict[str, Any]) -> Any:
    """A validator of `schema`'s draft, as the router's check reads it, with an empty registry: no
    reference is fetched from the network. (`Any`: jsonschema's Validator protocol leaves out
    `descend`, which its validators all have.)"""
    return validator_for(schema, default=Draft202012Validator)(schema, registry=Registry())


def _takes_null(body: dict[str, Any], checker: Any) -> bool:
    """Whether the schema `body` admits null, as the router's check will judge it: its `$ref`s
    followed, a schema of annotations only (``Any``) admitting it. One that cannot be judged (a
    reference out of the document, a chain of them too long) counts as admitting it: its nulls
    stay values."""
    if takes_no_null(body):
        return False
    if takes_null_surely(body):
        return True
    try:
        return next(checker.descend(None, body), None) is None
    except (Unresolvable, SchemaError, RecursionError):
        return True


def _nulls(
    drop: frozenset[str],
    named: frozenset[str],
    fields: Mapping[str, Nulls],
    others: Nulls | None,
    items: Nulls | None,
) -> Nulls:
    inner = [*fields.values(), *(nulls for nulls in (others, items) if nulls is not None)]
    height = 1 + max((nulls.height for nulls in inner), default=0)
    return Nulls(drop, named, fields, others, items, height)


def _opaque(schema: dict[str, Any]) -> bool:
    """Whether a schema may point into itself other than by a JSON pointer that can be followed
    here: dynamic references, or references by URI where some schema names its own."""
    found = list(schemas(schema, nested_bases=True))
    if any(_DYNAMIC & node.keys() for node in found):
        return True
    by_uri = any(isinstance(node.get("$ref"), str) and not node["$ref"].startswith("#") for node in found)
    return by_uri and any(OWN_BASE & node.keys() for node in found)


def _reached(schema: dict[str, Any]) -> set[Path]:
    """The definitions the `$ref`s of `schema` reach from its root, through those they reach."""
    found: set[Path] = set()
    pending: list[Any] = [{key: value for key, value in schema.items() if key not in DEFINITIONS}]
    while pending:
        for node in schemas(pending.pop(), nested_bases=False):
            target = pointer(node.get("$ref"))
            if target is None or len(target) < 2 or target[0] not in DEFINITIONS or target[:2] in found:
                continue
            found.add(target[:2])
            pending.append(at(schema, target[:2]))
    return found


def _appends_null(schema: dict[str, Any]) -> bool:
    """Whether `_or_null` adds null to `schema`'s own options, moving none of them."""
    return schema.keys() - {"title", "description"} == {"anyOf"} and isinstance(schema["anyOf"], list)


def _or_null(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` or null, its title and description kept where models read them."""
    said: dict[str, Any] = {key: schema[key] for key in ("title", "description") if key in schema}
    rest = {key: value for key, value in schema.items() if key not in said}
    if _appends_null(schema):
        return {**said, "anyOf": [*rest["anyOf"], {"type": "null"}]}
    return {**said, "anyOf": [rest, {"type": "null"}]}
