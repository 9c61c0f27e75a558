"""Drill a of the cluster issue: three `reach serve` nodes on one real redis-server, 300 async
tasks submitted through node 1 to agents hosted on nodes 2 and 3 only, and node 2 killed with
SIGKILL once about a third have finished (the submits go on meanwhile). No task is lost; every
task of the idempotent capability ends ``ok``; every task of the counting one (not safe to
repeat) ends ``ok`` with its effect seen once, or as outcome-unknown with its effect seen at most
once: never twice.

Where an outcome-unknown comes from: a task node 2 was running is taken over by another node
after the visibility timeout (``OutcomeUnknown``, docs/tasks.md), and a call another node had
sent to node 2's agent ends when that agent's lease does (``RemoteDeliveryError``, docs/cluster.md).
"""

from __future__ import annotations

import asyncio
import re
import time
from collections import Counter
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from reach_adapters.cluster import Keys
from reach_adapters.cluster.takeover import OUTCOME_UNKNOWN
from reach_adapters.router import UNKNOWN_OUTCOME
from reach_adapters.router.tasks import TaskStatus
from tests.cluster.drill_agents import EFFECTS_ENV
from tests.cluster.test_serve import catalog
from tests.gateway.conftest import ReachServer, write
from tests.waiting import wait_until

Serve = Callable[..., ReachServer]

TASKS = 300  # half of each capability
LEASE_TTL_S = 1.5
VISIBILITY_S = 2.0
SUBMITTERS = 32  # submits at once, so that the nodes' workers are seldom idle
WORKERS = 8  # per node: the load lasts long enough to kill a node in the middle of it
UNFINISHED = (TaskStatus.QUEUED, TaskStatus.RUNNING)

pytestmark = pytest.mark.timeout(180)


def node_config(tmp_path: Path, name: str, redis_url: str, prefix: str, *, hosts: bool) -> Path:
    """A node's config directory: its policy joins the cluster; `hosts`: a replica of each
    capability (node 1 hosts none, so every task it takes goes to another node)."""
    directory = tmp_path / name
    directory.mkdir()
    write(
        directory,
        "routing_policy.yaml",
        f"task_workers: {WORKERS}\n"
        "registry:\n"
        f"  url: {redis_url}\n"
        f"  node_id: {name}\n"
        f"  lease_ttl_s: {LEASE_TTL_S}\n"
        f"  prefix: '{prefix}'\n"
        f"  task_visibility_timeout_s: {VISIBILITY_S}\n",
    )
    if hosts:
        for capability, idempotent in (("work", "true"), ("count", "false")):
            agent_id = f"util:{capability}:{name}"
            write(
                directory,
                f"{agent_id}.yaml",
                f"kind: function\nagent_id: {agent_id}\n"
                f"function: tests.cluster.drill_agents:{capability}\ncall_style: message\n"
                # Above what the workers of three nodes can send it: a replica is never full.
                f"overrides:\n  {capability}: {{idempotent: {idempotent}, max_concurrency: 64}}\n",
            )
    return directory


def lists_all(node: ReachServer, agents: set[str]) -> bool:
    return agents <= set(catalog(node))


def effects(path: Path) -> dict[str, Counter[str]]:
    """Executions per task id, by capability."""
    seen: dict[str, Counter[str]] = {"work": Counter(), "count": Counter()}
    if path.exists():
        for line in path.read_text().splitlines():
            capability, task_id, _ = line.split()
            seen[capability][task_id] += 1
    return seen


def outcome_unknown(task: dict[str, Any]) -> bool:
    """Ended without knowing whether the agent did the work, as the queue or the router says it."""
    result = task["result"] or {}
    said = result.get("error") or ""
    unknown = result.get("error_type") == OUTCOME_UNKNOWN or UNKNOWN_OUTCOME in said
    return task["status"] == "error" and unknown


async def submit_all(client: httpx.AsyncClient, api: str) -> dict[str, tuple[str, int]]:
    """Submit the tasks through one node, a few at a time; capability and number by task id."""
    gate = asyncio.Semaphore(SUBMITTERS)

    async def one(n: int) -> tuple[str, tuple[str, int]]:
        capability = "work" if n % 2 else "count"
        async with gate:
            posted = await client.post(f"{api}/tasks", json={"capability": capability, "payload": {"n": n}})
        assert posted.status_code == 202, posted.text
        return posted.json()["task_id"], (capability, n)

    return dict(await asyncio.gather(*(one(n) for n in range(TASKS))))


async def kill_midway(client: httpx.AsyncClient, api: str, victim: ReachServer) -> int:
    """SIGKILL `victim` once a third of the tasks are ``ok``; how many were."""
    async with asyncio.timeout(60):
        while True:
            done = await client.get(f"{api}/tasks", params={"status": "ok", "limit": TASKS // 3})
            if len(done.json()) >= TASKS // 3:
                break
            await asyncio.sleep(0.05)
    victim.process.kill()
    await asyncio.to_thread(victim.process.wait, 10)
    return len(done.json())


def node_counts(server: ReachServer) -> dict[str, int]:
    """The node's task counters (run, reclaimed, redelivered, outcome unknown) from its /metrics."""
    text = httpx.get(f"{server.url}/metrics", timeout=30).text
    found = re.findall(r"^reach_cluster_tasks_(\w+)_total\{[^}]*\} (\S+)$", text, re.MULTILINE)
    return {name: int(float(value)) for name, value in found}


async def all_finished(client: httpx.AsyncClient, api: str, count: int) -> list[dict[str, Any]]:
    """Every task once all `count` have finished (bounded wait)."""
    tasks: list[dict[str, Any]] = []
    try:
        async with asyncio.timeout(60):
            while True:
                tasks = (await client.get(f"{api}/tasks", params={"limit": 1000})).json()
                if len(tasks) == count and not any(task["status"] in UNFINISHED for task in tasks):
                    return tasks
                await asyncio.sleep(0.25)
    except TimeoutError:
        pending = Counter(task["status"] for task in tasks)
        pytest.fail(f"not every task finished within 60 s after the kill: {len(tasks)} listed, {pending}")


async def test_killing_a_node_mid_load_loses_no_task_and_runs_none_twice_unsafely(
    serve: Serve,
    tmp_path: Path,
    redis_url: str,
    prefix: str,
    monkeypatch: pytest.MonkeyPatch,
    record_property: Callable[[str, object], None],
) -> None:
    effects_file = tmp_path / "effects.log"
    monkeypatch.setenv(EFFECTS_ENV, str(effects_file))  # the nodes inherit it
    one, two, three = (
        serve(node_config(tmp_path, name, redis_url, prefix, hosts=name != "n1"))
        for name in ("n1", "n2", "n3")
    )
    hosted = {"util:work:n2", "util:count:n2", "util:work:n3", "util:count:n3"}
    for node in (one, two, three):
        wait_until(partial(lists_all, node, hosted), timeout=20, what="every agent listed on every node")

    started = time.monotonic()
    async with httpx.AsyncClient(timeout=30) as client:
        submitting = asyncio.create_task(submit_all(client, one.api_url))
        ok_at_kill = await kill_midway(client, one.api_url, two)
        submitted = await submitting
        submitted_s = time.monotonic() - started
        tasks = await all_finished(client, one.api_url, len(submitted))
        dead_letters = (await client.get(f"{three.api_url}/tasks", params={"status": "dead_letter"})).json()
    elapsed = time.monotonic() - started

    by_id = {task["task_id"]: task for task in tasks}
    assert set(by_id) == set(submitted), "a submitted task is missing from the list"
    assert dead_letters == []
    # Nothing left behind in the queue either: node 2's entries were all taken over and acked.
    with redis.Redis.from_url(redis_url) as direct:
        queue = Keys(prefix).task_queue
        wait_until(lambda: direct.xlen(queue) == 0, timeout=10, what="the task queue emptied")
    ran = effects(effects_file)
    # The agents saw only the tasks submitted, under their own task ids.
    assert set(ran["work"]) | set(ran["count"]) <= set(submitted)

    unknown: Counter[str] = Counter()
    for task_id, (capability, n) in submitted.items():
        task = by_id[task_id]
        if capability == "work":
            assert task["status"] == "ok", task
            assert task["result"]["payload"] == {"n": n}, task
            assert ran["work"][task_id] >= 1, task
        elif task["status"] == "ok":
            assert ran["count"][task_id] == 1, (ran["count"][task_id], task)
            assert task["result"]["payload"] == {"n": n}, task
        else:
            assert outcome_unknown(task), task
            assert ran["count"][task_id] <= 1, (ran["count"][task_id], task)
            unknown[f"{task['result']['error_type']} with {ran['count'][task_id]} effect(s)"] += 1
    # Never twice, whatever the task's end.
    assert max(ran["count"].values()) == 1

    record_property("ok_at_kill", ok_at_kill)
    record_property("n1_tasks", node_counts(one))
    record_property("n3_tasks", node_counts(three))
    record_property("elapsed_s", round(elapsed, 2))
    record_property("submitted_s", round(submitted_s, 2))
    record_property("work_run_again", sum(1 for times in ran["work"].values() if times > 1))
    record_property("count_outcome_unknown", dict(unknown))
    record_property("count_ok", sum(1 for t in ran["count"] if by_id[t]["status"] == "ok"))
