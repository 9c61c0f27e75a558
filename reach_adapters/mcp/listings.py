"""The listings of several upstream MCP servers made one, as the router's MCP server serves them:
each resource or template once, as the first server (in the router's order) lists it, and which
templates could make a URI."""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import TypeVar

from mcp.types import ResourceTemplate

from reach_adapters.mcp.agent import MCPServerAgent

__all__ = ["Merged", "has_template", "makes"]

logger = logging.getLogger(__name__)

T = TypeVar("T")

_EXPRESSION = re.compile(r"\{[^{}]*\}")


class Merged:
    """Merges listings, warning once for each pair of servers of two names that list one item."""

    def __init__(self) -> None:
        self._shared: set[tuple[str, str, str]] = set()

    def first_of(
        self, listed: dict[str, list[T]], agents: list[MCPServerAgent], key: Callable[[T], str], what: str
    ) -> list[T]:
        """Each item once, as the first server (in the router's order) lists it; a warning when
        servers of two names list one (replicas list theirs alike)."""
        served: dict[str, tuple[T, str]] = {}
        for agent in agents:
            server = agent.name
            for item in listed.get(agent.agent_id, ()):
                first_seen = served.setdefault(key(item), (item, server))
                if first_seen[1] != server:
                    self._warn_shared(key(item), what, first_seen[1], server)
        return [item for item, _ in served.values()]

    def _warn_shared(self, uri: str, what: str, first_server: str, later: str) -> None:
        if (first_server, later, what) not in self._shared:
            self._shared.add((first_server, later, what))
            logger.warning(
                "MCP servers %r and %r both list the %s %r (and maybe more): the first's is the one "
                "served (the other's only where a tool of %r linked it); give one of them its own "
                "URIs, or serve them apart",
                first_server,
                later,
                what,
                uri,
                later,
            )


def makes(templates: Iterable[ResourceTemplate], uri: str) -> bool:
    """Whether one of `templates` (RFC 6570) could expand to `uri`: each expression matches any text."""
    return any(_pattern(template.uri_template).fullmatch(uri) for template in templates)


@lru_cache(maxsize=1024)
def _pattern(template: str) -> re.Pattern[str]:
    return re.compile(".*".join(re.escape(part) for part in _EXPRESSION.split(template)), re.DOTALL)


def has_template(templates: Iterable[ResourceTemplate], uri_template: str) -> bool:
    return any(template.uri_template == uri_template for template in templates)
