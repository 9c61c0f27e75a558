"""Durable async tasks across three nodes: tasks/s and p99 from submit to result.

Three routers in this process, each a node with its own Redis connection and `ClusterTasks`,
over a throwaway redis-server (appendonly off); 1 KB payloads, submitted round-robin to the nodes
by concurrent clients, each waiting for its task's result on the next node. Printed beside seed
004's figure for 100 agents (1,180 tasks/s at P99 145 ms). Run: python -m benchmarks.bench_cluster_tasks
"""

from __future__ import annotations

import argparse
import asyncio
import time

import redis.asyncio as redis

from benchmarks.stats import percentile
from benchmarks.throwaway_redis import throwaway_redis
from reach_adapters import Capability, FunctionAgent, Router, RoutingPolicy
from reach_adapters.cluster import Keys
from reach_adapters.cluster.tasks import ClusterTasks

SEED_TASKS_PER_S = 1180
SEED_P99_MS = 145


def echo(text: str) -> str:
    """Say it back."""
    return text


async def run(tasks: int, clients: int) -> None:
    with throwaway_redis() as url:
        await measure(url, tasks, clients)


async def measure(url: str, tasks: int, clients: int) -> None:
    routers: list[Router] = []
    connections: list[redis.Redis] = []
    for node in range(3):
        router = Router(RoutingPolicy(task_workers=64))
        router.register(
            FunctionAgent(echo, agent_id=f"util:echo:{node}", capabilities=[Capability(name="echo")])
        )
        client = redis.Redis.from_url(url, socket_timeout=2.0)
        await ClusterTasks.start(router, client, node_id=f"n{node}", keys=Keys("bench:"))
        routers.append(router)
        connections.append(client)
    payload = "x" * 1024
    latencies: list[float] = []
    counter = iter(range(tasks))

    async def client_loop() -> None:
        for number in counter:
            start = time.perf_counter()
            task = await routers[number % 3].submit("echo", {"text": payload})
            done = await routers[(number + 1) % 3].wait(task.task_id, timeout=30)
            assert done.finished, done.status
            latencies.append((time.perf_counter() - start) * 1000)

    began = time.perf_counter()
    await asyncio.gather(*(client_loop() for _ in range(clients)))
    elapsed = time.perf_counter() - began
    for router in routers:
        await router.aclose()
    for client in connections:
        await client.aclose()
    print(f"3 nodes in one process, {tasks} tasks, {clients} concurrent clients, 1 KB payloads")
    print(f"  tasks/s: {tasks / elapsed:,.0f}   (seed 004: {SEED_TASKS_PER_S:,}/s)")
    print(
        f"  submit->result ms: p50 {percentile(latencies, 0.5):.1f}  p99 {percentile(latencies, 0.99):.1f}"
        f"   (seed 004: P99 {SEED_P99_MS} ms)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tasks", type=int, default=3000)
    parser.add_argument("--clients", type=int, default=64)
    args = parser.parse_args()
    asyncio.run(run(args.tasks, args.clients))


if __name__ == "__main__":
    main()
