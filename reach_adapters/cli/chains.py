"""``reach compensate``: undo a finished task of a running server."""

from __future__ import annotations

import argparse
from typing import Any
from urllib.parse import quote

from reach_adapters.cli.codes import EXIT_FAILED, EXIT_OK
from reach_adapters.cli.remote import Remote
from reach_adapters.cli.render import render_json

__all__ = ["render_compensation", "run_compensate"]


def run_compensate(args: argparse.Namespace) -> int:
    remote = Remote(args.url, timeout_s=args.timeout, token=args.token)
    report = remote.post(f"/compensate/{quote(args.task_id, safe='')}", {})
    print(render_json(report) if args.json else render_compensation(report))
    return EXIT_FAILED if report["status"] == "incomplete" else EXIT_OK


def render_compensation(report: dict[str, Any]) -> str:
    """One line for the outcome, one per undo made or found made."""
    lines = [f"task {report['task_id']}: {report['status'].replace('_', ' ')}"]
    for item in report["undone"]:
        lines.append(f"  undone        {item['task_id']} ({item['capability']}) by {item['agent_id']}")
    for item in report["not_undone"]:
        error = f"{item.get('error_type')}: {item.get('error')}"
        lines.append(f"  NOT undone    {item['task_id']} ({item['capability']}): {error}")
    for item in report["already_undone"]:
        lines.append(f"  undone before {item['task_id']} ({item['capability']})")
    return "\n".join(lines)
