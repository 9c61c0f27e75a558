"""Resolve ``module:attribute`` import paths named in agent files and routing policies."""

from __future__ import annotations

import importlib
import inspect
from collections.abc import Callable
from typing import Any

__all__ = ["ImportPathError", "import_object", "required_parameters"]


class ImportPathError(ValueError):
    """The import path does not lead to an object; the message says which part failed."""


def import_object(path: str) -> Any:
    """The object at ``module:attribute`` (the attribute may be dotted: ``module:Class.method``)."""
    module_name, _, attribute = path.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and (module_name == exc.name or module_name.startswith(exc.name + ".")):
            msg = (
                f"cannot import module '{module_name}' ({exc}); check the spelling, and that it is "
                "importable from the app directory (reach --app-dir, default: the current directory)"
            )
            raise ImportPathError(msg) from None
        msg = f"importing module '{module_name}' failed: {exc}; install the missing package"
        raise ImportPathError(msg) from None
    except Exception as exc:  # noqa: BLE001 - any error in the user's module is reported, not raised
        msg = f"importing module '{module_name}' failed: {type(exc).__name__}: {exc}"
        raise ImportPathError(msg) from None
    value: Any = module
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            msg = f"module '{module_name}' has no attribute '{attribute}'; check the name after ':'"
            raise ImportPathError(msg) from None
    return value


def required_parameters(fn: Callable[..., Any]) -> list[str]:
    """Names of the parameters a call must supply; [] when the signature cannot be read."""
    try:
        signature = inspect.signature(fn)
    except (TypeError, ValueError):
        return []
    return [
        p.name
        for p in signature.parameters.values()
        if p.default is p.empty and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
