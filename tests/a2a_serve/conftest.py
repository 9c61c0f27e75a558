"""The router served as an A2A agent: in-process gateways on 127.0.0.1, port 0, with agents
registered in code, and helpers that talk to them with the a2a-sdk client."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.types.a2a_pb2 import (
    AgentCard,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    Task,
)
from google.protobuf import json_format, struct_pb2

from reach_adapters.config import load_config
from reach_adapters.gateway import Gateway, GatewayEndpoint, listen, serve_http
from tests.cluster.conftest import own_redis, redis_server
from tests.gateway.conftest import config_dir, serve, write

__all__ = [
    "PushReceiver",
    "Serve",
    "Served",
    "config_dir",
    "message",
    "meta_of",
    "own_redis",
    "redis_server",
    "request",
    "serve",
    "served",
    "task_of",
    "text_of",
]


@dataclass
class Served:
    """A gateway served in this process: its router takes agents registered in code."""

    gateway: Gateway
    endpoint: GatewayEndpoint
    directory: Path

    @property
    def url(self) -> str:
        return self.endpoint.url

    async def card(self, headers: dict[str, str] | None = None) -> AgentCard:
        async with httpx.AsyncClient(headers=headers, timeout=10) as http:
            return await A2ACardResolver(http, self.url).get_agent_card()

    @asynccontextmanager
    async def client(
        self, *, streaming: bool = False, headers: dict[str, str] | None = None, polling: bool = False
    ) -> AsyncIterator[Client]:
        async with httpx.AsyncClient(headers=headers, timeout=30) as http:
            card = await A2ACardResolver(http, self.url).get_agent_card()
            config = ClientConfig(streaming=streaming, httpx_client=http, polling=polling)
            client = ClientFactory(config).create(card)
            try:
                yield client
            finally:
                await client.close()


Serve = Callable[..., Awaitable[Served]]


@pytest.fixture
async def served(tmp_path: Path) -> AsyncIterator[Serve]:
    """`serve(security=None, files=None, **options)`: a gateway over a config directory holding
    `files` (name -> text; `security` as security.yaml), served on 127.0.0.1 port 0 with
    `serve_http`'s `options`; all are closed after the test."""
    started: list[Served] = []

    async def serve(
        security: str | None = None, *, files: dict[str, str] | None = None, **options: Any
    ) -> Served:
        directory = tmp_path / f"config{len(started)}"
        directory.mkdir()
        if security is not None:
            write(directory, "security.yaml", security)
        for name, text in (files or {}).items():
            write(directory, name, text)
        gateway = await Gateway.from_config(load_config(directory))
        endpoint = await serve_http(gateway, listen("127.0.0.1", 0), **options)
        served = Served(gateway, endpoint, directory)
        started.append(served)
        return served

    try:
        yield serve
    finally:
        for one in started:
            await one.endpoint.aclose()
            await one.gateway.aclose()


class PushReceiver:
    """A local HTTP endpoint a task's pushes are sent to; `_serve` answers each connection."""

    def __init__(self) -> None:
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        """Listen on 127.0.0.1, a free port; the URL to give as the push config's."""
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"http://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/push"

    async def aclose(self) -> None:
        if self.server is not None:
            self.server.close()
            await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError

    @staticmethod
    async def _ok(writer: asyncio.StreamWriter) -> None:
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
        await writer.drain()
        writer.close()


def message(
    content: str | dict[str, Any],
    *,
    skill: str | None = None,
    task_id: str = "",
    context_id: str = "",
    metadata: dict[str, Any] | None = None,
) -> Message:
    """A user message: text as a text part, a dict as one data part; `skill` in its metadata."""
    if isinstance(content, str):
        part = Part(text=content)
    else:
        part = Part(data=json_format.ParseDict(content, struct_pb2.Value()), media_type="application/json")
    meta = dict(metadata or {})
    if skill is not None:
        meta["skill"] = skill
    out = Message(
        message_id=uuid.uuid4().hex,
        role=Role.ROLE_USER,
        parts=[part],
        task_id=task_id,
        context_id=context_id,
    )
    if meta:
        out.metadata.update(meta)
    return out


def request(msg: Message, *, immediately: bool = False) -> SendMessageRequest:
    return SendMessageRequest(
        message=msg, configuration=SendMessageConfiguration(return_immediately=immediately)
    )


async def task_of(client: Client, req: SendMessageRequest) -> Task:
    """The task a (non-streaming) send ends with."""
    last: StreamResponse | None = None
    async for event in client.send_message(req):
        last = event
    assert last is not None
    assert last.HasField("task"), last
    return last.task


def text_of(task: Task) -> str:
    return "\n".join(part.text for artifact in task.artifacts for part in artifact.parts)


def meta_of(task: Task) -> dict[str, Any]:
    return json_format.MessageToDict(task.metadata)
