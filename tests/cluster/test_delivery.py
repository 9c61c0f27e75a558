"""Calls across nodes over a real redis-server: routers in one process, each joined as a node."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from middleware import ReachMessage
from reach_adapters import FunctionAgent, Router
from reach_adapters.cluster import REMOTE_DELIVERY, ClusterNode
from reach_adapters.router import UNKNOWN_OUTCOME, AgentState, Fault, ResultStatus
from tests.cluster.conftest import Join, cap, listed, shout_agent, shout_keeps_ids
from tests.redis_server import RedisServer
from tests.waiting import eventually


def silence(node: ClusterNode) -> None:
    """The node stops renewing its leases, as a dead or frozen node does, with calls running.

    The flag as well as cancel(), as `aclose` does: on 3.11 a cancel racing a timeout can be
    swallowed, and a publisher that goes on renewing is no dead node.
    """
    node._closed = True
    for task in node._tasks:
        task.cancel()


async def test_a_call_reaches_an_agent_only_on_another_node_with_its_ids(cluster: Join) -> None:
    seen: list[ReachMessage] = []

    a, b = Router(), Router()
    b.register(shout_agent(seen))
    node_a = await cluster(a, "a")
    node_b = await cluster(b, "b")
    await listed(a, "util:shout:01")
    await shout_keeps_ids(a, seen)
    assert seen[0].meta_info.deadline is not None
    assert (node_a.stats.remote_calls_sent, node_b.stats.remote_calls_served) == (1, 1)
    # A retry of the same task to this node is not taken for a reused task id there.
    again = await a.route("shout", {"text": "ho"}, task_id="task-2")
    assert again.payload == "HO"


async def test_an_agent_error_on_the_host_comes_back_as_the_agents_fault(cluster: Join) -> None:
    def broken(text: str) -> str:
        raise ValueError("no luck")

    a, b = Router(), Router()
    b.register(FunctionAgent(broken, agent_id="util:broken:01", capabilities=[cap("broken")]))
    await cluster(a, "a")
    await cluster(b, "b")
    await listed(a, "util:broken:01")
    result = await a.route("broken", {"text": "x"})
    assert (result.status, result.fault, result.error_type) == (ResultStatus.ERROR, Fault.AGENT, "ValueError")
    assert result.delivered is True


async def test_a_transient_failure_on_the_host_fails_over_to_a_local_replica(cluster: Join) -> None:
    def down(text: str) -> str:
        raise ConnectionError("backend down")

    def fine(text: str) -> str:
        return f"local {text}"

    a, b = Router(), Router()
    # The remote replica scores higher, so it is tried first.
    # Safe to repeat: what an agent's code raises may come after its work.
    b.register(
        FunctionAgent(
            down, agent_id="util:work:remote", capabilities=[cap("work", weight=100, idempotent=True)]
        )
    )
    a.register(
        FunctionAgent(fine, agent_id="util:work:local", capabilities=[cap("work", weight=1, idempotent=True)])
    )
    await cluster(a, "a")
    await cluster(b, "b")
    await listed(a, "util:work:remote")
    result = await a.route("work", {"text": "x"})
    assert (result.status, result.payload, result.agent_id) == (ResultStatus.OK, "local x", "util:work:local")
    assert result.attempts == 2


async def test_the_deadline_holds_across_nodes_and_the_host_stops_the_agent(cluster: Join) -> None:
    cancelled = asyncio.Event()

    async def slow(text: str) -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return text

    a, b = Router(), Router()
    b.register(FunctionAgent(slow, agent_id="util:slow:01", capabilities=[cap("slow")]))
    await cluster(a, "a")
    await cluster(b, "b")
    await listed(a, "util:slow:01")
    async with asyncio.timeout(10):
        result = await a.route("slow", {"text": "x"}, timeout_ms=300)
        await cancelled.wait()
    assert result.status is ResultStatus.TIMEOUT


async def test_a_task_routed_back_by_the_host_agent_is_refused_as_a_loop(cluster: Join) -> None:
    a, b = Router(), Router()

    async def bounce(message: ReachMessage) -> str | None:
        # The same task, passed on to a capability served on the calling node.
        nested = await b.route("echo", {"text": "x"}, task_id=message.meta_info.task_id)
        return nested.error_type

    def echo(text: str) -> str:
        return text

    b.register(FunctionAgent(bounce, agent_id="util:bounce:01", capabilities=[cap("bounce")]))
    a.register(FunctionAgent(echo, agent_id="util:echo:01", capabilities=[cap("echo")]))
    await cluster(a, "a")
    await cluster(b, "b")
    await listed(a, "util:bounce:01")
    await listed(b, "util:echo:01")
    result = await a.route("bounce", {}, task_id="looping")
    assert (result.status, result.payload) == (ResultStatus.OK, "LoopDetectedError")


async def test_cancelling_the_caller_cancels_the_agent_on_the_host(cluster: Join) -> None:
    started, cancelled = asyncio.Event(), asyncio.Event()

    async def wait(text: str) -> str:
        started.set()
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            cancelled.set()
            raise
        return text

    a, b = Router(), Router()
    b.register(FunctionAgent(wait, agent_id="util:wait:01", capabilities=[cap("wait")]))
    node_a = await cluster(a, "a")
    await cluster(b, "b")
    await listed(a, "util:wait:01")
    call = asyncio.get_running_loop().create_task(a.route("wait", {"text": "x"}))
    async with asyncio.timeout(10):
        await started.wait()
        call.cancel()
        await cancelled.wait()
    assert node_a.stats.remote_calls_cancelled == 1


@pytest.mark.parametrize("idempotent", [False, True])
async def test_a_host_dying_mid_call_ends_it_within_the_lease(cluster: Join, idempotent: bool) -> None:
    started = asyncio.Event()

    async def hang(text: str) -> str:
        started.set()
        await asyncio.sleep(30)
        return text

    def fine(text: str) -> str:
        return f"local {text}"

    a, b = Router(), Router()
    flags = {"idempotent": idempotent, "timeout_ms": 20_000}
    b.register(
        FunctionAgent(hang, agent_id="util:job:remote", capabilities=[cap("job", weight=100, **flags)])
    )
    a.register(FunctionAgent(fine, agent_id="util:job:local", capabilities=[cap("job", weight=1, **flags)]))
    await cluster(a, "a")
    node_b = await cluster(b, "b")
    await listed(a, "util:job:remote")
    call = asyncio.get_running_loop().create_task(a.route("job", {"text": "x"}, timeout_ms=15_000))
    async with asyncio.timeout(10):  # the lease (1.2 s) bounds it, not the call's 15 s
        await started.wait()
        silence(node_b)
        result = await call
    if idempotent:
        # Safe to repeat: the router sends it to the replica left.
        assert (result.status, result.agent_id) == (ResultStatus.OK, "util:job:local")
    else:
        assert (result.status, result.error_type, result.delivered) == (
            ResultStatus.ERROR,
            REMOTE_DELIVERY,
            True,
        )
        assert UNKNOWN_OUTCOME in (result.error or "")
        assert "node b" in (result.error or "")


async def test_calls_fail_fast_and_undelivered_when_redis_is_down(
    cluster: Join, own_redis: RedisServer
) -> None:
    def shout(text: str) -> str:
        return text.upper()

    a, b = Router(), Router()
    b.register(FunctionAgent(shout, agent_id="util:shout:01", capabilities=[cap("shout")]))
    await cluster(a, "a", own_redis.url)
    await cluster(b, "b", own_redis.url)
    await listed(a, "util:shout:01")
    own_redis.stop()
    async with asyncio.timeout(5):
        result = await a.send("util:shout:01", {"text": "x"})
    assert (result.error_type, result.fault, result.delivered) == (REMOTE_DELIVERY, Fault.ROUTER, False)
    assert "node b" in (result.error or "")
    assert "Redis" in (result.error or "")


async def test_a_local_replica_wins_over_an_idle_remote_one_and_the_record_says_why(cluster: Join) -> None:
    def echo(text: str) -> str:
        return text

    a, b = Router(), Router()
    a.register(FunctionAgent(echo, agent_id="util:echo:local", capabilities=[cap("echo")]))
    b.register(FunctionAgent(echo, agent_id="util:echo:remote", capabilities=[cap("echo")]))
    await cluster(a, "a")
    await cluster(b, "b")
    await listed(a, "util:echo:remote")
    served = {(await a.route("echo", {"text": "hi"})).agent_id for _ in range(20)}
    assert served == {"util:echo:local"}
    result = await a.route("echo", {"text": "hi"})
    scores = {score.agent_id: score.breakdown for score in a.explain(result.task_id).candidates}
    assert scores["util:echo:remote"]["locality"] == pytest.approx(-0.1)
    assert "locality" not in scores["util:echo:local"]


async def test_a_call_sent_to_a_leaving_node_is_refused_undelivered_and_fails_over(cluster: Join) -> None:
    runs: list[str] = []

    def counter(tag: str) -> Callable[[int], str]:
        def count(n: int) -> str:
            runs.append(tag)
            return f"counted by {tag}"

        return count

    async def stubborn(n: int) -> str:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            await asyncio.sleep(1.0)  # its clean-up on cancel takes a second: b leaves slowly
            raise
        return "never"

    a, b, c = Router(), Router(), Router()
    b.register(FunctionAgent(counter("b"), agent_id="ops:count:b", capabilities=[cap("count", weight=100)]))
    b.register(FunctionAgent(stubborn, agent_id="ops:slow:b", capabilities=[cap("slow")]))
    c.register(FunctionAgent(counter("c"), agent_id="ops:count:c", capabilities=[cap("count", weight=10)]))
    await cluster(a, "a")
    node_b = await cluster(b, "b")
    await cluster(c, "c")
    for agent_id in ("ops:count:b", "ops:count:c", "ops:slow:b"):
        await listed(a, agent_id)
    slow = asyncio.get_running_loop().create_task(a.route("slow", {"n": 1}, timeout_ms=20_000))
    await asyncio.sleep(0.3)
    leaving = asyncio.get_running_loop().create_task(node_b.aclose())
    await asyncio.sleep(0.2)
    # b still leases its agents while it stops reading its inbox: the call lands there unread.
    result = await a.route("count", {"n": 1}, timeout_ms=10_000)
    await leaving
    await slow
    assert (result.status, result.agent_id) == (ResultStatus.OK, "ops:count:c")
    assert runs == ["c"]


async def test_an_agent_whose_lease_lapses_is_skipped_while_suspicious(cluster: Join) -> None:
    def echo(text: str) -> str:
        return text

    a, b = Router(), Router()
    b.register(FunctionAgent(echo, agent_id="util:echo:b", capabilities=[cap("echo")]))
    await cluster(a, "a")
    node_b = await cluster(b, "b")
    await listed(a, "util:echo:b")
    silence(node_b)
    await eventually(
        lambda: next(i.state for i in a.catalog() if i.agent_id == "util:echo:b") is AgentState.SUSPICIOUS,
        timeout=10,
        what="b's agent suspicious on a",
    )
    result = await a.route("echo", {"text": "hi"})
    assert (result.status, result.delivered) == (ResultStatus.NO_CANDIDATE, False)
    assert "suspicious" in (result.error or "")


async def test_a_task_retried_on_another_agent_of_the_same_host_is_not_a_reused_task_id(
    cluster: Join,
) -> None:
    def broken(text: str) -> str:
        msg = "replica down"
        raise ConnectionError(msg)

    def fine(text: str) -> str:
        return f"fine {text}"

    a, b = Router(), Router()
    b.register(
        FunctionAgent(broken, agent_id="util:job:one", capabilities=[cap("job", weight=100, idempotent=True)])
    )
    b.register(
        FunctionAgent(fine, agent_id="util:job:two", capabilities=[cap("job", weight=1, idempotent=True)])
    )
    await cluster(a, "a")
    await cluster(b, "b")
    await listed(a, "util:job:one")
    await listed(a, "util:job:two")
    # The caller chose the task id: b sees it twice, once per agent, and must run the second.
    result = await a.route("job", {"text": "x"}, task_id="fixed-1")
    assert (result.status, result.agent_id, result.payload) == (ResultStatus.OK, "util:job:two", "fine x")
    assert result.attempts == 2
