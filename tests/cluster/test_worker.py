"""Agents hosted by a process that is not a node, over a real redis-server: a `RemoteWorker` in
this process, and a worker written without reach_adapters in a subprocess (foreign_worker.py)."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any, cast

import orjson
import pytest
import redis.asyncio as redis

from middleware import ReachMessage
from reach_adapters import FunctionAgent, Router
from reach_adapters.cluster import ClusterError, Keys, RemoteWorker
from reach_adapters.errors import DuplicateAgentError, InvalidDeclarationError, UnknownAgentError
from reach_adapters.router import AgentState, Fault, ResultStatus
from tests.cluster.conftest import TTL, Join, cap, listed, shout_keeps_ids
from tests.waiting import eventually

Connect = Callable[..., Awaitable[RemoteWorker]]
FOREIGN = Path(__file__).with_name("foreign_worker.py")


@pytest.fixture
async def workers(redis_url: str, prefix: str) -> AsyncIterator[Connect]:
    """`connect(worker_id, lease_ttl_s=TTL)`; every worker is closed after the test."""
    opened: list[RemoteWorker] = []

    async def connect(worker_id: str, lease_ttl_s: float = TTL) -> RemoteWorker:
        worker = await RemoteWorker.connect(
            redis_url, worker_id=worker_id, prefix=prefix, lease_ttl_s=lease_ttl_s
        )
        opened.append(worker)
        return worker

    try:
        yield connect
    finally:
        for worker in opened:
            await worker.aclose()


def state_of(router: Router, agent_id: str) -> AgentState | None:
    return next((info.state for info in router.catalog() if info.agent_id == agent_id), None)


async def test_a_node_calls_a_workers_agent_with_its_ids(cluster: Join, workers: Connect) -> None:
    seen: list[ReachMessage] = []

    async def shout(payload: Any, message: ReachMessage) -> str:
        seen.append(message)
        return str(payload["text"]).upper()

    worker = await workers("w1")
    worker.serve("util:shout:01", [cap("shout")], shout)
    a = Router()
    await cluster(a, "a")
    await listed(a, "util:shout:01")
    assert [info.node for info in a.catalog()] == ["w1"]
    await shout_keeps_ids(a, seen)
    assert worker.stats.remote_calls_served == 1


async def test_an_agent_object_is_served_as_it_is(cluster: Join, workers: Connect) -> None:
    def echo(text: str) -> str:
        return text

    worker = await workers("w1")
    worker.serve(FunctionAgent(echo, agent_id="util:echo:01", capabilities=[cap("echo")]))
    a = Router()
    await cluster(a, "a")
    await listed(a, "util:echo:01")
    assert (await a.route("echo", {"text": "x"})).payload == "x"


async def test_a_handler_raising_is_the_agents_fault(cluster: Join, workers: Connect) -> None:
    def broken(payload: Any) -> str:  # sync: run in a thread of the agent's own
        raise ValueError("no luck")

    worker = await workers("w1")
    worker.serve("util:broken:01", [cap("broken")], broken)
    a = Router()
    await cluster(a, "a")
    await listed(a, "util:broken:01")
    result = await a.route("broken", {"text": "x"})
    assert (result.status, result.fault, result.error_type) == (ResultStatus.ERROR, Fault.AGENT, "ValueError")
    assert result.delivered is True


async def test_a_handler_past_the_deadline_is_cancelled(cluster: Join, workers: Connect) -> None:
    cancelled = asyncio.Event()

    async def slow(payload: Any) -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "late"

    worker = await workers("w1")
    worker.serve("util:slow:01", [cap("slow")], slow)
    a = Router()
    await cluster(a, "a")
    await listed(a, "util:slow:01")
    async with asyncio.timeout(10):
        result = await a.route("slow", {}, timeout_ms=300)
        await cancelled.wait()
    assert result.status is ResultStatus.TIMEOUT


async def test_a_call_past_its_deadline_is_refused_undelivered(
    workers: Connect, redis_url: str, prefix: str
) -> None:
    ran: list[Any] = []
    worker = await workers("w1")
    worker.serve("util:echo:01", [cap("echo")], ran.append)
    keys = Keys(prefix)
    client = redis.Redis.from_url(redis_url)
    try:
        message = {"raw_payload": {}, "meta_info": {"task_id": "late-1", "deadline": time.time() - 1}}
        call = {"op": "call", "id": "r1", "reply_to": "me", "agent_id": "util:echo:01", "message": message}
        await client.xadd(keys.inbox("w1"), {"m": orjson.dumps(call)})
        async with asyncio.timeout(10):
            reply = await client.xread({keys.replies("me"): "0-0"}, block=10_000)
    finally:
        await client.aclose()
    # The client's parsed reply: one stream, one entry, its fields in a dict.
    [(_, [(_, fields)])] = cast("list[Any]", reply)
    answer = orjson.loads(fields[b"m"])
    assert answer["id"] == "r1"
    assert (answer["result"]["status"], answer["result"]["delivered"]) == ("timeout", False)
    assert ran == []


async def test_cancelling_the_caller_cancels_the_handler(cluster: Join, workers: Connect) -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def wait(payload: Any) -> str:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return "done"

    worker = await workers("w1")
    worker.serve("util:wait:01", [cap("wait")], wait)
    a = Router()
    await cluster(a, "a")
    await listed(a, "util:wait:01")
    call = asyncio.get_running_loop().create_task(a.route("wait", {}))
    async with asyncio.timeout(10):
        await started.wait()
        call.cancel()
        await cancelled.wait()


async def test_no_more_calls_run_at_once_than_max_concurrency(cluster: Join, workers: Connect) -> None:
    running, most = 0, 0

    async def work(payload: Any) -> int:
        nonlocal running, most
        running += 1
        most = max(most, running)
        await asyncio.sleep(0.05)
        running -= 1
        return 1

    worker = await workers("w1")
    worker.serve("util:work:01", [cap("work", max_concurrency=1)], work)
    # Two callers, each keeping to the limit itself: together they would run two at once.
    a, b = Router(), Router()
    await cluster(a, "a")
    await cluster(b, "b")
    await listed(a, "util:work:01")
    await listed(b, "util:work:01")
    results = await asyncio.gather(*(caller.route("work", {}) for caller in (a, b, a, b)))
    assert most == 1
    assert all(result.status is ResultStatus.OK for result in results)


async def test_a_state_set_by_the_worker_shows_on_the_nodes(cluster: Join, workers: Connect) -> None:
    worker = await workers("w1")
    worker.serve("util:echo:01", [cap("echo")], lambda payload: payload)
    a = Router()
    await cluster(a, "a")
    await listed(a, "util:echo:01")
    worker.set_state("util:echo:01", "busy")
    await eventually(lambda: state_of(a, "util:echo:01") is AgentState.BUSY, timeout=10, what="busy")
    worker.set_state("util:echo:01", AgentState.ONLINE)
    await eventually(lambda: state_of(a, "util:echo:01") is AgentState.ONLINE, timeout=10, what="online")


async def test_a_worker_leaving_is_unlisted_at_once(cluster: Join, workers: Connect) -> None:
    # A lease far longer than the wait below: only the deregistration can unlist it in time.
    worker = await workers("w1", lease_ttl_s=60)
    worker.serve("util:echo:01", [cap("echo")], lambda payload: payload)
    worker.serve("util:other:01", [cap("other")], lambda payload: payload)
    a = Router()
    await cluster(a, "a")
    await listed(a, "util:other:01")
    await worker.withdraw("util:other:01")
    await eventually(lambda: "util:other:01" not in a, timeout=5, what="withdrawn agent unlisted")
    assert "util:echo:01" in a
    await worker.aclose()
    await eventually(lambda: "util:echo:01" not in a, timeout=5, what="agent of a worker gone unlisted")


async def test_a_silent_worker_turns_suspicious_then_goes(cluster: Join, workers: Connect) -> None:
    worker = await workers("w1")
    worker.serve("util:echo:01", [cap("echo")], lambda payload: payload)
    a = Router()
    await cluster(a, "a")
    await listed(a, "util:echo:01")
    assert worker._heartbeat is not None
    worker._stopping = True  # frozen: no renewal, no deregistration
    worker._heartbeat.cancel()
    await eventually(
        lambda: state_of(a, "util:echo:01") is AgentState.SUSPICIOUS, timeout=10, what="suspicious"
    )
    await eventually(lambda: "util:echo:01" not in a, timeout=10, what="expired agent removed")


async def test_bad_declarations_are_refused_with_what_to_do(workers: Connect, redis_url: str) -> None:
    with pytest.raises(ClusterError, match="redis://"):
        await RemoteWorker.connect("http://x", worker_id="w")
    with pytest.raises(InvalidDeclarationError, match="no ':'"):
        await RemoteWorker.connect(redis_url, worker_id="a:b")
    worker = await workers("w1")
    with pytest.raises(InvalidDeclarationError, match="namespace:type:instance"):
        worker.serve("shout", [cap("shout")], str.upper)
    with pytest.raises(InvalidDeclarationError, match="no capabilities"):
        worker.serve("util:shout:01", [], str.upper)
    with pytest.raises(InvalidDeclarationError, match="handler"):
        worker.serve("util:shout:01", [cap("shout")], "upper")  # type: ignore[arg-type]
    with pytest.raises(InvalidDeclarationError, match="is not an agent"):
        worker.serve(object())  # type: ignore[arg-type]
    worker.serve("util:shout:01", [cap("shout")], str.upper)
    with pytest.raises(DuplicateAgentError):
        worker.serve("util:shout:01", [cap("shout")], str.upper)
    with pytest.raises(InvalidDeclarationError, match="online, busy, offline"):
        worker.set_state("util:shout:01", "draining")
    with pytest.raises(UnknownAgentError, match="util:shout:01"):
        worker.set_state("util:none:01", "busy")


async def test_a_worker_in_another_language_serves_a_node(cluster: Join, redis_url: str, prefix: str) -> None:
    """foreign_worker.py uses redis-py and json only: what any language with a Redis client can do."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(FOREIGN), redis_url, prefix, "foreign-1", str(int(TTL * 1000)),
        stdout=asyncio.subprocess.PIPE,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        async with asyncio.timeout(10):
            assert await process.stdout.readline() == b"ready\n"
        a = Router()
        await cluster(a, "a")
        await listed(a, "foreign:reverse:01")
        result = await a.route("reverse", {"text": "abc"}, task_id="t-9", trace_id="tr-9")
        assert (result.status, result.payload, result.agent_id) == (
            ResultStatus.OK,
            "cba",
            "foreign:reverse:01",
        )
        assert (result.task_id, result.trace_id) == ("t-9", "tr-9")
        # Past the lease's first end: only the heartbeat can have kept it.
        await asyncio.sleep(TTL * 1.5)
        lease = Keys(prefix).lease("foreign-1", "foreign:reverse:01")
        client = redis.Redis.from_url(redis_url)
        try:
            assert await client.exists(lease) == 1
            assert "foreign:reverse:01" in a
            process.terminate()  # it deregisters on SIGTERM
            async with asyncio.timeout(10):
                assert await process.wait() == 0
            assert await client.exists(lease) == 0
        finally:
            await client.aclose()
        await eventually(
            lambda: "foreign:reverse:01" not in a, timeout=10, what="deregistered agent unlisted"
        )
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
