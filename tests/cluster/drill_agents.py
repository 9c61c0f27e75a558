"""Agents of the kill drill (tests/cluster/test_drill_kill.py), run by `reach serve` subprocesses.

Each run appends one line ``capability task_id pid`` to the file named by `EFFECTS_ENV`, with one
`os.write` on an ``O_APPEND`` descriptor: lines of several processes never interleave, and a line
written survives a ``kill -9`` of its process right after (it is in the kernel already). So the
test counts every execution of every task, on any node, including those whose answer was lost.
"""

from __future__ import annotations

import asyncio
import os
import random
from typing import Any

from middleware import ReachMessage

EFFECTS_ENV = "REACH_DRILL_EFFECTS"


def _effect(message: ReachMessage) -> None:
    line = f"{message.meta_info.capability} {message.meta_info.task_id} {os.getpid()}\n"
    descriptor = os.open(os.environ[EFFECTS_ENV], os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    try:
        os.write(descriptor, line.encode())
    finally:
        os.close(descriptor)


def _number(message: ReachMessage) -> Any:
    payload = message.raw_payload
    return payload.get("n") if isinstance(payload, dict) else None


async def work(message: ReachMessage) -> dict[str, Any]:
    """Answer the task's number after a short while; safe to repeat (declared idempotent)."""
    await asyncio.sleep(random.uniform(0.02, 0.05))
    _effect(message)
    return {"n": _number(message)}


async def count(message: ReachMessage) -> dict[str, Any]:
    """Count the task (its effect, kept at once), then answer after a short while: a kill in
    between leaves the work done and the answer lost, the case that must not run it twice."""
    _effect(message)
    await asyncio.sleep(random.uniform(0.02, 0.05))
    return {"n": _number(message)}
