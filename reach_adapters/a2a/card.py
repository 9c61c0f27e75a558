"""An agent card's skills as capabilities: one per skill, named by its id."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from a2a.types.a2a_pb2 import AgentCard, AgentSkill

from reach_adapters.a2a.errors import A2ACardError, A2AOverridesError
from reach_adapters.a2a.options import A2AOptions
from reach_adapters.a2a.parts import TEXT_MEDIA_TYPE
from reach_adapters.errors import ReachError
from reach_adapters.router import Capability

__all__ = ["TEXT_INPUT", "Declared", "declare", "declare_offline", "text_only"]

# What a skill that reads only text takes: its text, as the one field a chat agent's input has.
TEXT_INPUT: dict[str, Any] = {
    "type": "object",
    "properties": {"text": {"type": "string", "description": "The message to send."}},
    "required": ["text"],
    "additionalProperties": False,
}
# Modes that are text: A2A 0.3 cards often say "text" rather than a media type.
_TEXT_MODES = frozenset({TEXT_MEDIA_TYPE, "text"})


@dataclass(frozen=True, slots=True)
class Declared:
    """The capabilities made from a card, and which of them take plain text."""

    capabilities: tuple[Capability, ...] = ()
    text_skills: frozenset[str] = field(default_factory=frozenset)
    # Each skill's timeout in seconds: a remote call is given what the router gives it.
    timeouts_s: Mapping[str, float] = field(init=False)

    def __post_init__(self) -> None:
        timeouts = {cap.name: cap.timeout_ms / 1000.0 for cap in self.capabilities}
        object.__setattr__(self, "timeouts_s", timeouts)


def text_only(modes: Sequence[str]) -> bool:
    """Whether input modes accept text and nothing else (JSON or files)."""
    return bool(modes) and all(mode.split(";")[0].strip().lower() in _TEXT_MODES for mode in modes)


def declare(
    card: AgentCard, url: str, options: A2AOptions, overrides: Mapping[str, Mapping[str, Any]]
) -> Declared:
    """One capability per skill; a card the router cannot use is an `A2ACardError` naming the
    URL and the field, and an override for a skill the card lacks names the skills it has."""
    capabilities: list[Capability] = []
    text_skills: set[str] = set()
    seen: set[str] = set()
    for index, skill in enumerate(card.skills):
        where = f"agent card at {url}: skills[{index}]"
        if not skill.id:
            msg = f"{where} ({skill.name or 'unnamed'}) has no 'id'; the agent must give each skill an id"
            raise A2ACardError(msg)
        if skill.id in seen:
            msg = f"{where}: skill id {skill.id!r} is given twice; skill ids must be unique"
            raise A2ACardError(msg)
        seen.add(skill.id)
        input_modes = list(skill.input_modes or card.default_input_modes)
        if text_only(input_modes) or not input_modes:
            text_skills.add(skill.id)
        try:
            capability = _capability(skill, card, input_modes, options, overrides.get(skill.id))
        except ReachError as exc:
            msg = f"{where} (id {skill.id!r}): {exc}"
            raise A2ACardError(msg) from None
        capabilities.append(capability)
    unknown = sorted(set(overrides) - seen)
    if unknown:
        msg = f"agent card at {url}: overrides name no skill {unknown}; its skill ids are {sorted(seen)}"
        raise A2AOverridesError(msg)
    return Declared(tuple(capabilities), frozenset(text_skills))


def declare_offline(options: A2AOptions, overrides: Mapping[str, Mapping[str, Any]]) -> Declared:
    """What an agent whose card cannot be fetched yet declares: a capability per skill its
    `overrides` name, from the fields they give (the card, once fetched, replaces them)."""
    capabilities: list[Capability] = []
    for skill, override in overrides.items():
        declared: dict[str, Any] = {"name": skill, "description": skill, **_defaults(options), **override}
        declared["name"] = skill
        try:
            capabilities.append(Capability(**declared))
        except (ReachError, ValueError) as exc:
            msg = f"overrides for skill {skill!r}: {exc}"
            raise A2AOverridesError(msg) from None
    return Declared(tuple(capabilities))


def _defaults(options: A2AOptions) -> dict[str, Any]:
    """What every skill of the agent declares unless an override says otherwise."""
    return {
        "timeout_ms": options.timeout_ms,
        "max_concurrency": options.max_concurrency,
        "weight": options.weight,
    }


def _capability(
    skill: AgentSkill,
    card: AgentCard,
    input_modes: list[str],
    options: A2AOptions,
    override: Mapping[str, Any] | None,
) -> Capability:
    output_modes = list(skill.output_modes or card.default_output_modes)
    # Without modes A2A means text: the card's defaults are text/plain unless it says otherwise.
    schema = TEXT_INPUT if text_only(input_modes) or not input_modes else {"type": "object"}
    declared: dict[str, Any] = {
        "name": skill.id,
        "description": skill.description or skill.name,
        "input_schema": schema,
        "keywords": list(skill.tags),
        "examples": list(skill.examples),
        **_defaults(options),
        "title": skill.name or None,
        "meta": {"a2a": {"input_modes": input_modes, "output_modes": output_modes}},
    }
    if override:
        declared.update(override)
        declared["name"] = skill.id
    return Capability(**declared)
