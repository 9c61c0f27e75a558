"""The optional parts of agent-reach: which extra brings which modules, and the error naming it.

The base package routes in process; the adapters, the gateway and the CLI's serving commands need
an extra. A part that needs one checks for it before importing it, so a missing extra is one
line naming the ``pip install`` to run, not a traceback from deep inside an import.
"""

from __future__ import annotations

from importlib.util import find_spec
from typing import Literal

from reach_adapters.errors import ReachError

__all__ = ["EXTRAS", "Extra", "MissingExtraError", "require_extra"]

Extra = Literal["langchain", "mcp", "metrics", "gateway", "cluster", "a2a"]

# The modules each extra of pyproject.toml brings (import names, not distribution names).
EXTRAS: dict[Extra, tuple[str, ...]] = {
    "langchain": ("langchain_core",),
    "mcp": ("mcp", "tenacity"),
    "metrics": ("prometheus_client",),
    "gateway": ("mcp", "tenacity", "httpx", "starlette", "uvicorn", "jwt"),
    "cluster": ("redis",),
    "a2a": ("a2a", "httpx"),
}


class MissingExtraError(ReachError, ImportError):
    """A part of agent-reach needs an extra that is not installed; the message names the install."""


def require_extra(extra: Extra, feature: str) -> None:
    """Raise `MissingExtraError` naming `feature` and the install when a module of `extra` is missing."""
    for module in EXTRAS[extra]:
        if find_spec(module) is None:
            install = f"pip install 'agent-reach[{extra}]'"
            msg = f"{feature} needs the '{extra}' extra ({module!r} is not installed): {install}"
            raise MissingExtraError(msg, name=module)
