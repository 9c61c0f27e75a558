"""A real A2A agent written with the a2a-sdk, for the adapter's tests and benchmark.

One executor, one skill per behaviour the adapter maps: a message sent with metadata
``{"skill": id}`` (as a reach client sends) runs that skill. Served in this process
(`serve_agent`) or as a subprocess: ``python -m tests.a2a.agents --port 0`` prints
``a2a ready: url=...`` once it listens.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import socket
import sys
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from a2a.helpers import new_data_part, new_text_message, new_text_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater
from a2a.types.a2a_pb2 import (
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Part,
    Task,
    TaskState,
    TaskStatus,
)
from google.protobuf import json_format
from starlette.applications import Starlette

TEXT = ["text/plain"]
JSON = ["application/json"]

SKILLS = [
    AgentSkill(id="echo", name="Echo", description="Echo the text back.", tags=["echo", "repeat"],
               examples=["say it back"], input_modes=TEXT, output_modes=TEXT),
    AgentSkill(id="hello", name="Hello", description="Greet at once, without a task.", tags=["greet"],
               input_modes=TEXT, output_modes=TEXT),
    AgentSkill(id="sum", name="Sum", description="Add the numbers a and b.", tags=["math", "add"],
               input_modes=JSON, output_modes=JSON),
    AgentSkill(id="slow", name="Slow", description="Work for `seconds`, then answer.", tags=["wait"],
               input_modes=JSON, output_modes=TEXT),
    AgentSkill(id="stream", name="Stream", description="Answer in three chunks.", tags=["chunks"],
               input_modes=TEXT, output_modes=TEXT),
    AgentSkill(id="ask", name="Ask", description="Ask for a name, then greet it.", tags=["name"],
               input_modes=TEXT, output_modes=TEXT),
    AgentSkill(id="fail", tags=["fail"], name="Fail", description="Fail the task.", input_modes=TEXT),
    AgentSkill(id="reject", tags=["reject"], name="Reject", description="Reject the task.", input_modes=TEXT),
    AgentSkill(id="auth", tags=["auth"], name="Auth", description="Ask for credentials.", input_modes=TEXT),
    AgentSkill(id="badjson", tags=["badjson"], name="Bad JSON", description="Answer JSON that is not.",
               input_modes=TEXT),
    AgentSkill(id="meta", tags=["meta"], name="Meta", description="Answer the message's metadata.",
               input_modes=TEXT, output_modes=JSON),
    AgentSkill(id="partial", tags=["partial"], name="Partial",
               description="Answer a chunk, then fail as a reach server whose agent timed out.",
               input_modes=TEXT),
]  # fmt: skip
# What a reach server says of a task whose agent timed out, beside the state `failed`.
TIMED_OUT = {
    "agent-reach/status": "timeout",
    "agent-reach/fault": "agent",
    "agent-reach/error_type": "TimeoutError",
}


@dataclass
class Record:
    """What the agent saw, for tests in this process to check."""

    cancelled: list[str] = field(default_factory=list)
    started: list[str] = field(default_factory=list)


class SkillsExecutor(AgentExecutor):
    """Runs the skill the message's metadata names (``echo`` when it names none)."""

    def __init__(self) -> None:
        self.record = Record()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None
        assert context.context_id is not None
        assert context.message is not None
        message = context.message
        metadata = json_format.MessageToDict(message.metadata)
        skill = str(metadata.get("skill") or "echo")
        if skill == "hello":
            reply = new_text_message(f"hello, {context.get_user_input()}", context_id=context.context_id)
            await event_queue.enqueue_event(reply)
            return
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        if context.current_task is None:
            await event_queue.enqueue_event(
                Task(
                    id=context.task_id,
                    context_id=context.context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[message],
                )
            )
        self.record.started.append(context.task_id)
        await self._run(skill, context, updater, metadata)

    async def _run(
        self, skill: str, context: RequestContext, updater: TaskUpdater, metadata: dict[str, Any]
    ) -> None:
        text = context.get_user_input()
        data = _data(context)
        if skill == "echo":
            await updater.add_artifact([new_text_part(text)], name="echo")
            await updater.complete()
        elif skill == "sum":
            await updater.add_artifact([new_data_part({"sum": data["a"] + data["b"]})])
            await updater.complete()
        elif skill == "slow":
            await updater.start_work()
            await asyncio.sleep(float(data.get("seconds", 0.2)))
            await updater.add_artifact([new_text_part(f"slept {data.get('seconds', 0.2)}")])
            await updater.complete()
        elif skill == "stream":
            await updater.start_work()
            for index, piece in enumerate(("one ", "two ", "three")):
                await updater.add_artifact(
                    [new_text_part(piece)], artifact_id="answer", append=index > 0, last_chunk=index == 2
                )
                await asyncio.sleep(0.01)
            await updater.complete()
        elif skill == "ask":
            await self._ask(context, updater, text)
        elif skill == "fail":
            await updater.failed(updater.new_agent_message([new_text_part("boom")]))
        elif skill == "reject":
            await updater.reject(updater.new_agent_message([new_text_part("not my job")]))
        elif skill == "auth":
            await updater.requires_auth(updater.new_agent_message([new_text_part("token please")]))
        elif skill == "badjson":
            await updater.add_artifact([Part(text="{not json", media_type="application/json")])
            await updater.complete()
        elif skill == "meta":
            await updater.add_artifact([new_data_part(metadata)])
            await updater.complete()
        elif skill == "partial":
            await updater.start_work()
            await asyncio.sleep(0.2)
            await updater.add_artifact([new_text_part("half")])
            said = updater.new_agent_message([new_text_part("timed out")])
            await updater.update_status(TaskState.TASK_STATE_FAILED, said, metadata=TIMED_OUT)
        else:
            await updater.reject(updater.new_agent_message([new_text_part(f"no skill {skill}")]))

    async def _ask(self, context: RequestContext, updater: TaskUpdater, text: str) -> None:
        task = context.current_task
        if task is not None and task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED:
            await updater.add_artifact([new_text_part(f"hello {text} (context {context.context_id})")])
            await updater.complete()
            return
        await updater.requires_input(updater.new_agent_message([new_text_part("what is your name?")]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None
        assert context.context_id is not None
        self.record.cancelled.append(context.task_id)
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def _data(context: RequestContext) -> dict[str, Any]:
    message = context.message
    for part in message.parts if message is not None else ():
        if part.WhichOneof("content") == "data":
            value = json_format.MessageToDict(part.data)
            if isinstance(value, dict):
                return value
    return {}


def agent_card(url: str, *, streaming: bool = True, name: str = "Test Agent") -> AgentCard:
    return AgentCard(
        name=name,
        description="An A2A agent for Agent Reach's tests.",
        version="1.0.0",
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=streaming),
        default_input_modes=TEXT,
        default_output_modes=TEXT,
        skills=SKILLS,
    )


def build_app(url: str, executor: SkillsExecutor, *, streaming: bool = True) -> Starlette:
    card = agent_card(url, streaming=streaming)
    handler = DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card)
    routes = [*create_agent_card_routes(card), *create_jsonrpc_routes(handler, rpc_url="/a2a")]
    return Starlette(routes=routes)


@dataclass
class Served:
    url: str
    executor: SkillsExecutor
    server: uvicorn.Server


@contextlib.asynccontextmanager
async def serve_app(make: Callable[[str], Starlette]) -> AsyncIterator[tuple[str, uvicorn.Server]]:
    """Serve the app `make(base_url)` builds on 127.0.0.1, a free port, in this event loop."""
    sock = socket.create_server(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    config = uvicorn.Config(make(url), log_config=None, lifespan="off", timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    try:
        async with asyncio.timeout(20):
            while not server.started:
                if task.done():
                    task.result()
                await asyncio.sleep(0.01)
        yield url, server
    finally:
        server.should_exit = True
        with contextlib.suppress(Exception):
            async with asyncio.timeout(20):
                await task
        sock.close()


@contextlib.asynccontextmanager
async def serve_agent(*, streaming: bool = True) -> AsyncIterator[Served]:
    """The test agent, served in this event loop; its executor's record is readable."""
    executor = SkillsExecutor()
    async with serve_app(lambda url: build_app(f"{url}/a2a", executor, streaming=streaming)) as (url, server):
        yield Served(url, executor, server)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--no-streaming", action="store_true")
    args = parser.parse_args(argv)
    sock = socket.create_server(("127.0.0.1", args.port))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    app = build_app(f"{url}/a2a", SkillsExecutor(), streaming=not args.no_streaming)
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, lifespan="off", log_level="warning"))

    async def run() -> None:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
        print(f"a2a ready: url={url}", flush=True)
        await task

    asyncio.run(run())
    sys.exit(0)


if __name__ == "__main__":
    main()
