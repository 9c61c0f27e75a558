"""The flags that bound what `reach serve` accepts and say which config it trusts."""

from __future__ import annotations

import argparse
from collections.abc import Callable

__all__ = ["LIMIT_FLAGS", "add_audit_log", "add_config_safety", "add_insecure", "add_limits"]

# flag → (ServerLimits field, type, help). Defaults stay ServerLimits' own: the parser imports
# nothing heavy, so an unset flag is None and the help repeats the default in words.
LIMIT_FLAGS: dict[str, tuple[str, type[int] | type[float], str]] = {
    "--max-body-bytes": ("max_body_bytes", int, "largest request body, on /api and /mcp (default: 4 MiB)"),
    "--max-json-depth": ("max_json_depth", int, "deepest JSON nesting in an /api request (default: 64)"),
    "--body-timeout": ("body_timeout_s", float, "seconds a request body may take to arrive (default: 30)"),
    "--header-timeout": (
        "head_timeout_s",
        float,
        "seconds a request line and headers may take to arrive (default: 10)",
    ),
    "--limit-concurrency": (
        "limit_concurrency",
        int,
        "connections and requests at once before answering 503 (default: 1000)",
    ),
    "--keep-alive": ("keep_alive_s", int, "seconds an idle keep-alive connection stays open (default: 5)"),
    "--max-header-bytes": ("max_header_bytes", int, "largest request line and headers (default: 16 KiB)"),
}


def add_config_safety(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        # Spelled out, not imported from the config package: the parser loads nothing heavy.
        "--allow-insecure-config",
        dest="allow_insecure_config",
        action="store_true",
        help="accept a config directory or file that other users may write (default: refuse it)",
    )


def add_insecure(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--insecure",
        action="store_true",
        help="serve a non-loopback --host without security.yaml, when something in front of the server "
        "authenticates (default: refuse)",
    )


def add_audit_log(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--audit-log",
        metavar="PATH",
        help="append one JSON line per routed call to PATH ('-' for stderr; default: none)",
    )


def add_limits(sub: argparse.ArgumentParser) -> None:
    limits = sub.add_argument_group("limits (see docs/security.md)")
    for flag, (dest, kind, text) in LIMIT_FLAGS.items():
        limits.add_argument(flag, dest=dest, type=_positive(kind), metavar="N", help=text)


def _positive(kind: type[int] | type[float]) -> Callable[[str], float]:
    def parse(text: str) -> float:
        try:
            value = kind(text)
        except ValueError:
            value = 0
        if not value > 0:
            noun = "whole number" if kind is int else "number"
            msg = f"{text!r} is not a positive {noun}"
            raise argparse.ArgumentTypeError(msg)
        return value

    return parse
