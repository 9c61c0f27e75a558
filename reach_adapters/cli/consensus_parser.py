"""The arguments of ``reach consensus`` and ``reach feedback``."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from typing import Any

from reach_adapters.cli.argtypes import add_call_options
from reach_adapters.cli.tasks_parser import Command, add_query, add_task

__all__ = ["add_consensus_commands"]


def _count(text: str) -> int:
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        msg = f"{text!r} is not a whole number of agents, 1 or more"
        raise argparse.ArgumentTypeError(msg)
    return int(text)


def _score(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        msg = f"{text!r} is not a score; give a number from 0 (bad) to 1 (good)"
        raise argparse.ArgumentTypeError(msg)
    return value


def add_consensus_commands(
    commands: Any,
    command: Command,
    parents: list[argparse.ArgumentParser],
    target: Callable[[argparse.ArgumentParser], None],
    logs: list[argparse.ArgumentParser],
) -> None:
    """`target` adds ``--url`` / ``--config`` (and the flags going with them) to a command."""
    sub = command(
        commands,
        "consensus",
        parents,
        "ask several agents the same task and print what they agreed on",
        "Send PAYLOAD to N distinct agents declaring CAPABILITY (other agent types before more "
        "replicas) and decide among their answers: by majority of equal answers, or by the "
        "capability --judge. Prints the decision and every vote. Exits 1 when fewer than QUORUM "
        "agreed (status no_consensus) or the call failed. See docs/consensus.md.",
    )
    add_task(sub)
    sub.add_argument("--n", type=_count, default=3, metavar="N", help="agents asked (default: 3)")
    sub.add_argument(
        "--quorum", type=_count, default=2, metavar="Q", help="agreeing answers needed (default: 2)"
    )
    sub.add_argument(
        "--vote", choices=("majority", "judge"), default="majority", help="how to decide (default: majority)"
    )
    sub.add_argument("--judge", metavar="CAPABILITY", help="with --vote judge: the capability that judges")
    add_call_options(sub, "timeout_ms, priority, namespace")
    sub.add_argument("--explain", action="store_true", help="print the decision record too")
    target(sub)
    sub.set_defaults(run=_run_consensus, extra="gateway")

    sub = command(
        commands,
        "feedback",
        logs,
        "score a finished task: the serving agents' rating moves",
        "Give a running server's task TASK_ID a SCORE from 0 (bad) to 1 (good): the rating of the "
        "agent that served it (every agreeing voter, for a consensus) for its capability moves "
        "towards the score, and decays back over time. Each task takes one feedback.",
    )
    sub.add_argument("task_id", metavar="TASK_ID")
    sub.add_argument("score", type=_score, metavar="SCORE", help="0 (bad) .. 1 (good)")
    sub.add_argument("--reason", metavar="TEXT", help="why; kept in the server's log")
    add_query(sub)
    sub.set_defaults(run=_run_feedback, extra="gateway")


def _run_consensus(args: argparse.Namespace) -> int:
    from reach_adapters.cli.consensus import run_consensus

    return run_consensus(args)


def _run_feedback(args: argparse.Namespace) -> int:
    if not args.url:
        args.parser.error(
            "give --url of a running `reach serve` (or set REACH_URL): ratings live in the server"
        )
    from reach_adapters.cli.consensus import run_feedback

    return run_feedback(args)
