"""What the demos need installed, checked before they import it: a missing package is one line
saying what to run, never a traceback."""

from __future__ import annotations

import sys
from importlib.util import find_spec

__all__ = ["BASE", "require"]

# The base package's own dependencies: every demo needs them.
BASE = ("pydantic", "jsonschema", "jsonschema_rs", "orjson", "opentelemetry", "yaml")


def require(demo: str, *modules: str) -> None:
    """Exit with the install hint when a module `demo` imports is missing from this Python."""
    missing = [module for module in (*BASE, *modules) if find_spec(module) is None]
    if missing:
        msg = (
            f"{demo} needs {', '.join(missing)}, which {sys.executable} does not have: run `make install` "
            f"in the repository root (it installs agent-reach with every extra into .venv), then "
            f"`.venv/bin/python -m {demo}`"
        )
        raise SystemExit(msg)
