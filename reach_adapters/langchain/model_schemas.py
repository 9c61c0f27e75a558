"""Tool schemas as every major model provider takes them for strict function calling.

The schemas models are shown are only adjusted where strict checks (OpenAI strict mode, Gemini)
would refuse them; the tool's arguments are still checked against the capability's own schema.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, unquote

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from referencing import Registry
from referencing.exceptions import Unresolvable

from reach_adapters.langchain.chat_schemas import MESSAGE_SCHEMA, MODEL_MESSAGE_SCHEMA, model_message_list

__all__ = ["Nulls", "for_models", "nullable_optionals", "without_nulls"]

# Where definitions sit: draft 2020-12's "$defs", draft-07's "definitions" (zod-to-json-schema and
# many MCP servers still emit those). A schema there counts only where a `$ref` points to it.
_DEF_KEYS = frozenset({"$defs", "definitions"})
# Keywords whose value maps names to schemas: a key there is a name (a property may be called
# "definitions"), never a keyword.
_NAMED = frozenset({"properties", "patternProperties", "dependentSchemas"}) | _DEF_KEYS
# Where an object's optional properties are made nullable (`nullable_optionals`): schemas that
# each describe the whole value, lists of them that describe its parts, and named ones (pattern
# properties, which strict mode does not take, are left as they are).
_OPTIONS = ("anyOf", "oneOf", "allOf")
_LISTS = frozenset({*_OPTIONS, "prefixItems"})
_PARTS = frozenset({"items", "additionalProperties"})
_WALKED = frozenset({"properties"}) | _DEF_KEYS

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


@dataclass(frozen=True)
class Nulls:
    """Where a model's nulls mean "not given" in a value (`nullable_optionals`): the properties of
    an object whose null is dropped (`drop`), and where to look further in: the values of its
    properties (`fields`, for the `named` ones), of its other keys (`others`, a map's values) and
    an array's items. `keep`: properties whose null is a value (their schema takes it), which
    wins where options of an ``anyOf`` disagree."""

    drop: frozenset[str] = frozenset()
    keep: frozenset[str] = frozenset()
    named: frozenset[str] = frozenset()
    fields: Mapping[str, Nulls] = field(default_factory=dict)
    others: Nulls | None = None
    items: Nulls | None = None

    @property
    def empty(self) -> bool:
        """Whether no null is dropped in such a value."""
        return not (self.drop or self.fields or self.others or self.items)


def nullable_optionals(schema: dict[str, Any]) -> tuple[dict[str, Any], Nulls | None]:
    """`schema`, the arguments object models are shown, with each optional property that takes no
    null made nullable: the arguments' own, and those of nested objects (in properties, arrays'
    items, maps' values, ``anyOf`` options and the definitions `$ref`s point to, each made so once
    wherever it is used), and where their nulls are dropped (None: nowhere). Strict function calling
    makes a model send every property of every object, so it could leave none out and would invent
    a value (which a graph writes into its state); null stands for "not given" there, and the tool
    drops it before it checks the arguments."""
    # An empty registry: no reference is fetched from the network to decide this.
    checker = Draft202012Validator(schema, registry=Registry())
    made: dict[Path, frozenset[str]] = {}
    keep: dict[Path, frozenset[str]] = {}
    for path, node in _subschemas(schema, ()):
        properties = node.get("properties")
        if not isinstance(properties, dict):
            continue
        required = set(node.get("required", ()))
        fields = {name: body for name, body in properties.items() if isinstance(body, dict)}
        nulled = {name for name, body in fields.items() if _takes_null(body, checker)}
        keep[path] = frozenset(nulled)
        made[path] = frozenset(name for name in fields if name not in required and name not in nulled)
    if not any(made.values()):
        return schema, None
    targets = {target for _, target, _ in _ref_sites(schema, (), -1)}
    # A wrapped schema a `$ref` points to is kept whole as the wrapper's first option, where the
    # reference is moved: it must not take the null its own site was given.
    wrapped = {(*path, "properties", name) for path, names in made.items() for name in names}
    flat = {site for site in wrapped if site not in targets and _flattens(_at(schema, site))}
    shown: dict[str, Any] = _shown(schema, (), made, wrapped - flat)
    nulls = _nulls_at((), schema, made, keep, {}, set())
    return shown, None if nulls is None or nulls.empty else nulls


def without_nulls(value: Any, nulls: Nulls) -> Any:
    """A model's `value` (the arguments, at first) without the nulls it sent for properties made
    nullable (`nullable_optionals`): a strict-mode model's way of not giving them. Only where
    `nulls` leads is the value walked."""
    if isinstance(value, dict):
        out: dict[str, Any] = {}
        for key, item in value.items():
            if item is None and key in nulls.drop:
                continue
            inner = nulls.fields.get(key) if key in nulls.named else nulls.others
            out[key] = without_nulls(item, inner) if inner is not None else item
        return out
    if isinstance(value, list) and nulls.items is not None:
        return [without_nulls(item, nulls.items) for item in value]
    return value


def _subschemas(node: Any, path: Path) -> Iterator[tuple[Path, dict[str, Any]]]:
    """The schema `node` at `path` and each schema in it where a value or a part of it is
    described (not ``not``, ``if``, examples or defaults): those whose optional properties a
    strict model must send."""
    if not isinstance(node, dict):
        return
    yield path, node
    for key, value in node.items():
        if key in _WALKED and isinstance(value, dict):
            for name, body in value.items():
                yield from _subschemas(body, (*path, key, name))
        elif key in _LISTS and isinstance(value, list):
            for index, body in enumerate(value):
                yield from _subschemas(body, (*path, key, str(index)))
        elif key in _PARTS:
            yield from _subschemas(value, (*path, key))


def _shown(node: Any, path: Path, made: dict[Path, frozenset[str]], nested: set[Path]) -> Any:
    """The schema `node` at `path` as models are shown it: the `made` properties nullable (those
    at a `nested` path as the first option of the wrapper) and local `$ref`s moved to match."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _WALKED and isinstance(value, dict):
            out[key] = {name: _shown(body, (*path, key, name), made, nested) for name, body in value.items()}
        elif key in _LISTS and isinstance(value, list):
            out[key] = [_shown(body, (*path, key, str(i)), made, nested) for i, body in enumerate(value)]
        elif key in _PARTS:
            out[key] = _shown(value, (*path, key), made, nested)
        else:
            out[key] = value
    target = _pointer(node.get("$ref"))
    if target is not None and any(target[:depth] in nested for depth in range(len(target) + 1)):
        out["$ref"] = _as_pointer(_moved(target, nested))
    names = made.get(path)
    if names:
        properties = out["properties"]
        out["properties"] = {
            name: _or_null(body, nest=(*path, "properties", name) in nested) if name in names else body
            for name, body in properties.items()
        }
    return out


def _moved(target: Path, nested: set[Path]) -> Path:
    """Where the schema at `target` is once the `nested` ones are wrapped (under ``anyOf/0``)."""
    out: list[str] = []
    for depth, part in enumerate((*target, None)):
        if target[:depth] in nested:
            out += ["anyOf", "0"]
        if part is not None:
            out.append(part)
    return tuple(out)


def _as_pointer(path: Path) -> str:
    """The local `$ref` to `path`."""
    parts = (quote(part.replace("~", "~0").replace("/", "~1"), safe="~!$&'()*+,;=:@") for part in path)
    return "#/" + "/".join(parts) if path else "#"


def _at(schema: Any, path: Path) -> Any:
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


def _nulls_at(
    path: Path,
    schema: dict[str, Any],
    made: dict[Path, frozenset[str]],
    keep: dict[Path, frozenset[str]],
    known: dict[Path, Nulls | None],
    open_: set[Path],
) -> Nulls | None:
    """Where nulls are dropped in a value of the schema at `path` (None: it is no schema), once
    per path (`known`): a definition used in several places gives one answer. A path already
    being followed (`open_`, a cycle `for_models` left) adds nothing instead of looping."""
    if path in known:
        return known[path]
    node = _at(schema, path)
    if path in open_ or not isinstance(node, dict):
        return None
    open_.add(path)

    def at(*keys: str) -> Nulls | None:
        return _nulls_at((*path, *keys), schema, made, keep, known, open_)

    parts: list[Nulls] = []
    properties = node.get("properties")
    named = frozenset(properties) if isinstance(properties, dict) else frozenset()
    inside = {name: at("properties", name) for name in named}
    others = at("additionalProperties")
    parts.append(
        Nulls(
            drop=made.get(path, frozenset()),
            keep=keep.get(path, frozenset()),
            named=named,
            fields={name: nulls for name, nulls in inside.items() if nulls is not None and not nulls.empty},
            others=None if others is None or others.empty else others,
        )
    )
    tuple_items = node.get("prefixItems")
    count = len(tuple_items) if isinstance(tuple_items, list) else 0
    items = [nulls for nulls in (at("items"), *(at("prefixItems", str(i)) for i in range(count))) if nulls]
    if items:
        parts.append(Nulls(items=_merged(items)))
    for key in _OPTIONS:
        options = node.get(key)
        if isinstance(options, list):
            parts += [nulls for i in range(len(options)) if (nulls := at(key, str(i))) is not None]
    target = _pointer(node.get("$ref"))
    if target is not None and (referred := _nulls_at(target, schema, made, keep, known, open_)) is not None:
        parts.append(referred)
    open_.discard(path)
    known[path] = merged = _merged(parts)
    return merged


def _merged(parts: list[Nulls]) -> Nulls:
    """One answer for a value several schemas describe (``anyOf`` options, a `$ref` and its
    siblings): a null is dropped where one of them made it nullable and none takes it as a value."""
    if len(parts) == 1:
        return parts[0]
    keep = frozenset().union(*(part.keep for part in parts))

    def joined(found: list[Nulls | None]) -> Nulls | None:
        some = [nulls for nulls in found if nulls is not None]
        nulls = _merged(some) if some else None
        return None if nulls is None or nulls.empty else nulls

    names = {name for part in parts for name in part.fields}
    fields = {name: joined([part.fields.get(name) for part in parts]) for name in names}
    return Nulls(
        drop=frozenset().union(*(part.drop for part in parts)) - keep,
        keep=keep,
        named=frozenset().union(*(part.named for part in parts)),
        fields={name: nulls for name, nulls in fields.items() if nulls is not None},
        others=joined([part.others for part in parts]),
        items=joined([part.items for part in parts]),
    )


def _takes_null(field: dict[str, Any], checker: Draft202012Validator) -> bool:
    """Whether the argument schema `field` admits null, as the router's check will judge it (with
    `checker`, of the arguments' schema): its `$ref`s followed, a schema of annotations only
    (``Any``) admitting it. One that cannot be judged (a reference out of the document) counts as
    admitting it: its nulls stay values."""
    try:
        return next(checker.descend(None, field), None) is None
    except (Unresolvable, SchemaError):
        return True


def _flattens(schema: Any) -> bool:
    """Whether `_or_null` adds null to `schema`'s own options rather than wrapping it."""
    return isinstance(schema, dict) and schema.keys() - {"title", "description"} == {"anyOf"}


def _or_null(schema: dict[str, Any], *, nest: bool) -> dict[str, Any]:
    """`schema` or null, its title and description kept where models read them; null is added to
    its own ``anyOf`` options unless it must be kept whole (`nest`, where a `$ref` points)."""
    said: dict[str, Any] = {key: schema[key] for key in ("title", "description") if key in schema}
    rest = {key: value for key, value in schema.items() if key not in said}
    if _flattens(schema) and not nest:
        return {**said, "anyOf": [*rest["anyOf"], {"type": "null"}]}
    return {**said, "anyOf": [rest, {"type": "null"}]}
