"""The A2A agent the A2A benchmark calls: an a2a-sdk server with a JSON skill and a text skill.

``python -m benchmarks.a2a_bench_server [--no-streaming]`` listens on 127.0.0.1, a free port, and
prints ``a2a ready: url=...``. Each call completes a task with one artifact, the common shape.
"""

from __future__ import annotations

import argparse
import asyncio
import socket

import uvicorn
from a2a.helpers import new_data_part, new_text_part
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
    Task,
    TaskState,
    TaskStatus,
)
from google.protobuf import json_format
from starlette.applications import Starlette


class BenchExecutor(AgentExecutor):
    """``sum`` adds ``a`` and ``b`` of a data part; ``echo`` returns the text."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        message = context.message
        assert message is not None
        assert context.task_id is not None
        assert context.context_id is not None
        status = TaskStatus(state=TaskState.TASK_STATE_SUBMITTED)
        await event_queue.enqueue_event(
            Task(id=context.task_id, context_id=context.context_id, status=status)
        )
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        skill = (
            message.metadata.fields["skill"].string_value if "skill" in message.metadata.fields else "echo"
        )
        if skill == "sum":
            data = json_format.MessageToDict(message.parts[0].data)
            await updater.add_artifact([new_data_part({"sum": data["a"] + data["b"]})])
        else:
            await updater.add_artifact([new_text_part(context.get_user_input())])
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None
        assert context.context_id is not None
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def card(url: str, *, streaming: bool) -> AgentCard:
    return AgentCard(
        name="bench",
        description="The A2A benchmark's agent.",
        version="1.0.0",
        supported_interfaces=[AgentInterface(url=url, protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=streaming),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[
            AgentSkill(id="sum", name="Sum", description="Add a and b.", tags=["add"],
                       input_modes=["application/json"], output_modes=["application/json"]),
            AgentSkill(id="echo", name="Echo", description="Echo the text.", tags=["echo"]),
        ],
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--no-streaming", action="store_true")
    args = parser.parse_args()
    sock = socket.create_server(("127.0.0.1", 0))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    agent_card = card(f"{url}/a2a", streaming=not args.no_streaming)
    handler = DefaultRequestHandler(
        agent_executor=BenchExecutor(), task_store=InMemoryTaskStore(), agent_card=agent_card
    )
    app = Starlette(
        routes=[*create_agent_card_routes(agent_card), *create_jsonrpc_routes(handler, rpc_url="/a2a")]
    )
    server = uvicorn.Server(uvicorn.Config(app, log_config=None, lifespan="off", access_log=False))

    async def run() -> None:
        task = asyncio.create_task(server.serve(sockets=[sock]))
        while not server.started:
            await asyncio.sleep(0.01)
        print(f"a2a ready: url={url}", flush=True)
        await task

    asyncio.run(run())


if __name__ == "__main__":
    main()
