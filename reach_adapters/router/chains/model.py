"""What a chain declares: its steps, how each step's input is made, and what the chain answers.

A chain is a capability of its own (see `ChainAgent`); its declaration is checked whole when it is
made, so a reference to a step that does not exist, a cycle, or two steps with one id are found
before anything runs, with the step and field named.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError

from reach_adapters.errors import InvalidDeclarationError, describe_validation_error
from reach_adapters.router.chains.template import Ref, Template, compile_template, references
from reach_adapters.router.policy import StrategyName

__all__ = ["Chain", "Step", "graph_problem"]

_NAME = r"^[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}$"
_CAPABILITY = r"^[A-Za-z0-9_][A-Za-z0-9_.\-/]*$"

Loc = tuple[str | int, ...]


class Step(BaseModel):
    """One step: a capability reached like any other, with its input made from a template.

    ``Step("review", "review_text", input={"text": "$steps.draft.output.text"})``. A step runs
    once every step it references (or names in `after`) has succeeded; steps that do not depend
    on each other run at the same time. The options are those of a routed call.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str = Field(pattern=r"^[A-Za-z0-9_][A-Za-z0-9_\-]{0,63}$", description="Unique in the chain.")
    capability: str = Field(min_length=1, max_length=128, pattern=_CAPABILITY)
    input: JsonValue = Field(
        "$input", description="The step's payload: JSON with $input... and $steps.<id>.output... references."
    )
    after: list[str] = Field(default_factory=list, description="Steps to wait for besides those referenced.")
    timeout_ms: int | None = Field(None, gt=0, le=86_400_000)
    version: str | None = Field(None, min_length=1, max_length=64)
    namespace: str | None = Field(None, min_length=1, max_length=256)
    strategy: StrategyName | None = Field(None, description="A selection strategy the router has.")
    fallback: list[str] = Field(default_factory=list, description="Agent ids to try when none can serve.")
    priority: int | None = Field(None, ge=0, le=9)
    attributes: dict[str, JsonValue] = Field(default_factory=dict)

    def __init__(self, step_id: str | None = None, capability: str | None = None, /, **data: Any) -> None:
        if step_id is not None:
            data["id"] = step_id
        if capability is not None:
            data["capability"] = capability
        try:
            super().__init__(**data)
        except ValidationError as exc:
            msg = f"step {data.get('id', '?')!r}: {describe_validation_error(exc)}"
            raise InvalidDeclarationError(msg) from None

    def options(self) -> dict[str, Any]:
        """The call options this step sets."""
        named = ("timeout_ms", "version", "namespace", "strategy", "priority")
        options: dict[str, Any] = {
            name: getattr(self, name) for name in named if getattr(self, name) is not None
        }
        if self.fallback:
            options["fallback"] = list(self.fallback)
        if self.attributes:
            options["attributes"] = dict(self.attributes)
        return options


class Chain(BaseModel):
    """Steps run in order of their references, as one capability named `name`.

    `output` is a template of what the chain answers (default: the last step's output);
    `input_schema` what it takes (default: any object). `timeout_ms` bounds the whole chain, its
    steps sharing what is left of it.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(pattern=_NAME, description="The chain's capability name (also its agent type).")
    steps: list[Step] = Field(min_length=1)
    output: JsonValue = Field(None, description="Template of the answer; default: the last step's output.")
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    output_schema: dict[str, Any] | None = None
    keywords: list[str] = Field(default_factory=list)
    examples: list[str] = Field(default_factory=list)
    version: str = Field("1", min_length=1, max_length=64)
    timeout_ms: int = Field(120_000, gt=0, le=86_400_000)
    max_concurrency: int = Field(16, ge=1, le=1_000_000)

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            msg = f"chain {data.get('name', '?')!r}: {describe_validation_error(exc)}"
            raise InvalidDeclarationError(msg) from None

    def model_post_init(self, context: Any, /) -> None:
        problem = graph_problem(self.steps, self.output)
        if problem is not None:
            loc, text = problem
            msg = f"chain {self.name!r}: {'.'.join(map(str, loc))}: {text}"
            raise InvalidDeclarationError(msg)

    @property
    def answer(self) -> Template:
        """The compiled output template."""
        output = self.output if self.output is not None else f"$steps.{self.steps[-1].id}.output"
        return compile_template(output)


def dependencies(step: Step, refs: list[Ref]) -> set[str]:
    """The steps `step` waits for: those its input's `refs` name and those it names in `after`."""
    return {ref.step for ref in refs if ref.step} | set(step.after)


def graph_problem(steps: Sequence[Step], output: Any) -> tuple[Loc, str] | None:
    """The first problem with the chain's steps as a whole, where it is: two steps with one id, a
    reference or `after` to no step, a malformed reference, a cycle. None when there is none."""
    ids: dict[str, int] = {}
    for index, step in enumerate(steps):
        if step.id in ids:
            return (
                "steps",
                index,
                "id",
            ), f"step id {step.id!r} is also step {ids[step.id]}'s; give each a unique id"
        ids[step.id] = index
    waits: dict[str, set[str]] = {}
    for index, step in enumerate(steps):
        try:
            refs = references(compile_template(step.input))
        except ValueError as exc:
            return ("steps", index, "input"), str(exc)
        for ref in refs:
            if ref.step is not None and ref.step not in ids:
                return ("steps", index, "input"), _unknown(ref.text, ref.step, ids)
            if ref.step == step.id:
                return (
                    "steps",
                    index,
                    "input",
                ), f"{ref.text} refers to the step itself; a step cannot use its own output"
        for name in step.after:
            if name not in ids:
                return ("steps", index, "after"), _unknown(name, name, ids)
        waits[step.id] = dependencies(step, refs)
    try:
        for ref in references(compile_template(output)):
            if ref.step is not None and ref.step not in ids:
                return ("output",), _unknown(ref.text, ref.step, ids)
    except ValueError as exc:
        return ("output",), str(exc)
    cycle = _cycle(waits)
    if cycle is not None:
        return ("steps", ids[cycle[0]]), f"steps wait for each other in a cycle: {' → '.join(cycle)}"
    return None


def _unknown(text: str, name: str, ids: dict[str, int]) -> str:
    return f"{text} names step {name!r}, which the chain does not have; its steps are {list(ids)}"


def _cycle(waits: dict[str, set[str]]) -> list[str] | None:
    """A cycle in the wait-for graph as the steps along it, first repeated at the end; or None."""
    done: set[str] = set()
    for start in waits:
        path: list[str] = []
        on_path: set[str] = set()
        stack: list[tuple[str, list[str]]] = [(start, sorted(waits[start]))]
        if start in done:
            continue
        path.append(start)
        on_path.add(start)
        while stack:
            node, pending = stack[-1]
            if not pending:
                stack.pop()
                path.pop()
                on_path.discard(node)
                done.add(node)
                continue
            nxt = pending.pop()
            if nxt in on_path:
                return [*path[path.index(nxt) :], nxt]
            if nxt not in done:
                path.append(nxt)
                on_path.add(nxt)
                stack.append((nxt, sorted(waits[nxt])))
    return None
