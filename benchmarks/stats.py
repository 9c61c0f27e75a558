"""Shared measuring helpers: per-call latencies and percentiles."""

from __future__ import annotations

import gc
import time
from collections.abc import Awaitable, Callable
from typing import Any

__all__ = ["measure", "measure_pair", "percentile", "summary"]


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


async def measure_pair(
    first: Callable[[], Awaitable[Any]],
    second: Callable[[], Awaitable[Any]],
    calls: int,
    *,
    warmup: int = 200,
) -> tuple[list[float], list[float]]:
    """Per-call latencies of two calls made in turn, one of each at a time, so that neither runs
    in the other's wake more often, and drift of the machine reaches both alike."""
    for _ in range(warmup):
        await first()
        await second()
    clock = time.perf_counter
    a: list[float] = []
    b: list[float] = []
    gc.collect()
    gc.disable()
    try:
        for i in range(calls):
            # Which goes first alternates too: each also runs right after the other equally often.
            for call, out in ((first, a), (second, b)) if i % 2 == 0 else ((second, b), (first, a)):
                start = clock()
                await call()
                out.append((clock() - start) * 1e6)
    finally:
        gc.enable()
    return a, b


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def summary(samples: list[float]) -> tuple[float, float]:
    """(p50, p99) in the samples' unit."""
    return percentile(samples, 0.50), percentile(samples, 0.99)
