"""A routed call to a `RunnableLambda` against its direct `ainvoke`, measured in the same run.

Target: routed / direct ≤ 1.2× at p50. Also shown, for context: the same call through the
reach tool a LangChain agent would use.

Run: ``python -m benchmarks.bench_langchain [--calls N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import statistics
import time
from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.runnables import RunnableLambda
from langchain_core.tools import BaseTool

from reach_adapters import Router
from reach_adapters.langchain import LangChainAgent, ReachToolkit

TARGET = 1.2
ROUNDS = 5


async def lookup(order: dict[str, Any]) -> dict[str, Any]:
    """Look an order up."""
    return {"order_id": order["order_id"], "status": "shipped"}


async def measure(call: Callable[[], Awaitable[Any]], calls: int) -> list[float]:
    """Per-call latencies in microseconds."""
    out: list[float] = []
    clock = time.perf_counter
    for _ in range(calls):
        start = clock()
        await call()
        out.append((clock() - start) * 1e6)
    return out


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(calls: int) -> dict[str, tuple[float, float]]:
    runnable = RunnableLambda(lookup)
    router = Router()
    router.register(LangChainAgent(runnable, agent_id="shop:lookup:01"))
    tool: BaseTool = next(t for t in ReachToolkit(router).get_tools() if t.name == "lookup")
    payload = {"order_id": "A-1"}
    cases: dict[str, Callable[[], Awaitable[Any]]] = {
        "direct ainvoke": lambda: runnable.ainvoke(payload),
        "router.route": lambda: router.route("lookup", payload),
        "reach tool ainvoke": lambda: tool.ainvoke(payload),
    }
    samples: dict[str, list[float]] = {name: [] for name in cases}
    for call in cases.values():
        await measure(call, calls // 10)  # warm-up: caches, validators, first-call paths
    gc.collect()
    # Interleaved rounds, so drift of the machine affects every case alike.
    for _ in range(ROUNDS):
        for name, call in cases.items():
            samples[name] += await measure(call, calls // ROUNDS)
    await router.aclose()
    return {name: (statistics.median(s), percentile(s, 0.99)) for name, s in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=20_000, help="calls per case")
    args = parser.parse_args()
    figures = asyncio.run(run(args.calls))
    base_p50, base_p99 = figures["direct ainvoke"]
    print(f"{'case':<22}{'p50 µs':>10}{'p99 µs':>10}{'p50 ×':>9}{'p99 ×':>9}")
    for name, (p50, p99) in figures.items():
        print(f"{name:<22}{p50:>10.1f}{p99:>10.1f}{p50 / base_p50:>9.2f}{p99 / base_p99:>9.2f}")
    ratio = figures["router.route"][0] / base_p50
    verdict = "meets" if ratio <= TARGET else "misses"
    print(f"router.route / direct at p50 = {ratio:.2f}× ({verdict} the ≤ {TARGET}× target)")


if __name__ == "__main__":
    main()
