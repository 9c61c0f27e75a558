"""Three `reach serve` nodes on one machine, sharing one Redis: aggregate sync reaches/s and P99,
and async tasks/s with P99 from submit to result, beside seed 004's figures (3,200 reaches/s at
P99 42 ms on 10 nodes; 1,180 async tasks/s at P99 145 ms across 100 agents).

Each node is a real ``reach serve DIR --registry URL`` subprocess hosting one echo agent (the
function of ``benchmarks/cluster_agents.py``); a throwaway ``redis-server`` (appendonly, fsync
every second, as a durable queue would run) listens on a free port. Clients in this process hold
``--clients`` keep-alive HTTP connections spread over the nodes and send 1 KB payloads:

- sync: ``POST /api/route`` in a loop for ``--seconds``; every latency counts;
- async: ``POST /api/tasks`` then ``GET /api/tasks/{id}?wait=30`` on the same node, in a loop;
  the latency is from the submit to the result.

On a 2-core machine the clients, three nodes and Redis share two cores: the figures are what one
small machine does, not what three machines would.

Run: ``python -m benchmarks.bench_cluster_load [--clients N] [--seconds S]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from benchmarks.rawhttp import Connection
from benchmarks.stats import summary
from benchmarks.throwaway_redis import throwaway_redis

ROOT = Path(__file__).resolve().parents[1]
NODES = 3
PAYLOAD = {"text": "x" * 1000}
SEED_SYNC = (3200.0, 42.0)
SEED_ASYNC = (1180.0, 145.0)
AGENT = "kind: function\nagent_id: bench:echo:{node}\nfunction: benchmarks.cluster_agents:echo\n"


def start_node(directory: Path, node: int, registry: str) -> tuple[subprocess.Popen[str], str]:
    config = directory / f"n{node}"
    config.mkdir()
    (config / f"bench:echo:{node}.yaml").write_text(AGENT.format(node=node), encoding="utf-8")
    command = [sys.executable, "-m", "reach_adapters.cli", "serve", str(config), "--port", "0"]
    command += ["--registry", registry, "--node-id", f"n{node}", "--log-level", "warning"]
    process = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert process.stdout is not None
    line = process.stdout.readline()
    if not line.startswith("reach ready:"):
        process.kill()
        sys.exit(f"node {node} did not start: {line!r}")
    api = next(part[4:] for part in line.split() if part.startswith("api="))
    return process, api


async def wait_for_catalog(apis: list[str]) -> None:
    async with httpx.AsyncClient(timeout=10) as client:
        end = time.monotonic() + 30
        for api in apis:
            while len((await client.get(f"{api}/catalog")).json()) < NODES:
                if time.monotonic() > end:
                    sys.exit(f"{api} did not list the agents of every node within 30 s")
                await asyncio.sleep(0.1)


async def load(apis: list[str], clients: int, seconds: float, mode: str) -> tuple[int, list[float], int]:
    """Calls made, their latencies in ms, and failures, over `seconds` of `clients` loops."""
    latencies: list[float] = []
    failures = 0
    stop = time.monotonic() + seconds
    request = {"capability": "echo", "payload": PAYLOAD}

    async def loop(api: str) -> None:
        nonlocal failures
        connection = Connection(api)
        try:
            while time.monotonic() < stop:
                start = time.perf_counter()
                if mode == "sync":
                    _, body = await connection.request("POST", "/route", request)
                else:
                    _, submitted = await connection.request("POST", "/tasks", request)
                    _, body = await connection.request("GET", f"/tasks/{submitted['task_id']}?wait=30")
                if body.get("status") != "ok":
                    failures += 1
                    continue
                latencies.append((time.perf_counter() - start) * 1000)
        finally:
            await connection.aclose()

    await asyncio.gather(*(loop(apis[i % len(apis)]) for i in range(clients)))
    return len(latencies) + failures, latencies, failures


def report(
    name: str, seconds: float, latencies: list[float], failures: int, seed: tuple[float, float]
) -> None:
    rate = len(latencies) / seconds
    p50, p99 = summary(latencies)
    print(
        f"{name}: {rate:,.0f}/s, p50 {p50:.1f} ms, p99 {p99:.1f} ms, {failures} failed; "
        f"seed 004: {seed[0]:,.0f}/s at p99 {seed[1]:.0f} ms -> {rate / seed[0]:.2f}x the rate, "
        f"{p99 / seed[1]:.2f}x the p99"
    )


async def run(clients: int, seconds: float) -> None:
    with tempfile.TemporaryDirectory() as tmp, throwaway_redis(appendonly=True) as url:
        directory = Path(tmp)
        nodes: list[subprocess.Popen[str]] = []
        try:
            apis = []
            for node in range(1, NODES + 1):
                process, api = start_node(directory, node, url)
                nodes.append(process)
                apis.append(api)
            await wait_for_catalog(apis)
            cores = os.cpu_count()
            print(f"{NODES} nodes, {clients} clients, 1 KB payloads, {seconds:g} s per mode, {cores} cores")
            await load(apis, clients, 1.0, "sync")  # warm-up
            _, latencies, failures = await load(apis, clients, seconds, "sync")
            report("sync reaches", seconds, latencies, failures, SEED_SYNC)
            await load(apis, clients, 1.0, "async")
            _, latencies, failures = await load(apis, clients, seconds, "async")
            report("async tasks", seconds, latencies, failures, SEED_ASYNC)
        finally:
            for process in nodes:
                process.send_signal(signal.SIGTERM)
            for process in nodes:
                try:
                    process.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    process.kill()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=48)
    parser.add_argument("--seconds", type=float, default=10.0)
    args = parser.parse_args()
    asyncio.run(run(args.clients, args.seconds))


if __name__ == "__main__":
    main()
