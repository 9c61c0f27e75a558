"""The optional parts of agent-reach: which extra brings which modules, and the error naming it.

The base package routes in process; the adapters, the gateway and the CLI's serving commands need
an extra. A part that needs one checks for it before importing it, so a missing extra is one
line naming the ``pip install`` to run, not a traceback from deep inside an import.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from importlib.util import find_spec
from typing import Any, Literal

from reach_adapters.errors import ReachError

__all__ = ["EXTRAS", "Extra", "MissingExtraError", "lazy_names", "require_extra"]

Extra = Literal["langchain", "mcp", "metrics", "gateway", "cluster", "a2a"]

# The modules each extra of pyproject.toml brings (import names, not distribution names).
EXTRAS: dict[Extra, tuple[str, ...]] = {
    "langchain": ("langchain_core",),
    "mcp": ("mcp", "tenacity"),
    "metrics": ("prometheus_client",),
    "gateway": ("mcp", "tenacity", "httpx", "starlette", "uvicorn", "httptools", "jwt"),
    "cluster": ("redis",),
    "a2a": ("a2a", "httpx", "tenacity"),
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


def lazy_names(
    namespace: dict[str, Any], extra: Extra, modules: Mapping[str, str]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of a package (`namespace` is its ``globals()``) whose
    names load on first use: name -> the submodule defining it, in `modules`.

    Its SDK-free submodules (the options config files validate against) then import without the
    extra, and a name that needs a missing `extra` raises `MissingExtraError` naming the install.
    """
    package = namespace["__name__"]

    def load(name: str) -> Any:
        module = modules.get(name)
        if module is None:
            msg = f"module {package!r} has no attribute {name!r}"
            raise AttributeError(msg)
        try:
            value = getattr(importlib.import_module(f"{package}.{module}"), name)
        except ModuleNotFoundError:
            # A missing extra is one line naming the install; any other missing module is a bug.
            require_extra(extra, package)
            raise
        namespace[name] = value
        return value

    def listed() -> list[str]:
        return sorted({*namespace, *namespace["__all__"]})

    return load, listed
