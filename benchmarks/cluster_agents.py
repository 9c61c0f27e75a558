"""The agent the cluster benchmarks serve on every node."""

from __future__ import annotations

from typing import Any


async def echo(payload: Any) -> Any:
    """Answer with the payload (async, as agents waiting on models are: no thread per call)."""
    return payload
