"""``reach submit`` and ``reach task``: async tasks of a running server."""

from __future__ import annotations

import argparse
import time
from typing import Any
from urllib.parse import quote

from reach_adapters.cli.argtypes import call_options
from reach_adapters.cli.codes import EXIT_FAILED, EXIT_OK
from reach_adapters.cli.remote import Remote
from reach_adapters.cli.render import render_json, render_result
from reach_adapters.router.tasks.records import UNFINISHED

__all__ = ["run_submit", "run_task"]

# The server waits at most this long per request (GET ?wait=); longer waits are several requests.
_LONG_POLL_S = 60.0
# Beyond the wait itself, what one long poll may take on the way.
_HTTP_MARGIN_S = 10.0


def run_submit(args: argparse.Namespace) -> int:
    body: dict[str, Any] = {
        "capability": args.capability,
        "payload": args.payload,
        "options": call_options(args, "the capability and the payload"),
    }
    if args.callback_url:
        body["callback_url"] = args.callback_url
    task = Remote(args.url, timeout_s=args.timeout, token=args.token).post("/tasks", body)
    print(render_json(task) if args.json else task["task_id"])
    return EXIT_OK


def run_task(args: argparse.Namespace) -> int:
    path = f"/tasks/{quote(args.task_id, safe='')}"
    if args.cancel:
        task = Remote(args.url, timeout_s=_HTTP_MARGIN_S, token=args.token).delete(path)
    elif args.wait:
        task = _wait(args, path)
    else:
        task = Remote(args.url, timeout_s=_HTTP_MARGIN_S, token=args.token).get(path)
    print(render_json(task) if args.json else _render(task))
    unfinished = task["status"] in UNFINISHED
    if args.cancel or (unfinished and not args.wait):
        return EXIT_OK
    return EXIT_OK if task["status"] == "ok" else EXIT_FAILED


def _wait(args: argparse.Namespace, path: str) -> Any:
    remote = Remote(args.url, timeout_s=_LONG_POLL_S + _HTTP_MARGIN_S, token=args.token)
    end = time.monotonic() + args.timeout
    while True:
        left = end - time.monotonic()
        task = remote.get(path, {"wait": f"{max(0.0, min(left, _LONG_POLL_S)):.3f}"})
        if task["status"] not in UNFINISHED or left <= _LONG_POLL_S:
            return task


def _render(task: dict[str, Any]) -> str:
    head = f"task {task['task_id']}: {task['status']} ({task.get('capability') or '-'})"
    result = task.get("result")
    return head if result is None else f"{head}\n{render_result(result)}"
