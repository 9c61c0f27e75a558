"""Shared measuring helpers: per-call latencies and percentiles."""

from __future__ import annotations

import gc
import time
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["measure", "percentile", "summary"]


async def measure(call: Callable[[], Awaitable[Any]], calls: int, *, warmup: int = 200) -> list[float]:
    """Per-call latencies in microseconds, after a warm-up, with the collector paused."""
    for _ in range(warmup):
        await call()
    clock = time.perf_counter
    out: list[float] = []
    gc.collect()
    gc.disable()
    try:
        for _ in range(calls):
            start = clock()
            await call()
            out.append((clock() - start) * 1e6)
    finally:
        gc.enable()
    return out


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(samples: list[float]) -> tuple[float, float]:
    """(p50, p99) in the samples' unit."""
    return percentile(samples, 0.50), percentile(samples, 0.99)
