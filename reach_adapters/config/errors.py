"""Errors of the configuration layer: every one names the file, and the line and field when known."""

from __future__ import annotations

from pathlib import Path

from reach_adapters.errors import ReachError

__all__ = ["ConfigError", "ConfigFileError"]


class ConfigError(ReachError):
    """A configuration directory cannot be used as it is."""


class ConfigFileError(ConfigError):
    """One file of a configuration directory is invalid.

    The message reads ``path/to/file.yaml:LINE: field 'a.b': problem``; the parts are kept as
    attributes so a server can report them as data.
    """

    def __init__(
        self, file: Path, problem: str, *, line: int | None = None, field: str | None = None
    ) -> None:
        self.file = file
        self.line = line
        self.field = field
        self.problem = problem
        where = f"{file}:{line}" if line is not None else str(file)
        what = f"field '{field}': " if field else ""
        super().__init__(f"{where}: {what}{problem}")
