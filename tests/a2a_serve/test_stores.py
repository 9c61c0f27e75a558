"""Where A2A tasks are kept: in memory for ``task_result_ttl_s`` (and unanswered input-required
tasks released), and in Redis with indexes trimmed on save, one per owner, and the first end kept."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import redis.asyncio as redis
from a2a.server.cluster.task_store import ConcurrentTaskModificationError
from a2a.server.context import ServerCallContext
from a2a.types.a2a_pb2 import ListTasksRequest, Task, TaskState, TaskStatus

from reach_adapters import Capability, FunctionAgent
from reach_adapters.a2a.serve import _Caller
from reach_adapters.a2a.taskstore import Owners, RedisA2ATaskStore
from reach_adapters.langchain import LangChainAgent
from tests.a2a_serve.agents import approval_graph
from tests.a2a_serve.conftest import Serve
from tests.redis_server import RedisServer
from tests.waiting import until

pytestmark = pytest.mark.timeout(60)


async def rpc(url: str, method: str, params: dict[str, Any]) -> dict[str, Any]:
    async with httpx.AsyncClient(timeout=30, headers={"A2A-Version": "1.0"}) as http:
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        answer: dict[str, Any] = (await http.post(f"{url}/a2a", json=body)).json()
        return answer


def send(data: Any, skill: str) -> dict[str, Any]:
    part = {"data": data, "mediaType": "application/json"}
    return {
        "message": {
            "messageId": f"m-{skill}",
            "role": "ROLE_USER",
            "parts": [part],
            "metadata": {"skill": skill},
        }
    }


async def test_without_redis_tasks_expire_and_unanswered_ones_are_released(served: Serve) -> None:
    server = await served(files={"routing_policy.yaml": "task_result_ttl_s: 0.5\n"})
    router = server.gateway.router
    router.register(
        FunctionAgent(
            lambda text: text,
            agent_id="util:echo:01",
            capabilities=[Capability(name="echo", description="echo")],
        )
    )
    router.register(LangChainAgent(approval_graph(), agent_id="support:refund:01"))
    done = (await rpc(server.url, "SendMessage", send({"text": "hi"}, "echo")))["result"]["task"]
    asked = await rpc(
        server.url, "SendMessage", send({"messages": [{"role": "user", "content": "42"}]}, "refund")
    )
    asked_task = asked["result"]["task"]
    assert asked_task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    handler = server.endpoint.a2a.handler  # type: ignore[union-attr]

    async def gone() -> bool:
        found = [await rpc(server.url, "GetTask", {"id": one["id"]}) for one in (done, asked_task)]
        return all("error" in one for one in found)

    async def released() -> bool:
        registry = handler._active_task_registry
        return await registry.get(asked_task["id"]) is None

    await until(gone, timeout=10, what="both tasks expired")
    await until(released, timeout=10, what="the unanswered input-required task released")


def ctx(principal: str) -> ServerCallContext:
    return ServerCallContext(user=_Caller(principal))


def completed(task_id: str, state: TaskState = TaskState.TASK_STATE_COMPLETED) -> Task:
    return Task(id=task_id, context_id="c", status=TaskStatus(state=state))


@pytest.fixture
async def client(own_redis: RedisServer) -> AsyncIterator[redis.Redis]:
    connection = redis.Redis.from_url(own_redis.url)
    try:
        yield connection
    finally:
        await connection.aclose()


async def test_redis_indexes_are_trimmed_and_a_principal_lists_only_its_own(client: redis.Redis) -> None:
    owners = Owners(
        owner=lambda c: c.user.user_name,
        scope=lambda c: None if c.user.user_name == "ops" else c.user.user_name,
    )
    store = RedisA2ATaskStore(client, "t:", owners, ttl_s=0.3, max_tasks=50)
    for start in range(0, 120, 40):
        await asyncio.gather(
            *(store.save(completed(f"bulk-{i}"), ctx("bulk")) for i in range(start, start + 40))
        )
    assert await client.zcard("t:a2a:tasks") == 50
    await asyncio.sleep(0.4)  # every task so far is past its ttl
    await store.save(completed("mine"), ctx("alice"))
    assert await client.zcard("t:a2a:tasks") == 1
    for i in range(30):
        await store.save(completed(f"other-{i}"), ctx("bob"))
    before = (await client.info("stats"))["total_commands_processed"]
    page = await store.list(ListTasksRequest(), ctx("alice"))
    commands = (await client.info("stats"))["total_commands_processed"] - before
    everyone = await store.list(ListTasksRequest(page_size=100), ctx("ops"))
    assert [task.id for task in page.tasks] == ["mine"]
    # The page of her own tasks, not a read of everyone's (the INFO call itself counts one).
    assert commands < 10
    assert everyone.total_size == 31


async def test_a_cancel_after_another_end_is_refused_by_redis(client: redis.Redis) -> None:
    owners = Owners(owner=lambda c: c.user.user_name, scope=lambda c: None)
    store = RedisA2ATaskStore(client, "c:", owners, ttl_s=60)
    await store.save(completed("t", TaskState.TASK_STATE_WORKING), ctx("alice"))
    await store.save(completed("t"), ctx("alice"))
    with pytest.raises(ConcurrentTaskModificationError):
        await store.save(completed("t", TaskState.TASK_STATE_CANCELED), ctx("ops"))
    stored = await store.get("t", ctx("ops"))
    assert stored is not None
    assert stored.status.state == TaskState.TASK_STATE_COMPLETED
