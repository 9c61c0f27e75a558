"""Push receivers: private and loopback addresses refused unless the server opts in, and a slow
receiver never holds the task it is told about. Also the fault a refused stream reports."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from a2a.types.a2a_pb2 import (
    GetTaskRequest,
    SendMessageConfiguration,
    SendMessageRequest,
    TaskPushNotificationConfig,
    TaskState,
)

from tests.a2a_serve.agents import shout
from tests.a2a_serve.conftest import PushReceiver, Serve, message, meta_of, task_of

pytestmark = pytest.mark.timeout(60)


class SlowReceiver(PushReceiver):
    """Accepts a push, then answers only once `release` is set."""

    def __init__(self) -> None:
        super().__init__()
        self.got = asyncio.Event()
        self.release = asyncio.Event()

    async def aclose(self) -> None:
        self.release.set()
        await super().aclose()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        self.got.set()
        await self.release.wait()
        await self._ok(writer)


@pytest.fixture
async def slow() -> AsyncIterator[SlowReceiver]:
    receiver = SlowReceiver()
    try:
        yield receiver
    finally:
        await receiver.aclose()


def pushed_to(url: str) -> SendMessageRequest:
    config = TaskPushNotificationConfig(url=url)
    return SendMessageRequest(
        message=message("hi", skill="shout"),
        configuration=SendMessageConfiguration(task_push_notification_config=config),
    )


@pytest.mark.parametrize(
    "url", ["http://169.254.169.254/latest/meta-data/", "http://127.0.0.1:6379/", "http://10.0.0.5/admin"]
)
async def test_a_push_to_a_private_address_is_refused_by_default(served: Serve, url: str) -> None:
    server = await served()
    server.gateway.router.register(shout())
    async with server.client() as client:
        with pytest.raises(Exception, match="Invalid push notification URL"):
            await task_of(client, pushed_to(url))


async def test_a_slow_receiver_does_not_hold_the_task(served: Serve, slow: SlowReceiver) -> None:
    server = await served(a2a_private_push=True)
    server.gateway.router.register(shout())
    url = await slow.start()
    async with server.client() as client, asyncio.timeout(20):
        # Answered while the receiver still holds the first push it was sent.
        done = await task_of(client, pushed_to(url))
        await slow.got.wait()
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert not slow.release.is_set()


async def test_a_refused_stream_blames_whom_a_blocking_call_blames(served: Serve) -> None:
    server = await served()
    server.gateway.router.register(shout())
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendStreamingMessage",
        "params": {
            "message": {
                "messageId": "m-loop",
                "role": "ROLE_USER",
                "parts": [{"text": "hi"}],
                "metadata": {"skill": "shout", "agent-reach/depth": 99},
            }
        },
    }
    last: dict[str, Any] = {}
    async with httpx.AsyncClient(timeout=30, headers={"A2A-Version": "1.0"}) as http:
        async with http.stream("POST", f"{server.url}/a2a", json=body) as response:
            async for line in response.aiter_lines():
                if line.startswith("data:"):
                    last = json.loads(line[5:])["result"]
        task_id = last["statusUpdate"]["taskId"]
    async with server.client() as client:
        stored = await client.get_task(GetTaskRequest(id=task_id))
    meta = meta_of(stored)
    assert stored.status.state == TaskState.TASK_STATE_REJECTED
    assert (meta["agent-reach/error_type"], meta["agent-reach/fault"]) == ("LoopDetectedError", "caller")
