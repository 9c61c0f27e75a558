"""Parse one YAML or JSON file, keeping where each value sits so errors can name the line."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml
from yaml.nodes import MappingNode, Node, ScalarNode, SequenceNode

from reach_adapters.config.errors import ConfigFileError

__all__ = ["Document", "Loc", "parse_document"]

Loc = Sequence[str | int]

# Merge keys may repeat by design; they are not duplicate fields.
_MERGE_KEY = "<<"


@dataclass(frozen=True, slots=True)
class Document:
    """A parsed file: its data and, when the text could be composed, its node tree for lines."""

    path: Path
    data: Any
    root: Node | None

    def line_of(self, loc: Loc) -> int | None:
        """The 1-based line of the deepest part of `loc` present in the file (a key's own line)."""
        node = self.root
        if node is None:
            return None
        line = node.start_mark.line + 1
        for part in loc:
            if isinstance(node, MappingNode):
                match = next(
                    ((k, v) for k, v in node.value if isinstance(k, ScalarNode) and k.value == str(part)),
                    None,
                )
                if match is None:
                    return line
                line = match[0].start_mark.line + 1
                node = match[1]
            elif isinstance(node, SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value):
                node = node.value[part]
                line = node.start_mark.line + 1
            else:
                return line
        return line

    def error(self, loc: Loc, problem: str) -> ConfigFileError:
        field = ".".join(str(part) for part in loc) or None
        return ConfigFileError(self.path, problem, line=self.line_of(loc), field=field)


def parse_document(path: Path, raw: bytes) -> Document:
    """Parse `raw` as JSON (``.json``) or YAML (anything else); syntax errors name the line."""
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        msg = f"is not UTF-8 text (byte {exc.start}); save it as UTF-8"
        raise ConfigFileError(path, msg) from None
    if path.suffix == ".json":
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            msg = f"invalid JSON: {exc.msg} (column {exc.colno})"
            raise ConfigFileError(path, msg, line=exc.lineno) from None
        # JSON is YAML's flow style, so composing it yields the lines; JSON allows tabs between
        # tokens where YAML does not, and a tab is never inside a JSON string.
        root = _compose(path, text.replace("\t", " "), strict=False)
    else:
        root = _compose(path, text, strict=True)
        data = _construct(path, text)
    if root is not None:
        _reject_duplicate_keys(path, root)
    return Document(path, data, root)


def _compose(path: Path, text: str, *, strict: bool) -> Node | None:
    try:
        node: Node | None = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        if not strict:
            return None
        raise _yaml_error(path, exc) from None
    return node


def _construct(path: Path, text: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise _yaml_error(path, exc) from None


def _yaml_error(path: Path, exc: yaml.YAMLError) -> ConfigFileError:
    if isinstance(exc, yaml.MarkedYAMLError):
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        problem = exc.problem or exc.context or "syntax error"
        return ConfigFileError(path, f"invalid YAML: {problem}", line=line)
    return ConfigFileError(path, f"invalid YAML: {exc}")


def _reject_duplicate_keys(path: Path, node: Node) -> None:
    """A key given twice silently keeps the last value in both parsers; here it is an error."""
    if isinstance(node, MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            if isinstance(key, ScalarNode) and key.value != _MERGE_KEY:
                if key.value in seen:
                    msg = f"key '{key.value}' is given twice; keep one"
                    raise ConfigFileError(path, msg, line=key.start_mark.line + 1)
                seen.add(key.value)
            _reject_duplicate_keys(path, value)
    elif isinstance(node, SequenceNode):
        for item in node.value:
            _reject_duplicate_keys(path, item)
