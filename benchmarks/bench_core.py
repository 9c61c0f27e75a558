"""Router core: overhead, selection latency, memory and throughput, each against a baseline.

Targets (issue 2): routing adds ≤ 25 µs p50 over awaiting the function directly; selection
among 10,000 agents p99 ≤ 200 µs; 10,000 agents ≤ 50 MB; ≥ 20,000 routed calls/s on one core.
Issue 5: the resilience features, engaged, add ≤ 10 µs p50 over the plain routed call.
Issue 15: selection among 1,000 replicas of one capability p99 ≤ 200 µs (a random sample is
scored above `RoutingPolicy.sample_above` candidates).

Run: ``python -m benchmarks.bench_core [--calls N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import time
import tracemalloc
from typing import Any

from benchmarks.stats import measure, summary
from middleware import MetaInfo, ReachMessage
from reach_adapters import Capability, FunctionAgent, Router, RoutingPolicy
from reach_adapters.router.dispatcher import Dispatcher
from reach_adapters.router.recording import new_record

SCHEMA_IN = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}
SCHEMA_OUT = {"type": "object", "properties": {"echo": {"type": "string"}}, "required": ["echo"]}


async def echo(payload: Any) -> Any:
    return payload


async def shout(text: str) -> Any:
    return {"echo": text.upper()}


def line(name: str, p50: float, p99: float, unit: str = "µs", extra: str = "") -> None:
    print(f"  {name:<46} p50 {p50:9.2f} {unit}   p99 {p99:9.2f} {unit}  {extra}")


async def overhead(calls: int) -> tuple[float, float]:
    print("(a) routed call vs awaiting the function directly")
    router = Router()
    router.register(FunctionAgent(echo, agent_id="bench:echo:01", capabilities=[Capability(name="echo")]))
    strict = Capability(name="strict", input_schema=SCHEMA_IN, output_schema=SCHEMA_OUT)
    router.register(FunctionAgent(shout, agent_id="bench:strict:01", capabilities=[strict]))
    payload = {"text": "hello"}
    direct = summary(await measure(lambda: echo(payload), calls))
    routed = summary(await measure(lambda: router.route("echo", payload), calls))
    counter = iter(range(10**9))
    engaged = summary(
        await measure(
            lambda: router.route(
                "strict", payload, task_id=f"t-{next(counter)}", lineage=["bench:caller:01"]
            ),
            calls,
        )
    )
    line("await echo(payload)", *direct)
    line("router.route('echo', payload)", *routed, extra=f"adds {routed[0] - direct[0]:.2f} µs (target ≤ 25)")
    line(
        "  + dedupe, in/out schema, loop guard",
        *engaged,
        extra=f"adds {engaged[0] - routed[0]:.2f} µs over plain route (target ≤ 10)",
    )
    return routed[0] - direct[0], engaged[0] - routed[0]


async def selection(calls: int) -> None:
    print("(b) selection latency (candidates + exclusions + scoring), 10 replicas per capability")
    for n in (10, 1_000, 10_000):
        dispatcher = populated(n, replicas=10).__dict__["_dispatcher"]
        samples = await plan_samples(dispatcher, f"cap-{(n // 10) // 2}", calls)
        line(
            f"{n:>6} agents",
            *summary(samples),
            extra="(target p99 ≤ 200 µs at 10,000)" if n == 10_000 else "",
        )
    policy = RoutingPolicy()
    print(
        "    every agent declares the same capability (above sample_above "
        f"{policy.sample_above} candidates, a random {policy.sample_size} are scored)"
    )
    for n in (10, 1_000):
        dispatcher = populated(n, replicas=n).__dict__["_dispatcher"]
        p50, p99 = summary(await plan_samples(dispatcher, "cap-0", calls // 10))
        target = f"(target p99 ≤ 200 µs: {p99 / 200:.2f}× the target)" if n == 1_000 else ""
        line(f"{n:>6} replicas of one capability", p50, p99, extra=target)


def populated(n: int, replicas: int) -> Router:
    router = Router()
    for i in range(n):
        cap = Capability(name=f"cap-{i // replicas}", weight=float(1 + i % 7))
        router.register(FunctionAgent(echo, agent_id=f"bench:a{i // replicas}:{i}", capabilities=[cap]))
    return router


async def plan_samples(dispatcher: Dispatcher, capability: str, calls: int) -> list[float]:
    clock = time.perf_counter
    out: list[float] = []
    strategy = dispatcher.strategies["weighted"]
    for _ in range(calls):
        message = ReachMessage(raw_payload=None, meta_info=MetaInfo(capability=capability))
        record = new_record(message, strategy)
        start = clock()
        await dispatcher.planner.plan(message, record, strategy)
        out.append((clock() - start) * 1e6)
    return out


def memory() -> None:
    print("(c) memory for 10,000 registered agents (tracemalloc, agents + router state)")
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    router = Router()
    for i in range(10_000):
        cap = Capability(name=f"cap-{i // 10}", description="echo the payload back", input_schema=SCHEMA_IN)
        router.register(FunctionAgent(echo, agent_id=f"bench:a{i // 10}:{i}", capabilities=[cap]))
    used = (tracemalloc.get_traced_memory()[0] - before) / 2**20
    tracemalloc.stop()
    each = used * 2**20 / 10_000
    print(f"  10,000 FunctionAgents, one capability each: {used:.1f} MB (target ≤ 50 MB), {each:.0f} B each")
    del router


async def throughput(seconds: float = 2.0) -> float:
    print("(d) routed calls per second, one core (one event loop, sequential awaits)")
    router = Router()
    router.register(FunctionAgent(echo, agent_id="bench:echo:01", capabilities=[Capability(name="echo")]))
    router.register(FunctionAgent(echo, agent_id="bench:echo:02", capabilities=[Capability(name="echo")]))
    payload = {"text": "x"}
    for _ in range(1000):
        await router.route("echo", payload)
    direct_n = routed_n = 0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(100):
            await echo(payload)
        direct_n += 100
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for _ in range(100):
            await router.route("echo", payload)
        routed_n += 100
    rate = routed_n / seconds
    print(f"  routed: {rate:,.0f} calls/s (target ≥ 20,000); direct awaits: {direct_n / seconds:,.0f}/s")
    return rate


async def main(calls: int) -> None:
    await overhead(calls)
    await selection(calls)
    memory()
    await throughput()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=20_000)
    asyncio.run(main(parser.parse_args().calls))
