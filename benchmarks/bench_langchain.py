"""Routed LangChain runnables against their direct `ainvoke`, measured in the same run.

Targets (issue 11), each a ratio at p50:
- a realistic runnable, an LCEL chain (prompt | chat model | parser, the model a fake one so
  nothing waits on a network), routed / direct ≤ 1.10×;
- a routed `RunnableLambda` against LangChain's own `RouterRunnable` dispatching to the same
  runnable: printed, aiming at ≤ 1.3×;
- `router.send(agent_id)` not slower than `router.route(capability)` to the same agent.

Also shown, for information and to say where the time goes: the routed `RunnableLambda` against
its direct `ainvoke` (issue 3's 1.2× target, which mostly measures interpreter cache effects),
the adapter alone (`LangChainAgent.invoke`, no router), and the reach tool a LangChain agent
would use.

Under the chain's ratio: the same chain given the config a routed run gets (the task's ids in
metadata and tags, which LangChain carries to every step's callbacks and tracing) against the
chain without it, and the routed chain against that: LangChain's share of the gap, and the rest.

The last line measures how much slower a direct `ainvoke` runs right after a routed call to a
no-op agent than on its own: LangChain's call is long enough that any Python code run between
two of them costs it time (the interpreter's caches and branch history are no longer warm for
it), which a benchmark of back-to-back direct calls never pays.

Run: ``python -m benchmarks.bench_langchain [--calls N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
from collections.abc import Awaitable, Callable
from typing import Any

from langchain_core.language_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langchain_core.output_parsers import StrOutputParser
from langchain_core.prompts import ChatPromptTemplate
from langchain_core.runnables import RunnableConfig, RunnableLambda
from langchain_core.runnables.router import RouterInput, RouterRunnable

from benchmarks.stats import measure, measure_pair, summary
from middleware import MetaInfo, ReachMessage
from reach_adapters import Capability, FunctionAgent, Router
from reach_adapters.langchain import LangChainAgent, ReachToolkit
from reach_adapters.langchain.config import run_config

CHAIN_TARGET = 1.10
ROUTER_RUNNABLE_AIM = 1.3
ROUNDS = 6


async def lookup(order: dict[str, Any]) -> dict[str, Any]:
    """Look an order up."""
    return {"order_id": order["order_id"], "status": "shipped"}


async def noop() -> None:
    return None


async def run(calls: int) -> dict[str, tuple[float, float]]:
    runnable = RunnableLambda(lookup)
    agent = LangChainAgent(runnable, agent_id="shop:lookup:01")
    chain = (
        ChatPromptTemplate.from_messages([("human", "Summarise order {order_id}")])
        | GenericFakeChatModel(messages=itertools.repeat(AIMessage("Order A-1 has shipped.")))
        | StrOutputParser()
    )
    router = Router()
    router.register(agent)
    router.register(LangChainAgent(chain, agent_id="shop:summary:01"))
    router.register(FunctionAgent(noop, agent_id="bench:noop:01", capabilities=[Capability(name="noop")]))
    (tool,) = [t for t in ReachToolkit(router).get_tools() if t.name == "lookup"]
    switch = RouterRunnable(runnables={"lookup": runnable})
    payload = {"order_id": "A-1"}
    keyed = RouterInput(key="lookup", input=payload)
    message = ReachMessage(raw_payload=payload, meta_info=MetaInfo(capability="lookup"))

    async def route_then_direct() -> Any:
        await router.route("noop", None)
        return await runnable.ainvoke(payload)

    cases: dict[str, Callable[[], Awaitable[Any]]] = {
        "direct ainvoke": lambda: runnable.ainvoke(payload),
        "adapter alone": lambda: agent.invoke(message),
        "router.route": lambda: router.route("lookup", payload),
        "router.send": lambda: router.send("shop:lookup:01", payload),
        "RouterRunnable": lambda: switch.ainvoke(keyed),
        "reach tool ainvoke": lambda: tool.ainvoke(payload),
        "chain ainvoke": lambda: chain.ainvoke(payload),
        "chain routed": lambda: router.route("summary", payload),
        "route(noop)": lambda: router.route("noop", None),
        "route(noop)+direct": route_then_direct,
    }
    for name in ("router.route", "router.send", "chain routed", "route(noop)"):
        # A routed case that fails would time the error path, not the delivery.
        result = await cases[name]()
        if not result.ok:
            msg = f"benchmark case {name!r} failed: {result.error}"
            raise SystemExit(msg)
    samples: dict[str, list[float]] = {name: [] for name in cases}
    # Interleaved rounds, so drift of the machine affects every case alike; every other round in
    # reverse order, as a case runs slower right after another (see the last line printed).
    order = list(cases.items())
    for round_ in range(ROUNDS):
        for name, call in order if round_ % 2 == 0 else order[::-1]:
            samples[name] += await measure(call, calls // ROUNDS)
    # The targets compare pairs call by call, in turn: the fairest measure on a busy machine.
    # The config a routed run of the chain gets (its ids in metadata and tags), given directly:
    # what LangChain's own handling of it costs, apart from the router's work.
    summary_message = ReachMessage(raw_payload=payload, meta_info=MetaInfo(capability="summary"))
    routed_config = run_config(RunnableConfig(), summary_message, "shop:summary:01")

    def configured() -> Awaitable[Any]:
        return chain.ainvoke(payload, routed_config)

    pairs: dict[str, tuple[Callable[[], Awaitable[Any]], Callable[[], Awaitable[Any]]]] = {
        "chain": (lambda: chain.ainvoke(payload), lambda: router.route("summary", payload)),
        "config": (lambda: chain.ainvoke(payload), configured),
        "configured": (configured, lambda: router.route("summary", payload)),
        "switch": (lambda: switch.ainvoke(keyed), lambda: router.route("lookup", payload)),
        "send": (lambda: router.route("lookup", payload), lambda: router.send("shop:lookup:01", payload)),
    }
    for name, (first, second) in pairs.items():
        a, b = await measure_pair(first, second, calls // 2)
        samples[f"{name}:first"], samples[f"{name}:second"] = a, b
    await router.aclose()
    return {name: summary(values) for name, values in samples.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=20_000, help="calls per case")
    figures = asyncio.run(run(parser.parse_args().calls))
    base_p50, base_p99 = figures["direct ainvoke"]
    print(f"{'case':<22}{'p50 µs':>10}{'p99 µs':>10}{'p50 ×':>9}{'p99 ×':>9}")
    for name, (p50, p99) in figures.items():
        if ":" in name:
            continue
        print(f"{name:<22}{p50:>10.1f}{p99:>10.1f}{p50 / base_p50:>9.2f}{p99 / base_p99:>9.2f}")
    routed = figures["router.route"][0]
    adapter = figures["adapter alone"][0]
    print(
        f"RunnableLambda: router.route / direct at p50 = {routed / base_p50:.2f}× (for information); "
        f"adds {routed - base_p50:.1f} µs: adapter {adapter - base_p50:.1f}, router {routed - adapter:.1f}"
    )

    def paired(name: str) -> float:
        return figures[f"{name}:second"][0] / figures[f"{name}:first"][0]

    print("the targets, each pair measured call by call in turn:")
    chain_ratio = paired("chain")
    verdict = "meets" if chain_ratio <= CHAIN_TARGET else "misses"
    print(
        f"  LCEL chain: routed / direct at p50 = {chain_ratio:.2f}× ({verdict} the ≤ {CHAIN_TARGET}× target)"
    )
    config_us = figures["config:second"][0] - figures["config:first"][0]
    print(
        f"    of which LangChain's own handling of the run's metadata and tags (the chain given a "
        f"routed run's config / without): {paired('config'):.2f}× ({config_us:+.1f} µs); "
        f"routed / the chain given that config: {paired('configured'):.2f}×"
    )
    print(f"  router.route / RouterRunnable at p50 = {paired('switch'):.2f}× (aim ≤ {ROUTER_RUNNABLE_AIM}×)")
    print(f"  router.send / router.route at p50 = {paired('send'):.2f}× (target ≤ 1.00×)")
    interference = figures["route(noop)+direct"][0] - figures["route(noop)"][0] - base_p50
    print(
        f"a direct ainvoke right after a routed no-op call runs {interference:.1f} µs slower "
        "than back to back with itself"
    )


if __name__ == "__main__":
    main()
