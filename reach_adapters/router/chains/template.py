"""The input templates of chain steps: JSON in which a string such as ``$input.topic`` or
``$steps.draft.output.text`` stands for a value of the chain's input or of an earlier step's output.

Deliberately small: a string that is a reference as a whole is replaced by the value it names
(any JSON, not only text); every other value is taken literally; ``$$`` starts a literal string
beginning with ``$``. Paths are ``.key`` and ``[index]`` steps. No expressions, no string
interpolation: a template is data that a config file can hold and a reader can follow.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Literal

from pydantic import JsonValue

__all__ = ["Ref", "Template", "TemplateError", "compile_template", "from_input_alone", "render"]

_STEP_ID = r"[A-Za-z0-9_][A-Za-z0-9_\-]{0,63}"
_HEAD = re.compile(rf"^\$(?:(input)|steps\.({_STEP_ID})\.output)")
_PART = re.compile(r"\.([A-Za-z0-9_\-]+)|\[(\d+)\]")


@dataclass(frozen=True, slots=True)
class Ref:
    """One reference: to the chain's input (`step` None) or to a step's output, then a path."""

    text: str
    step: str | None
    path: tuple[str | int, ...]


Template = Ref | dict[str, "Template"] | list["Template"] | JsonValue


class TemplateError(ValueError):
    """A reference that names nothing in the values given (`root`: whose value lacked it)."""

    def __init__(self, ref: Ref, problem: str) -> None:
        super().__init__(f"{ref.text}: {problem}")
        self.ref = ref
        self.root: Literal["input", "steps"] = "input" if ref.step is None else "steps"


def parse_ref(text: str) -> Ref:
    """`text` (starting with ``$``) as a reference; ValueError saying what is wrong."""
    head = _HEAD.match(text)
    if head is None:
        msg = (
            f"{text!r} is not a reference: write $input, $input.field, $steps.<step id>.output or "
            "$steps.<step id>.output.field (paths go on with .key and [index]); start a literal "
            "string with $$"
        )
        raise ValueError(msg)
    path: list[str | int] = []
    at = head.end()
    while at < len(text):
        part = _PART.match(text, at)
        if part is None:
            msg = f"{text!r}: cannot read the path from {text[at:]!r}; use .key and [index] steps"
            raise ValueError(msg)
        path.append(part.group(1) if part.group(1) is not None else int(part.group(2)))
        at = part.end()
    return Ref(text, head.group(2), tuple(path))


def compile_template(value: Any) -> Template:
    """`value` with its reference strings parsed once; ValueError on a malformed one."""
    if isinstance(value, str):
        if value.startswith("$$"):
            return value[1:]
        return parse_ref(value) if value.startswith("$") else value
    if isinstance(value, dict):
        return {key: compile_template(item) for key, item in value.items()}
    if isinstance(value, list):
        return [compile_template(item) for item in value]
    return value  # type: ignore[no-any-return]


def references(template: Template) -> list[Ref]:
    """Every reference in `template`, in order."""
    if isinstance(template, Ref):
        return [template]
    if isinstance(template, dict):
        return [ref for item in template.values() for ref in references(item)]
    if isinstance(template, list):
        return [ref for item in template for ref in references(item)]
    return []


def from_input_alone(template: Template) -> bool:
    """Whether every value `template` makes comes from the chain's input: each leaf a ``$input``
    reference, no literal and no step's output (objects and lists only arrange them)."""
    if isinstance(template, Ref):
        return template.step is None
    if isinstance(template, dict):
        return bool(template) and all(from_input_alone(item) for item in template.values())
    if isinstance(template, list):
        return bool(template) and all(from_input_alone(item) for item in template)
    return False


def render(template: Template, chain_input: Any, outputs: dict[str, Any]) -> Any:
    """`template` with each reference replaced by the value it names; `TemplateError` if one
    names nothing (a missing key, an index past the end)."""
    if isinstance(template, Ref):
        return _resolve(template, chain_input if template.step is None else outputs[template.step])
    if isinstance(template, dict):
        return {key: render(item, chain_input, outputs) for key, item in template.items()}
    if isinstance(template, list):
        return [render(item, chain_input, outputs) for item in template]
    return template


def _resolve(ref: Ref, value: Any) -> Any:
    for part in ref.path:
        if isinstance(part, int):
            if not isinstance(value, list) or part >= len(value):
                size = f"a list of {len(value)}" if isinstance(value, list) else type(value).__name__
                raise TemplateError(ref, f"no item [{part}]: the value there is {size}")
            value = value[part]
        else:
            if not isinstance(value, dict) or part not in value:
                keys = f"its keys are {sorted(value)}" if isinstance(value, dict) else type(value).__name__
                raise TemplateError(ref, f"no key {part!r} ({keys})")
            value = value[part]
    return value
