"""What an agent declares it can do."""

from __future__ import annotations

import operator
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    PrivateAttr,
    SerializerFunctionWrapHandler,
    ValidationError,
    field_validator,
    model_serializer,
    model_validator,
)

from reach_adapters.errors import InvalidDeclarationError, describe_validation_error
from reach_adapters.router.schemas import NAMED, CompiledSchema, check_schema, compiled_validator, schema_key

__all__ = ["Capability", "Trigger", "cautious", "validate_capabilities"]

TriggerOp = Literal["eq", "ne", "gt", "ge", "lt", "le", "in", "not_in", "contains", "exists"]

_COMPARE: dict[str, Callable[[Any, Any], bool]] = {
    "eq": operator.eq,
    "ne": operator.ne,
    "gt": operator.gt,
    "ge": operator.ge,
    "lt": operator.lt,
    "le": operator.le,
    "in": lambda a, b: a in b,
    "not_in": lambda a, b: a not in b,
    "contains": lambda a, b: b in a,
}
_MISSING = object()
_WORD = re.compile(r"[^\W_]")


class Trigger(BaseModel):
    """A declarative condition on ``meta_info.attributes``: ``{field, op, value}``."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    field: str = Field(min_length=1)
    op: TriggerOp = "eq"
    value: JsonValue = None

    def test(self, attributes: Mapping[str, Any]) -> bool:
        actual = attributes.get(self.field, _MISSING)
        if self.op == "exists":
            return (actual is not _MISSING) is bool(self.value if self.value is not None else True)
        if actual is _MISSING:
            return False
        try:
            return bool(_COMPARE[self.op](actual, self.value))
        except TypeError:
            # Comparing unlike types (a string against a number) is a miss, not a crash.
            return False


class Capability(BaseModel):
    """One thing an agent can do, with the limits the router enforces for it."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    name: str = Field(min_length=1, max_length=128, pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.\-/]*$")
    description: str = ""
    input_schema: dict[str, Any] = Field(default_factory=lambda: {"type": "object"})
    output_schema: dict[str, Any] | None = None
    keywords: list[str] = Field(default_factory=list)
    strict_keywords: list[str] = Field(default_factory=list)
    triggers: list[Trigger] = Field(default_factory=list)
    examples: list[str] = Field(default_factory=list)
    version: str = Field("1", min_length=1, max_length=64)
    timeout_ms: int = Field(30_000, gt=0, le=86_400_000)
    max_concurrency: int = Field(16, ge=1, le=1_000_000)
    weight: float = Field(50.0, ge=0, le=1_000_000)
    idempotent: bool = False
    read_only: bool = False
    destructive: bool = False
    open_world: bool = Field(
        True, description="It may reach systems outside its own (the web, other services), as MCP assumes."
    )
    compensable: bool = False
    compensate_with: str | None = Field(
        None,
        min_length=1,
        max_length=128,
        pattern=r"^[A-Za-z0-9_][A-Za-z0-9_.\-/]*$",
        description="The capability that undoes this one's work (a saga's compensation); implies "
        "compensable. It is given {task_id, capability, input, output} of the call to undo.",
    )
    preferred_source: list[str] = Field(default_factory=list)
    title: str | None = Field(None, description="A human-readable name, for tool lists.")
    icons: list[dict[str, JsonValue]] = Field(default_factory=list, description="Icons, in MCP's form.")
    meta: dict[str, JsonValue] = Field(
        default_factory=dict,
        description="Metadata an adapter passes on untouched, such as an MCP tool's `_meta`.",
    )

    _input_key: str = PrivateAttr("")
    _input_open: bool = PrivateAttr(True)
    _object_only: bool = PrivateAttr(False)
    _output_key: str | None = PrivateAttr(None)

    def __init__(self, /, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            name = data.get("name", "?")
            msg = f"capability {name!r}: {describe_validation_error(exc)}"
            raise InvalidDeclarationError(msg) from None

    @model_validator(mode="before")
    @classmethod
    def _compensable(cls, data: Any) -> Any:
        """A capability that names its undo is compensable, whatever a copied declaration said."""
        if isinstance(data, dict) and data.get("compensate_with") is not None:
            data = {**data, "compensable": True}
        return data

    @field_validator("keywords", "strict_keywords")
    @classmethod
    def _has_words(cls, keywords: list[str]) -> list[str]:
        for keyword in keywords:
            if not _WORD.search(keyword):
                msg = f"keyword {keyword!r} has no letter or digit, so it could never match a word"
                raise ValueError(msg)
        return keywords

    def model_copy(self, *, update: Mapping[str, Any] | None = None, deep: bool = False) -> Self:
        """A copy; with `update`, a new declaration checked (and its schemas compiled) like any other.

        Built from the fields the declaration gave, not from all: an input schema left to its
        default stays a default, which takes any payload (see `object_only`).
        """
        if not update:
            return super().model_copy(deep=deep)
        given = {name: getattr(self, name) for name in self.model_fields_set}
        return type(self)(**{**given, **update})

    @model_serializer(mode="wrap")
    def _dump(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        """The declaration as data, without an input schema it did not give: rebuilt from its dump
        (another node's lease, a catalog read back), it takes what this one takes."""
        data: dict[str, Any] = handler(self)
        if "input_schema" not in self.model_fields_set:
            data.pop("input_schema", None)
        return data

    def model_post_init(self, context: Any, /) -> None:
        for field in ("input_schema", "output_schema"):
            schema = getattr(self, field)
            if schema is None:
                continue
            problem = check_schema(schema)
            if problem is not None:
                msg = f"capability {self.name!r}: field '{field}' is not a valid JSON Schema: {problem}"
                raise InvalidDeclarationError(msg)
        self._input_key = schema_key(self.input_schema)
        # Schemas that accept any object get no validator: at most a type check (`object_only`).
        self._input_open = self.input_schema in ({}, {"type": "object"})
        given = "input_schema" in self.model_fields_set
        self._object_only = given and self.input_schema == {"type": "object"}
        self._output_key = None if self.output_schema is None else schema_key(self.output_schema)

    @property
    def input_validator(self) -> CompiledSchema:
        return compiled_validator(self._input_key)

    @property
    def checks_input(self) -> bool:
        """Whether payloads go through the input schema's validator (never for an open object)."""
        return not self._input_open

    @property
    def object_only(self) -> bool:
        """Whether the declaration gave its input schema as exactly ``{"type": "object"}``: it takes
        any JSON object and nothing else, checked by type alone. The default schema (none given)
        is the same text but takes any payload, as capabilities declared without one always did."""
        return self._object_only

    @property
    def safe_to_repeat(self) -> bool:
        """Whether a task may reach this capability twice: it is idempotent or only reads."""
        return self.idempotent or self.read_only

    @property
    def output_validator(self) -> CompiledSchema | None:
        return None if self._output_key is None else compiled_validator(self._output_key)

    def says_destructive(self) -> bool:
        """Whether it said whether it destroys: ``destructive`` defaults to false, which is not
        saying (MCP assumes a tool that may write is destructive unless told otherwise)."""
        return self.destructive or self.read_only or "destructive" in self.model_fields_set

    def same_schemas(self, other: Capability) -> bool:
        """Whether both take and give the same shapes: replicas, not namesakes. Titles,
        descriptions and examples may differ (one replica a version ahead in its docs). An object
        schema given and one left to its default are not the same: one refuses a text the other takes."""
        if self._object_only is not other._object_only:
            return False
        if self._input_key == other._input_key and self._output_key == other._output_key:
            return True
        same_input = _shape(self.input_schema) == _shape(other.input_schema)
        return bool(same_input and _shape(self.output_schema) == _shape(other.output_schema))

    def triggers_match(self, attributes: Mapping[str, Any]) -> bool:
        return all(trigger.test(attributes) for trigger in self.triggers)


def validate_capabilities(
    agent_id: str, capabilities: Sequence[Capability | Mapping[str, Any]], *, allow_empty: bool = False
) -> tuple[Capability, ...]:
    """Build and check an agent's declarations; errors name the agent, capability and field.

    ``allow_empty`` is for agents that declare later (an MCP server that lists no tools for now).
    """
    if isinstance(capabilities, str | bytes | Mapping) or not isinstance(capabilities, Sequence):
        msg = (
            f"agent {agent_id}: capabilities must be a list of Capability, got {type(capabilities).__name__}"
        )
        raise InvalidDeclarationError(msg)
    if not capabilities and not allow_empty:
        msg = f"agent {agent_id}: declares no capabilities; give at least one Capability"
        raise InvalidDeclarationError(msg)
    built: list[Capability] = []
    seen: set[str] = set()
    for item in capabilities:
        try:
            cap = item if isinstance(item, Capability) else _from_mapping(item)
        except InvalidDeclarationError as exc:
            msg = f"agent {agent_id}: {exc}"
            raise InvalidDeclarationError(msg) from None
        if cap.name in seen:
            msg = f"agent {agent_id}: capability {cap.name!r} is declared twice; give each a unique name"
            raise InvalidDeclarationError(msg)
        seen.add(cap.name)
        built.append(cap)
    return tuple(built)


def _from_mapping(item: object) -> Capability:
    if not isinstance(item, Mapping):
        msg = f"a capability must be a Capability or a dict, got {type(item).__name__}"
        raise InvalidDeclarationError(msg)
    return Capability(**item)


# Keywords that annotate a schema without changing what it accepts.
_ANNOTATIONS = frozenset({"title", "description", "examples", "example", "$comment", "default", "deprecated"})


def _shape(schema: Any) -> Any:
    """`schema` without its annotations: what it accepts, for comparing declarations."""
    if isinstance(schema, list):
        return [_shape(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    shaped: dict[str, Any] = {}
    for key, value in schema.items():
        if key in _ANNOTATIONS:
            continue
        if key in NAMED and isinstance(value, dict):
            shaped[key] = {name: _shape(sub) for name, sub in value.items()}
        else:
            shaped[key] = _shape(value)
    return shaped


def cautious(declarations: Sequence[Capability]) -> Capability:
    """One declaration standing for several replicas of a capability, with the most cautious of
    their flags: read-only and idempotent only if all are, destructive and open world if any is;
    silent on destructiveness when one replica is."""
    first = declarations[0]
    flags = {
        "read_only": all(cap.read_only for cap in declarations),
        "idempotent": all(cap.idempotent for cap in declarations),
        "destructive": any(cap.destructive for cap in declarations),
        "open_world": any(cap.open_world for cap in declarations),
    }
    says = all(cap.says_destructive() for cap in declarations)
    if all(getattr(first, key) == value for key, value in flags.items()) and first.says_destructive() == says:
        return first
    merged = first.model_copy(update=flags)
    if not says:
        # Not knowing is more cautious than "not destructive": clients then ask before a call.
        merged.model_fields_set.discard("destructive")
    return merged
