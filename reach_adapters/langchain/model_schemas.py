"""Tool schemas as every major model provider takes them for strict function calling.

The schemas models are shown are only adjusted where strict checks (OpenAI strict mode, Gemini)
would refuse them; the tool's arguments are still checked against the capability's own schema.
"""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Iterator
from typing import Any

from reach_adapters.langchain.chat_schemas import MESSAGE_SCHEMA, MODEL_MESSAGE_SCHEMA, model_message_list
from reach_adapters.langchain.nested_nulls import Nulls, nullable_optionals
from reach_adapters.langchain.schema_keywords import DATA
from reach_adapters.langchain.schema_refs import CUT, Path, pointer
from reach_adapters.router import DEFINITIONS, NAMED

__all__ = ["for_models", "shown_to_models"]


def shown_to_models(schema: dict[str, Any]) -> tuple[dict[str, Any], Nulls | None]:
    """The arguments schema `schema` as models are shown it (`for_models`, its optionals nullable
    where `nested_nulls` says), and where the nulls a model sends for those are dropped. Worked
    out once for each schema (replicas and the toolkit's every `get_tools` share it); each caller
    gets a copy of its own."""
    try:
        key = json.dumps(schema, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):  # not JSON: nothing to share it with
        return nullable_optionals(for_models(schema), schema)
    text, nulls = _worked_out.get(key)
    shown: dict[str, Any] = json.loads(text)
    return shown, nulls


def _work_out(text: str) -> tuple[str, Nulls | None]:
    schema = json.loads(text)
    shown, nulls = nullable_optionals(for_models(schema), schema)
    return json.dumps(shown, separators=(",", ":")), nulls


class _WorkedOut:
    """Schemas worked out, by their text, the least recently used dropped first once the texts
    kept pass `budget` characters: bounded by size, not count, so a few large schemas (21 KiB
    each is common for a graph's state) cannot hold hundreds of MiB, and many small ones all stay.
    Tool lists change (an MCP server's), so this serves a long-running gateway too."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.size = 0
        self._entries: OrderedDict[str, tuple[str, Nulls | None]] = OrderedDict()
        # get_tools may run in several threads (a sync agent's, say).
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: str) -> tuple[str, Nulls | None]:
        with self._lock:
            found = self._entries.get(key)
            if found is not None:
                self._entries.move_to_end(key)
                return found
        found = _work_out(key)
        size = len(key) + len(found[0])
        if size > self.budget:
            return found
        with self._lock:
            if key not in self._entries:
                self._entries[key] = found
                self.size += size
                while self.size > self.budget:
                    dropped, (text, _) = self._entries.popitem(last=False)
                    self.size -= len(dropped) + len(text)
        return found


# 16 Mi characters of schema text, the schemas and their shown forms together: about 8,000
# schemas of 1 KiB, or 380 of 21 KiB.
_worked_out = _WorkedOut(16 * 1024 * 1024)


def for_models(schema: dict[str, Any]) -> dict[str, Any]:
    """`schema` as strict function calling (OpenAI strict mode, Gemini) takes it: every array
    declares its items (a tuple's as any of its members), a `$ref` that would close a cycle (to
    a definition of either draft, the root ``#``, or any JSON pointer into the schema such as
    zod-to-json-schema's ``#/properties/tree``) is a plain object instead, and a chat message
    takes the role/content form only (a graph's messages a list of them), and an arguments
    object of any shape says it has no named properties. The arguments are still checked
    against the capability's own schema."""
    sites = {site: (target, defs_at) for site, target, defs_at in _ref_sites(schema, (), -1)}
    out: dict[str, Any] = _fix(schema, (), _cuts(sites))
    if out.get("type") == "object" and "properties" not in out:
        # LangChain reads a tool's arguments from them (`BaseTool.args`), and OpenAI refuses an
        # object without them; LangChain's own tools of no arguments say `{}` too (its Gemini
        # integration leaves an empty one out, as Gemini refuses it).
        out["properties"] = {}
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
    target = pointer(node.get("$ref"))
    if target is not None:
        yield path, target, defs_at
    for key, value in node.items():
        if key in DATA:
            continue
        if key in NAMED and isinstance(value, dict):
            inner = len(path) if key in DEFINITIONS else defs_at
            for name, body in value.items():
                yield from _ref_sites(body, (*path, key, name), inner)
        else:
            yield from _ref_sites(value, (*path, key), defs_at)


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

    # Depth first with a stack of its own: a chain of references thousands long (one definition
    # using the next) would pass Python's recursion limit and lose every tool.
    for start in [*under(()), *sites]:
        if start in done:
            continue
        inside.add(start)
        stack = [(start, iter(following[start]))]
        while stack:
            site, pending = stack[-1]
            reached = next((each for each in pending if each in inside or each not in done), None)
            if reached is not None and reached not in inside:
                inside.add(reached)
                stack.append((reached, iter(following[reached])))
                continue
            if reached is not None:
                cut.add(site)
            stack.pop()
            inside.discard(site)
            done.add(site)
    return cut


def _fix(node: Any, path: Path, cut: set[Path]) -> Any:
    """The schema `node` at `path` with the `cut` references plain objects, every array's items
    declared and chat messages in their role/content form."""
    if isinstance(node, list):
        return [_fix(item, (*path, str(index)), cut) for index, item in enumerate(node)]
    if not isinstance(node, dict):
        return node
    if path in cut:
        return dict(CUT)
    if node == MESSAGE_SCHEMA:
        return dict(MODEL_MESSAGE_SCHEMA)
    node = model_message_list(node) or node
    out = {
        key: {name: _fix(body, (*path, key, name), cut) for name, body in value.items()}
        if key in NAMED and isinstance(value, dict)
        else value
        if key in DATA
        else _fix(value, (*path, key), cut)
        for key, value in node.items()
    }
    kinds = node.get("type")
    if (kinds == "array" or (isinstance(kinds, list) and "array" in kinds)) and "items" not in node:
        members = out.get("prefixItems")
        out["items"] = {"anyOf": members} if isinstance(members, list) and members else {}
    return out
