"""Allow lists: which capabilities, namespaces and agents a principal may reach."""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Sequence

from reach_adapters.security.spec import Allow

__all__ = ["Globs", "Permissions"]


class Globs:
    """Shell-style globs compiled into one pattern, matched case-sensitively."""

    __slots__ = ("globs", "pattern")

    def __init__(self, globs: Sequence[str]) -> None:
        self.globs = list(globs)
        joined = "|".join(f"(?:{fnmatch.translate(glob)})" for glob in globs) or "(?!)"
        self.pattern = re.compile(joined)

    def match(self, value: str) -> bool:
        return self.pattern.match(value) is not None


class Permissions:
    """One principal's `Allow`, compiled once, answering "may it reach this?" with the rule that
    says no."""

    def __init__(self, principal: str, allow: Allow) -> None:
        self.principal = principal
        self._capabilities = None if allow.capabilities is None else Globs(allow.capabilities)
        self._namespaces = None if allow.namespaces is None else Globs(allow.namespaces)
        self._agents = None if allow.agents is None else Globs(allow.agents)
        # Asked on every call's admission: settled once.
        self._nothing = self._reaches_nothing(allow)

    def nothing(self) -> str | None:
        """The rule when the principal may reach nothing at all, else None."""
        return self._nothing

    def _reaches_nothing(self, allow: Allow) -> str | None:
        if allow.empty:
            return f"principal {self.principal!r} has no 'allow' in security.yaml, so it may reach nothing"
        for field, globs in (
            ("capabilities", self._capabilities),
            ("namespaces", self._namespaces),
            ("agents", self._agents),
        ):
            if globs is not None and not globs.globs:
                return (
                    f"allow.{field} of principal {self.principal!r} is empty in security.yaml, "
                    "so it may reach nothing"
                )
        return None

    def capability(self, name: str) -> str | None:
        """The rule refusing capability `name` whatever agent serves it, or None."""
        return self.nothing() or self._refused("capabilities", self._capabilities, name)

    def forbids(self, capability: str, agent_id: str, namespace: str) -> str | None:
        """The rule refusing `capability` on agent `agent_id` of `namespace`, or None.

        The rule names the capability (the caller's own word) but never the agent or namespace: a
        principal learns nothing from a refusal about agents it may not reach.
        """
        return (
            self.capability(capability)
            or self._refused(
                "namespaces", self._namespaces, namespace, "the namespace of any agent serving it"
            )
            or self._refused("agents", self._agents, agent_id, "any agent serving it")
        )

    def _refused(self, field: str, globs: Globs | None, value: str, shown: str | None = None) -> str | None:
        if globs is None or globs.match(value):
            return None
        shown = shown or repr(value)
        return f"allow.{field} {globs.globs} of principal {self.principal!r} does not match {shown}"
