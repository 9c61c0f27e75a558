"""The flags that bound what `reach serve` accepts and say which config it trusts."""

from __future__ import annotations

import argparse

__all__ = ["add_config_safety"]


def add_config_safety(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        # Spelled out, not imported from the config package: the parser loads nothing heavy.
        "--allow-insecure-config",
        dest="allow_insecure_config",
        action="store_true",
        help="accept a config directory or file that other users may write (default: refuse it)",
    )
