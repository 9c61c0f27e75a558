"""The installed package's version, for `reach --version` and the MCP server's ``serverInfo``."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

__all__ = ["package_version"]


def package_version() -> str:
    """agent-reach's version as installed; ``0+unknown`` when run from a tree never installed."""
    try:
        return version("agent-reach")
    except PackageNotFoundError:
        return "0+unknown"
