"""The arguments of ``reach submit`` and ``reach task``, and the ``--token`` of every command that
talks to a running server."""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from typing import Any

from reach_adapters.cli.argtypes import add_call_options, payload, positive

__all__ = ["add_query", "add_task", "add_task_commands", "add_token"]

Command = Callable[[Any, str, list[argparse.ArgumentParser], str, str], argparse.ArgumentParser]


def add_token(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--token",
        default=os.environ.get("REACH_TOKEN"),
        help="bearer token for a server with security.yaml (default: $REACH_TOKEN)",
    )


def add_task(sub: argparse.ArgumentParser) -> None:
    """CAPABILITY and the task's PAYLOAD, as a command sending one task to a capability takes them."""
    sub.add_argument("capability", metavar="CAPABILITY")
    sub.add_argument(
        "payload", type=payload, nargs="?", default={}, metavar="PAYLOAD", help="JSON ('-' reads stdin)"
    )


def _url(sub: argparse.ArgumentParser) -> None:
    sub.add_argument(
        "--url", default=os.environ.get("REACH_URL"), help="a running `reach serve` (default: $REACH_URL)"
    )


def add_query(sub: argparse.ArgumentParser) -> None:
    """What a command asking a running server one thing takes: its URL, an HTTP timeout, the
    token, and ``--json``."""
    _url(sub)
    sub.add_argument("--timeout", type=positive, default=60.0, metavar="S", help="HTTP timeout")
    add_token(sub)
    sub.add_argument("--json", action="store_true", help="print JSON instead of text")


def _server(sub: argparse.ArgumentParser) -> None:
    _url(sub)
    add_token(sub)
    sub.add_argument("--json", action="store_true", help="print the task as JSON")


def add_task_commands(commands: Any, command: Command, parents: list[argparse.ArgumentParser]) -> None:
    sub = command(
        commands,
        "submit",
        parents,
        "submit a task to run in the background; print its id",
        "Submit PAYLOAD for the best agent declaring CAPABILITY to a running server, which answers at "
        "once with a task id and runs the task in the background; follow it with `reach task`. With "
        "--callback-url the server POSTs the finished task there, signed (docs/tasks.md).",
    )
    add_task(sub)
    add_call_options(sub, "timeout_ms, priority, task_id")
    sub.add_argument("--callback-url", metavar="URL", help="where the server POSTs the finished task")
    sub.add_argument("--timeout", type=positive, default=60.0, metavar="S", help="HTTP timeout")
    _server(sub)
    sub.set_defaults(run=_run_submit, extra="gateway")

    sub = command(
        commands,
        "task",
        parents,
        "show, wait for or cancel a submitted task",
        "Print a task submitted to a running server: its status, and its result once finished. Exits "
        "1 when the task failed, or is unfinished after --wait.",
    )
    sub.add_argument("task_id", metavar="TASK_ID")
    action = sub.add_mutually_exclusive_group()
    action.add_argument("--wait", action="store_true", help="wait until the task has finished")
    action.add_argument("--cancel", action="store_true", help="cancel the task if it is queued or running")
    sub.add_argument(
        "--timeout", type=positive, default=60.0, metavar="S", help="seconds --wait waits (default: 60)"
    )
    _server(sub)
    sub.set_defaults(run=_run_task, extra="gateway")


def _needs_url(args: argparse.Namespace) -> None:
    if not args.url:
        args.parser.error("give --url of a running `reach serve` (or set REACH_URL)")


def _run_submit(args: argparse.Namespace) -> int:
    _needs_url(args)
    from reach_adapters.cli.tasks import run_submit

    return run_submit(args)


def _run_task(args: argparse.Namespace) -> int:
    _needs_url(args)
    from reach_adapters.cli.tasks import run_task

    return run_task(args)
