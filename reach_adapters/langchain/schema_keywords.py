"""Which JSON Schema keywords a dropped optional property leaves true (`nested_nulls`), and a quick
look at whether a schema takes null.

A model's null for an optional property made nullable is dropped, and values inside it may lose
nulls too. Keywords that only read the keys present one by one (``properties``, ``required`` of
other keys, ``maxProperties``, ``propertyNames``, ``unevaluatedProperties`` of keys never declared)
or nothing of the value at all (annotations, keywords a validator does not know such as ``x-*``,
``example``, ``discriminator``, ``nullable``) stay true. Those that read which keys are present
together (``minProperties``, ``dependentRequired``...), the value whole (``enum``, ``const``) or the
same value another way (``allOf``, ``anyOf``, ``not``, conditionals...) might not: an object
holding one is left as it is.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

__all__ = ["DATA", "ROOT_ONLY", "matched", "notes_only", "shape_ok", "takes_no_null", "takes_null_surely"]

# Keywords whose value is data, never a schema: nothing in it is a keyword, a `$ref` or a base URI.
DATA = frozenset({"default", "examples", "example", "const", "enum"})

# Every keyword of drafts 3 to 2020-12 that a validator reads.
_KNOWN = frozenset(
    {
        "$ref", "$schema", "$id", "id", "$anchor", "$dynamicRef", "$dynamicAnchor", "$recursiveRef",
        "$recursiveAnchor", "$vocabulary", "$defs", "definitions",
        "type", "enum", "const", "properties", "patternProperties", "additionalProperties",
        "unevaluatedProperties", "propertyNames", "required", "minProperties", "maxProperties",
        "dependencies", "dependentRequired", "dependentSchemas",
        "items", "prefixItems", "additionalItems", "unevaluatedItems", "contains", "minContains",
        "maxContains", "minItems", "maxItems", "uniqueItems",
        "allOf", "anyOf", "oneOf", "not", "if", "then", "else", "extends", "disallow",
        "format", "minLength", "maxLength", "pattern", "minimum", "maximum", "exclusiveMinimum",
        "exclusiveMaximum", "multipleOf", "divisibleBy", "contentEncoding", "contentMediaType",
    }
)  # fmt: skip
# Known keywords an object or array schema may hold and still change (its optionals nullable, the
# values of its properties, map and items changed): what a dropped null leaves true. Strings' and
# numbers' keywords say nothing of objects and arrays. `patternProperties` only with `matched`.
_SHAPE = frozenset(
    {
        "type", "properties", "required", "additionalProperties", "maxProperties", "propertyNames",
        "unevaluatedProperties", "patternProperties", "items", "minItems", "maxItems",
        "format", "minLength", "maxLength", "pattern", "minimum", "maximum", "exclusiveMinimum",
        "exclusiveMaximum", "multipleOf", "divisibleBy", "contentEncoding", "contentMediaType",
    }
)  # fmt: skip
# Known keywords that say nothing at the root of the arguments: its draft, its base URI (which a
# `#/...` reference still reads the document by) and where its definitions sit.
ROOT_ONLY = frozenset({"$schema", "$id", "id", "$vocabulary", "$defs", "definitions"})


def shape_ok(node: dict[str, Any], *, root: bool) -> bool:
    """Whether the object or array schema `node` holds no keyword a dropped null could make fail."""
    blocking = node.keys() & _KNOWN
    blocking -= _SHAPE | ROOT_ONLY if root else _SHAPE
    return not blocking and not isinstance(node.get("required", []), bool)


def matched(names: Iterable[str], patterns: Any) -> frozenset[str]:
    """The `names` some of the `patterns` (``patternProperties``' keys) matches: their values are
    read by those schemas too. All of them where a pattern cannot be read here."""
    names = frozenset(names)
    if not isinstance(patterns, dict) or not patterns:
        return frozenset()
    try:
        compiled = [re.compile(pattern) for pattern in patterns]
    except (re.error, TypeError):
        return names
    return frozenset(name for name in names if any(each.search(name) for each in compiled))


def takes_no_null(body: dict[str, Any]) -> bool:
    """Whether `body` surely refuses null by its own ``type``, ``enum`` or ``const`` (False: ask a
    validator). Not with a `$ref` beside them (drafts before 2019-09 ignore its siblings)."""
    if "$ref" in body:
        return False
    kind = body.get("type")
    if isinstance(kind, str) and kind not in ("null", "any"):
        return True
    if isinstance(kind, list) and kind and all(isinstance(each, str) for each in kind):
        return "null" not in kind and "any" not in kind
    if "enum" in body and isinstance(body["enum"], list):
        return all(each is not None for each in body["enum"])
    return "const" in body and body["const"] is not None


def notes_only(node: dict[str, Any], besides: str) -> bool:
    """Whether `node` holds no keyword a validator reads but `besides`: only annotations and
    keywords it does not know (``x-*``, ``discriminator``, ``nullable``)."""
    return not (node.keys() - {besides}) & _KNOWN


def takes_null_surely(body: dict[str, Any]) -> bool:
    """Whether `body` is surely a union with null: ``anyOf`` with a plain ``{"type": "null"}``
    among its options and nothing else a validator reads (False: ask a validator)."""
    options = body.get("anyOf")
    return (
        isinstance(options, list) and notes_only(body, "anyOf") and any(_plain_null(each) for each in options)
    )


def _plain_null(option: Any) -> bool:
    return isinstance(option, dict) and option.get("type") == "null" and notes_only(option, "type")
