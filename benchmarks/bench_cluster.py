"""Cross-node sync calls: the same capability served by an agent of this node, and by one of
another node (another process) through Redis Streams.

Target (issue 15): a call across nodes adds ≤ 1 ms at p50 to the same call served locally.

A throwaway ``redis-server`` (Debian's 7.0 is enough) runs on a free port of 127.0.0.1; node B is a
subprocess of this script hosting ``util:echo:remote``; node A, here, hosts ``util:echo:local``
(the same function) and calls both in turn with a 1 KB payload as directed calls, so selection is
the same for both and only the delivery differs.

Run: ``python -m benchmarks.bench_cluster [--calls N]`` (about 20 s).
"""

from __future__ import annotations

import argparse
import asyncio
import subprocess
import sys

from benchmarks.stats import measure_pair, summary
from benchmarks.throwaway_redis import throwaway_redis
from reach_adapters import FunctionAgent, Router
from reach_adapters.cluster import ClusterNode

TARGET_ADDED_MS = 1.0
PREFIX = "bench:"
PAYLOAD = {"text": "x" * 1000}


def echo(text: str) -> str:
    """Say it back."""
    return text


async def host(url: str) -> None:
    """Node B: host the remote agent until stdin closes."""
    router = Router()
    router.register(FunctionAgent(echo, agent_id="util:echo:remote"))
    await ClusterNode.join(router, url, node_id="bench-b", prefix=PREFIX)
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await router.aclose()


async def measure(url: str, calls: int) -> None:
    node_b = subprocess.Popen(
        [sys.executable, "-m", "benchmarks.bench_cluster", "--host", url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert node_b.stdout is not None
    assert node_b.stdin is not None
    if node_b.stdout.readline().strip() != "ready":
        sys.exit("node B did not start")
    router = Router()
    router.register(FunctionAgent(echo, agent_id="util:echo:local"))
    node = await ClusterNode.join(router, url, node_id="bench-a", prefix=PREFIX)
    try:
        async with asyncio.timeout(10):
            while "util:echo:remote" not in router:
                await asyncio.sleep(0.01)

        async def local() -> None:
            (await router.send("util:echo:local", PAYLOAD)).raise_for_status()

        async def remote() -> None:
            (await router.send("util:echo:remote", PAYLOAD)).raise_for_status()

        local_us, remote_us = await measure_pair(local, remote, calls, warmup=500)
    finally:
        await router.aclose()
        node_b.stdin.close()
        node_b.wait(timeout=30)
    (l50, l99), (r50, r99) = summary(local_us), summary(remote_us)
    added_ms = (r50 - l50) / 1000.0
    print(f"sync call, 1 KB payload, {calls} calls each, two processes on one Redis (A calls, B hosts)")
    print(f"  served on this node     p50 {l50:8.1f} µs   p99 {l99:8.1f} µs")
    print(f"  served on another node  p50 {r50:8.1f} µs   p99 {r99:8.1f} µs")
    print(f"  ratio across/local      p50 {r50 / l50:8.1f} x    p99 {r99 / l99:8.1f} x")
    verdict = "meets" if added_ms <= TARGET_ADDED_MS else "misses"
    print(f"  added at p50: {added_ms:.3f} ms ({verdict} the target of ≤ {TARGET_ADDED_MS} ms)")
    print(f"  node A: {node.stats.remote_calls_sent} calls sent, {node.stats.remote_calls_failed} failed")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--calls", type=int, default=5000)
    parser.add_argument("--host", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.host:
        asyncio.run(host(args.host))
        return
    with throwaway_redis() as url:
        asyncio.run(measure(url, args.calls))


if __name__ == "__main__":
    main()
