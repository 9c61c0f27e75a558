"""Which files of a configuration directory count, and how agent ids map to file names."""

from __future__ import annotations

from pathlib import Path

from reach_adapters.config.errors import ConfigError

__all__ = ["CONFIG_SUFFIXES", "POLICY_STEM", "SECURITY_STEM", "config_files", "file_stems", "read_config_dir"]

CONFIG_SUFFIXES = (".yaml", ".yml", ".json")
POLICY_STEM = "routing_policy"
SECURITY_STEM = "security"
# File systems that forbid ':' in names (Windows) spell the id's separators as '__'.
_ALT_SEPARATOR = "__"


def file_stems(agent_id: str) -> tuple[str, str]:
    """The two file names (without suffix) an agent's file may have: the id, or the id with '__'."""
    return agent_id, agent_id.replace(":", _ALT_SEPARATOR)


def config_files(directory: Path) -> list[Path]:
    """The files of `directory` that hold config, sorted by name.

    They are the directory's own ``*.yaml``, ``*.yml`` and ``*.json`` files; hidden files (editor
    swap files) and subdirectories are left alone.
    """
    if not directory.exists():
        msg = f"config directory {directory} does not exist; create it or pass an existing directory"
        raise ConfigError(msg)
    if not directory.is_dir():
        msg = f"{directory} is a file, not a config directory; pass the directory that holds it"
        raise ConfigError(msg)
    return sorted(
        path
        for path in directory.iterdir()
        if not path.name.startswith(".") and path.suffix in CONFIG_SUFFIXES and path.is_file()
    )


def read_config_dir(directory: Path) -> dict[str, bytes]:
    """The bytes of every config file in `directory` (see `config_files`), by file name."""
    files: dict[str, bytes] = {}
    for path in config_files(directory):
        try:
            files[path.name] = path.read_bytes()
        except FileNotFoundError:
            continue  # removed between listing and reading: the next look sees it gone
        except OSError as exc:
            msg = f"{path}: cannot be read: {exc.strerror}; check its permissions"
            raise ConfigError(msg) from None
    return files
