"""Deferred async tasks on a cluster (issue 17, item 5), on a real redis-server: a task submitted
with ``defer=True`` that no agent can serve is ``deferred`` in Redis, is delivered when a capable
agent joins on any node, survives the restart of the node holding it, holds no worker there, and
is cancelled from another node as never run."""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from middleware import Fault
from reach_adapters import FunctionAgent, Router, RoutingPolicy, TaskStatus
from reach_adapters.cluster import ClusterNode
from tests.cluster.conftest import TTL, cap, listed
from tests.waiting import eventually, until

pytestmark = pytest.mark.timeout(60)

VISIBILITY = 1.0  # short: a node that stopped has its tasks taken over within a second or two

Join = Callable[..., Awaitable[ClusterNode]]


@pytest.fixture
async def join(redis_url: str, prefix: str) -> AsyncIterator[Join]:
    """`join(router, node_id, tasks=True)`: a node whose task entries go idle after `VISIBILITY`."""
    nodes: list[ClusterNode] = []

    async def joined(router: Router, node_id: str, *, tasks: bool = True) -> ClusterNode:
        node = await ClusterNode.join(
            router,
            redis_url,
            node_id=node_id,
            lease_ttl_s=TTL,
            prefix=prefix,
            tasks=tasks,
            task_visibility_timeout_s=VISIBILITY,
        )
        nodes.append(node)
        return node

    try:
        yield joined
    finally:
        for node in nodes:
            await node.router.aclose()


def translator(agent_id: str) -> FunctionAgent:
    async def translate(payload: Any) -> Any:
        return {"agent": agent_id, "text": payload["text"]}

    return FunctionAgent(translate, agent_id=agent_id, capabilities=[cap("translate")])


async def status_is(router: Router, task_id: str, status: TaskStatus) -> bool:
    return (await router.task(task_id)).status is status


async def test_an_agent_joining_on_another_node_delivers_the_deferred_task(join: Join) -> None:
    holder, other = Router(), Router()
    await join(holder, "n1")
    # The other node runs no tasks: the task stays with n1, and goes to the agent across nodes.
    await join(other, "n2", tasks=False)

    task = await holder.submit("translate", {"text": "hello"}, defer=True)
    await until(lambda: status_is(holder, task.task_id, TaskStatus.DEFERRED), what="the task deferred")
    assert holder.deferred_waiting == 1

    other.register(translator("lang:translate:02"))
    done = await holder.wait(task.task_id, timeout=20)

    assert done.status is TaskStatus.OK, done.result
    assert done.result is not None
    assert done.result.payload == {"agent": "lang:translate:02", "text": "hello"}
    assert done.result.agent_id == "lang:translate:02"
    assert holder.deferred_waiting == 0


async def test_a_deferred_task_survives_the_restart_of_the_node_holding_it(join: Join) -> None:
    first = Router()
    await join(first, "n1")
    task = await first.submit("translate", {"text": "hallo"}, defer=True)
    await until(lambda: status_is(first, task.task_id, TaskStatus.DEFERRED), what="the task deferred")
    await first.aclose()

    again = Router()
    await join(again, "n1-restarted")
    assert (await again.task(task.task_id)).status is TaskStatus.DEFERRED
    # Taken over once n1's entry went idle, and deferred again here.
    await eventually(lambda: again.deferred_waiting == 1, what="the task taken over and deferred again")

    again.register(translator("lang:translate:01"))
    done = await again.wait(task.task_id, timeout=20)

    assert done.status is TaskStatus.OK, done.result
    assert done.result is not None
    assert done.result.payload == {"agent": "lang:translate:01", "text": "hallo"}


async def test_a_deferred_task_holds_no_worker_of_its_node(join: Join) -> None:
    router = Router(RoutingPolicy(task_workers=1))
    router.register(translator("lang:translate:01"))
    await join(router, "n1")
    parked = await router.submit("shout", "hello", defer=True)
    await until(lambda: status_is(router, parked.task_id, TaskStatus.DEFERRED), what="the task deferred")

    translated = await router.submit("translate", {"text": "hallo"})
    done = await router.wait(translated.task_id, timeout=20)

    assert done.status is TaskStatus.OK, done.result
    assert (await router.task(parked.task_id)).status is TaskStatus.DEFERRED


async def test_a_deferred_task_cancelled_from_another_node_ends_as_never_run(join: Join) -> None:
    holder = Router()
    await join(holder, "n1")
    task = await holder.submit("translate", {"text": "hallo"}, defer=True)
    await until(lambda: status_is(holder, task.task_id, TaskStatus.DEFERRED), what="the task deferred")
    other = Router()
    await join(other, "n2")

    cancelled = await other.cancel(task.task_id)

    assert cancelled.status is TaskStatus.CANCELLED
    assert cancelled.result is not None
    assert cancelled.result.fault is Fault.CALLER
    assert not cancelled.result.delivered
    await eventually(lambda: holder.deferred_waiting == 0, what="the task out of n1's deferred queue")
    other.register(translator("lang:translate:01"))
    await listed(holder, "lang:translate:01")
    assert (await holder.task(task.task_id)).status is TaskStatus.CANCELLED
