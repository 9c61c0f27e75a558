"""Agent ids: ``namespace:type:instance``."""

from __future__ import annotations

import re
from typing import NamedTuple

from reach_adapters.errors import InvalidDeclarationError

__all__ = ["AgentId", "agent_id_part", "parse_agent_id"]

_PART = r"[A-Za-z0-9][A-Za-z0-9_.\-]{0,63}"
_AGENT_ID = re.compile(rf"^({_PART}):({_PART}):({_PART})$")
_NOT_IN_PART = re.compile(r"[^A-Za-z0-9_.\-]+")


class AgentId(NamedTuple):
    """Namespace scopes visibility, type groups replicas, instance is one running copy."""

    namespace: str
    type: str
    instance: str

    def __str__(self) -> str:
        return f"{self.namespace}:{self.type}:{self.instance}"

    @property
    def kind(self) -> str:
        """``namespace:type``: what recursive-reach lineage compares."""
        return f"{self.namespace}:{self.type}"


def parse_agent_id(value: object) -> AgentId:
    """Parse and validate an agent id, raising `InvalidDeclarationError` with an example."""
    if not isinstance(value, str):
        msg = f"agent id must be a string like 'legal:contract-review:01', got {type(value).__name__}"
        raise InvalidDeclarationError(msg)
    match = _AGENT_ID.match(value)
    if match is None:
        msg = (
            f"agent id {value!r} is not 'namespace:type:instance' (each part letters, digits, "
            "'_', '.', '-', starting with a letter or digit), e.g. 'legal:contract-review:01'"
        )
        raise InvalidDeclarationError(msg)
    return AgentId(*match.groups())


def agent_id_part(source: str, default: str) -> str:
    """`source` (a server's or a card's name) made one part of an agent id: each run of other
    characters a '-', no '-', '_' or '.' at the ends, at most 64 characters; `default` if empty."""
    return _NOT_IN_PART.sub("-", source).strip("-._")[:64] or default
