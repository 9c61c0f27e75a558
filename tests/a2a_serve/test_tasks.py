"""Long reaches through A2A: sent without waiting, polled, subscribed to, cancelled, and their end
pushed to a receiver of the caller's."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import pytest
from a2a.types.a2a_pb2 import (
    CancelTaskRequest,
    GetTaskRequest,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
    TaskState,
)

from tests.a2a_serve.agents import Held
from tests.a2a_serve.conftest import PushReceiver, Serve, Served, message, meta_of, request, task_of
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(60)


async def holding(served: Serve, **options: Any) -> tuple[Served, Held]:
    """A router served with `options`, a `Held` agent registered on it."""
    server = await served(**options)
    held = Held()
    server.gateway.router.register(held)
    return server, held


async def test_a_task_sent_without_waiting_is_polled_then_cancelled(served: Serve) -> None:
    server, held = await holding(served)
    async with server.client() as client:
        sent = await task_of(client, request(message("go", skill="held"), immediately=True))
        assert sent.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING)
        async with asyncio.timeout(10):
            await held.started.wait()
        polled = await client.get_task(GetTaskRequest(id=sent.id))
        assert polled.status.state == TaskState.TASK_STATE_WORKING
        cancelled = await client.cancel_task(CancelTaskRequest(id=sent.id))
        assert cancelled.status.state == TaskState.TASK_STATE_CANCELED
        async with asyncio.timeout(10):
            await held.cancelled.wait()
        after = await client.get_task(GetTaskRequest(id=sent.id))
    assert after.status.state == TaskState.TASK_STATE_CANCELED
    [record] = server.gateway.router.recent_decisions(1, "held")
    assert record.status == "cancelled"


async def test_a_poll_sees_the_task_finish(served: Serve) -> None:
    server, held = await holding(served)
    async with server.client() as client:
        sent = await task_of(client, request(message("go", skill="held"), immediately=True))
        async with asyncio.timeout(10):
            await held.started.wait()
        held.release.set()
        async with asyncio.timeout(10):
            while (task := await client.get_task(GetTaskRequest(id=sent.id))).status.state not in (
                TaskState.TASK_STATE_COMPLETED,
                TaskState.TASK_STATE_FAILED,
            ):
                await asyncio.sleep(0.02)
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert dict(task.artifacts[0].parts[0].data.struct_value) == {"released": True}
    assert meta_of(task)["agent-reach/status"] == "ok"


async def test_a_subscriber_follows_a_running_task_to_its_end(served: Serve) -> None:
    server, held = await holding(served)
    async with server.client() as client:
        sent = await task_of(client, request(message("go", skill="held"), immediately=True))
    async with server.client(streaming=True) as streaming:
        states: list[int] = []

        async def follow() -> None:
            async for event in streaming.subscribe(SubscribeToTaskRequest(id=sent.id)):
                if event.HasField("task"):
                    states.append(event.task.status.state)
                elif event.HasField("status_update"):
                    states.append(event.status_update.status.state)

        async with asyncio.timeout(20):
            following = asyncio.create_task(follow())
            await held.started.wait()
            await eventually(lambda: bool(states), timeout=10, what="the subscription's first event")
            held.release.set()
            await following
    assert states[-1] == TaskState.TASK_STATE_COMPLETED


class Receiver(PushReceiver):
    """Records the JSON bodies POSTed to it, and their heads."""

    def __init__(self) -> None:
        super().__init__()
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[str] = []

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode()
        length = next(
            int(line.split(":", 1)[1])
            for line in head.split("\r\n")
            if line.lower().startswith("content-length")
        )
        self.headers.append(head)
        self.bodies.append(json.loads(await reader.readexactly(length)))
        await self._ok(writer)

    def states(self) -> list[str]:
        found = []
        for body in self.bodies:
            for key in ("task", "statusUpdate"):
                if key in body:
                    found.append(body[key]["status"]["state"])
        return found


@pytest.fixture
async def receiver() -> AsyncIterator[Receiver]:
    receiving = Receiver()
    try:
        yield receiving
    finally:
        await receiving.aclose()


async def test_the_end_of_a_task_is_pushed_to_the_callers_receiver(served: Serve, receiver: Receiver) -> None:
    # The receiver is on loopback: allowed only when the server opts in.
    server, held = await holding(served, a2a_private_push=True)
    url = await receiver.start()
    config = TaskPushNotificationConfig(url=url, token="caller-secret")
    req = SendMessageRequest(
        message=message("go", skill="held"),
        configuration=SendMessageConfiguration(return_immediately=True, task_push_notification_config=config),
    )
    async with server.client() as client:
        sent = await task_of(client, req)
    async with asyncio.timeout(10):
        await held.started.wait()
    held.release.set()
    await eventually(
        lambda: "TASK_STATE_COMPLETED" in receiver.states(), timeout=15, what="the completed task pushed"
    )
    updates = [body["statusUpdate"] for body in receiver.bodies if "statusUpdate" in body]
    assert {update["taskId"] for update in updates} == {sent.id}
    assert any("x-a2a-notification-token: caller-secret" in head.lower() for head in receiver.headers)
