"""The ``reach`` command: parse, run, and turn every failure into one line and an exit code."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from reach_adapters.cli.codes import (
    EXIT_CONFIG,
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_OUTPUT_CLOSED,
    EXIT_UNAVAILABLE,
    EXIT_USAGE,
)
from reach_adapters.cli.parser import build_parser

__all__ = ["build_parser", "main"]

# The exit code of each kind of error, most specific first, by the module that defines it. An error
# can only come from a module already imported, so the classes are looked up in sys.modules: a
# command that needs no MCP SDK never imports it just to classify its errors.
_EXIT_CODES = (
    ("reach_adapters.extras", "MissingExtraError", EXIT_USAGE),
    ("reach_adapters.cli.errors", "UsageError", EXIT_USAGE),
    ("reach_adapters.config.errors", "ConfigError", EXIT_CONFIG),
    ("reach_adapters.gateway.errors", "GatewayError", EXIT_UNAVAILABLE),
    ("reach_adapters.cluster.errors", "ClusterError", EXIT_UNAVAILABLE),
    ("reach_adapters.mcp.errors", "MCPConnectionError", EXIT_UNAVAILABLE),
    ("reach_adapters.mcp.errors", "MCPTimeoutError", EXIT_UNAVAILABLE),
    ("reach_adapters.errors", "ReachError", EXIT_FAILED),
)


# Libraries whose INFO lines log every URL fetched and every agent card read, query tokens and
# all: kept for --log-level DEBUG.
_CHATTY = ("httpx", "httpx2", "a2a.client.card_resolver")


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``reach`` with `argv` (default: the process's arguments); return the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if getattr(args, "needs_target", False) and not (args.url or args.config):
        args.parser.error("give --url of a running `reach serve` (or set REACH_URL), or --config DIR")
    from reach_adapters.extras import require_extra
    from reach_adapters.observability import configure_logging

    handler = configure_logging(args.log_level or args.default_level, json_lines=args.log_json)
    if not logging.getLogger().isEnabledFor(logging.DEBUG):
        for name in _CHATTY:
            logging.getLogger(name).setLevel(logging.WARNING)
    if getattr(args, "app_dir", None) is not None:
        # Like uvicorn's --app-dir: import paths in agent files resolve from here.
        sys.path.insert(0, str(Path(args.app_dir).resolve()))
    try:
        if args.extra is not None:
            require_extra(args.extra, "this command")
        code: int = args.run(args)
    except KeyboardInterrupt:
        code = EXIT_INTERRUPTED
    except BrokenPipeError:
        # `reach ... | head`: nothing more to say. Output left in the buffer goes nowhere, so that
        # the flush at exit does not fail again.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = EXIT_OUTPUT_CLOSED
    except Exception as exc:
        known = _exit_code(exc)
        if known is None:
            raise
        code = _fail(args, known, exc)
    finally:
        logging.getLogger().removeHandler(handler)
    return code


def _exit_code(exc: Exception) -> int | None:
    """The exit code for an error of agent-reach; None for anything else (a bug: its traceback shows)."""
    for module_name, class_name, code in _EXIT_CODES:
        module = sys.modules.get(module_name)
        if module is not None and isinstance(exc, getattr(module, class_name)):
            return code
    return None


def _fail(args: argparse.Namespace, code: int, exc: Exception) -> int:
    from reach_adapters.security import redact_text

    # A config error may quote the file: a key in an MCP server's arguments or headers stays there.
    text = redact_text(" ".join(str(exc).split("\n")))
    print(f"{args.parser.prog}: error: {text}", file=sys.stderr)
    return code
