"""What a runnable asks of a call's ``configurable``, read once from the runnable at registration.

A `RunnableWithMessageHistory` cannot run without its history ids (``session_id``), a
``configurable_alternatives`` option takes only the keys it was given, and a
``configurable_fields`` field only values of its type. Without these checks the
runnable raises ``ValueError`` mid-run, which the router would blame on the agent (and two such
calls would quarantine it) though the caller's configurable was at fault.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Annotated, Any, Literal

from langchain_core.runnables import Runnable, RunnableConfig, RunnableSequence
from langchain_core.runnables.configurable import RunnableConfigurableFields
from langchain_core.runnables.utils import ConfigurableField, ConfigurableFieldMultiOption
from pydantic import JsonValue, PydanticUserError, TypeAdapter, ValidationError

from reach_adapters.errors import InvalidMessageError
from reach_adapters.langchain.graphs import unwrap
from reach_adapters.langchain.held import every_runnable

__all__ = ["Configurables"]

logger = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class Configurables:
    """The ``configurable`` ids every call must carry (`required`), and the values each option
    with a fixed set of them takes (`choices`)."""

    required: tuple[str, ...]
    choices: Mapping[str, frozenset[str]]
    # What each other ``configurable_fields`` field takes (a float, a list of options, ...).
    types: Mapping[str, TypeAdapter[Any]]

    @classmethod
    def of(cls, runnable: Runnable[Any, Any], base: RunnableConfig, agent_id: str) -> Configurables | None:
        """The rules of `runnable`, None when it asks nothing of ``configurable`` (no per-call work).

        Ids its base config or a binding (`.with_config(configurable=...)`) gives are not required
        of the caller; when any remain, registration warns, as every call must then carry them.
        """
        required = tuple(sorted(_missing_ids(runnable, frozenset(base.get("configurable", {})))))
        choices = _choices(runnable)
        types = _field_types(runnable, choices)
        if required:
            logger.warning(
                "agent %s keeps a chat history per %s (a RunnableWithMessageHistory): each call "
                "must carry configurable={%s}, or it is refused",
                agent_id,
                ", ".join(required),
                ", ".join(f"{key!r}: ..." for key in required),
            )
        return cls(required, choices, types) if required or choices or types else None

    def check(self, configurable: Mapping[str, Any], asked: Mapping[str, Any] | None, agent_id: str) -> None:
        """Refuse a run whose `configurable` lacks a required id, or a call whose own
        configurable (`asked`) gives an option a value it does not take."""
        missing = [key for key in self.required if key not in configurable]
        if missing:
            wanted = ", ".join(f"{key!r}: ..." for key in missing)
            msg = (
                f"agent {agent_id} keeps a chat history per {', '.join(missing)} (a "
                f"RunnableWithMessageHistory): call it with configurable={{{wanted}}}"
            )
            needed: dict[str, JsonValue] = {key: f"<{key}>" for key in missing}
            raise InvalidMessageError(msg, fix_options={"configurable": needed})
        for key, value in (asked or {}).items():
            allowed = self.choices.get(key)
            if allowed is not None and not (isinstance(value, str) and value in allowed):
                msg = (
                    f"configurable[{key!r}] is {value!r}, which agent {agent_id} does not offer; "
                    f"give one of {sorted(allowed)} or leave it out for the default"
                )
                raise InvalidMessageError(msg)
            adapter = self.types.get(key)
            if adapter is not None:
                try:
                    adapter.validate_python(value)
                except PydanticUserError:
                    continue  # a type pydantic could not build after all: left to LangChain
                except ValidationError as exc:
                    problem = exc.errors()[0]["msg"]
                    msg = (
                        f"configurable[{key!r}] is {value!r}, which agent {agent_id} does not take "
                        f"({problem}); give a value of its type or leave it out for the default"
                    )
                    raise InvalidMessageError(msg) from None


def _missing_ids(runnable: Runnable[Any, Any], given: frozenset[str]) -> set[str]:
    """The ids of the `RunnableWithMessageHistory` runnables in `runnable` (its
    ``history_factory_config``, which LangChain refuses to run without) that no config gives:
    not `given`, nor a binding (`.with_config(configurable=...)`) around the history, which may
    sit inside a chain's step."""
    missing: set[str] = set()
    for layer in unwrap(runnable):
        bound = getattr(layer, "config", None)
        if isinstance(bound, Mapping) and isinstance(bound.get("configurable"), Mapping):
            given = given | set(bound["configurable"])
        specs = getattr(layer, "history_factory_config", None)
        if isinstance(specs, list):
            missing |= {spec.id for spec in specs} - given
        if isinstance(layer, RunnableSequence):
            for step in layer.steps:
                missing |= _missing_ids(step, given)
    return missing


def _choices(runnable: Runnable[Any, Any]) -> dict[str, frozenset[str]]:
    """The options with a fixed set of values (``configurable_alternatives``, a single-option
    field), each with its values."""
    try:
        specs = runnable.config_specs
    except Exception:  # noqa: BLE001 - a runnable that cannot list its options is left unchecked
        return {}
    return {
        spec.id: frozenset(str(member.value) for member in spec.annotation)
        for spec in specs
        if isinstance(spec.annotation, type) and issubclass(spec.annotation, Enum)
    }


def _field_types(
    runnable: Runnable[Any, Any], choices: Mapping[str, frozenset[str]]
) -> dict[str, TypeAdapter[Any]]:
    """What each field of a ``configurable_fields`` takes, with its constraints (``ge``, ...),
    but those with a fixed set of values (`choices`): LangChain builds the runnable with the
    caller's value, and one it refuses raises mid-run. Only these fields: others' ids (a graph's
    ``thread_id``) take what they take."""
    types: dict[str, TypeAdapter[Any]] = {}
    for layer in every_runnable(runnable):
        if not isinstance(layer, RunnableConfigurableFields):
            continue
        declared = getattr(type(layer.default), "model_fields", {})
        for name, field in layer.fields.items():
            if field.id in choices or field.id in types:
                continue
            info = declared.get(name)
            if isinstance(field, ConfigurableField) and info is not None:
                annotation: Any = Annotated[info.annotation, info]
            elif isinstance(field, ConfigurableFieldMultiOption):
                annotation = Sequence[Literal[tuple(field.options)]]  # type: ignore[misc]
            else:
                continue
            try:
                types[field.id] = TypeAdapter(annotation)
            except Exception as exc:  # noqa: BLE001 - a type pydantic cannot check is left unchecked
                logger.debug("configurable[%r] of %r is left unchecked: %r", field.id, runnable, exc)
    return types
