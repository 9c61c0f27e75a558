"""The arguments of ``reach compensate``."""

from __future__ import annotations

import argparse
import os
from typing import Any

from reach_adapters.cli.argtypes import positive
from reach_adapters.cli.tasks_parser import Command, add_token

__all__ = ["add_chain_commands"]


def add_chain_commands(commands: Any, command: Command, parents: list[argparse.ArgumentParser]) -> None:
    sub = command(
        commands,
        "compensate",
        parents,
        "undo a finished task or chain of a running server",
        "Ask a running server to undo TASK_ID: a succeeded call of a capability that declares "
        "compensate_with, or a finished chain (its compensable steps, newest first). Prints what was "
        "undone, what could not be and what had been undone already; compensating twice does nothing. "
        "Exits 1 when something could not be undone (docs/chains.md). Needs --url: the server keeps "
        "the record of what it may undo.",
    )
    sub.add_argument("task_id", metavar="TASK_ID")
    sub.add_argument(
        "--url", default=os.environ.get("REACH_URL"), help="a running `reach serve` (default: $REACH_URL)"
    )
    add_token(sub)
    sub.add_argument("--timeout", type=positive, default=60.0, metavar="S", help="HTTP timeout")
    sub.add_argument("--json", action="store_true", help="print the report as JSON")
    sub.set_defaults(run=_run_compensate, extra="gateway")


def _run_compensate(args: argparse.Namespace) -> int:
    if not args.url:
        args.parser.error("give --url of a running `reach serve` (or set REACH_URL)")
    from reach_adapters.cli.chains import run_compensate

    return run_compensate(args)
