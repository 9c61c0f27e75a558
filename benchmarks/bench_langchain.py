"""A routed call to a `RunnableLambda` against its direct `ainvoke`, measured in the same run.

Target (issue 3): routed / direct ≤ 1.2× at p50. Also shown, to say where the time goes: the
adapter alone (`LangChainAgent.invoke`, no router) and the same call through the reach tool a
LangChain agent would use.

Run: ``python -m benchmarks.bench_langchain [--calls N]``.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.runnables import RunnableLambda

from benchmarks.stats import measure, summary
from middleware import MetaInfo, ReachMessage
from reach_adapters import Router
from reach_adapters.langchain import LangChainAgent, ReachToolkit

TARGET = 1.2
ROUNDS = 5


async def lookup(order: dict[str, Any]) -> dict[str, Any]:
    """Look an order up."""
    return {"order_id": order["order_id"], "status": "shipped"}


async def run(calls: int) -> dict[str, tuple[float, float]]:
    runnable = RunnableLambda(lookup)
    agent = LangChainAgent(runnable, agent_id="shop:lookup:01")
    router = Router()
    router.register(agent)
    (tool,) = [t for t in ReachToolkit(router).get_tools() if t.name == "lookup"]
    payload = {"order_id": "A-1"}
    message = ReachMessage(raw_payload=payload, meta_info=MetaInfo(capability="lookup"))
    cases: dict[str, Callable[[], Awaitable[Any]]] = {
        "direct ainvoke": lambda: runnable.ainvoke(payload),
        "adapter alone": lambda: agent.invoke(message),
        "router.route": lambda: router.route("lookup", payload),
        "reach tool ainvoke": lambda: tool.ainvoke(payload),
    }
    samples: dict[str, list[float]] = {name: [] for name in cases}
    # Interleaved rounds, so drift of the machine affects every case alike.
    for _ in range(ROUNDS):
        for name, call in cases.items():
            samples[name] += await measure(call, calls // ROUNDS)
    await router.aclose()
    return {name: summary(values) for name, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=20_000, help="calls per case")
    figures = asyncio.run(run(parser.parse_args().calls))
    base_p50, base_p99 = figures["direct ainvoke"]
    print(f"{'case':<22}{'p50 µs':>10}{'p99 µs':>10}{'p50 ×':>9}{'p99 ×':>9}")
    for name, (p50, p99) in figures.items():
        print(f"{name:<22}{p50:>10.1f}{p99:>10.1f}{p50 / base_p50:>9.2f}{p99 / base_p99:>9.2f}")
    routed = figures["router.route"][0]
    adapter = figures["adapter alone"][0]
    ratio = routed / base_p50
    verdict = "meets" if ratio <= TARGET else "misses"
    print(
        f"router.route / direct at p50 = {ratio:.2f}× ({verdict} the ≤ {TARGET}× target); "
        f"adds {routed - base_p50:.1f} µs: adapter {adapter - base_p50:.1f}, router {routed - adapter:.1f}"
    )


if __name__ == "__main__":
    main()
