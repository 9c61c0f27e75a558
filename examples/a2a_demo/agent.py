"""The demo's A2A agent: a parcel service written with the a2a-sdk, knowing nothing of Agent Reach.

Two skills: ``track_parcel`` takes JSON and answers JSON, ``apology_note`` takes text and answers
text. Run it alone: ``python -m examples.a2a_demo.agent`` listens on 127.0.0.1 (``--port``, an
OS-assigned one by default) and prints ``shipping agent ready: url=...`` once it does, then one
line per message it works on, so the demo can show what arrived over A2A.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import socket
from typing import Any

import uvicorn
from a2a.helpers import get_data_parts, new_data_part, new_text_part
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

READY_PREFIX = "shipping agent ready:"

TEXT = ["text/plain"]
JSON = ["application/json"]
SKILLS = [
    AgentSkill(
        id="track_parcel",
        name="Track a parcel",
        description="Where a parcel is and when it arrives, by its parcel id.",
        tags=["parcel", "tracking", "delivery"],
        examples=['{"parcel_id": "PX-7"}'],
        input_modes=JSON,
        output_modes=JSON,
    ),
    AgentSkill(
        id="apology_note",
        name="Apology note",
        description="Write a short apology to a customer, from their complaint.",
        tags=["apology", "apologise"],
        examples=["The parcel came a week late."],
        input_modes=TEXT,
        output_modes=TEXT,
    ),
]

# Where the demo's parcels are; any other id is answered as unknown.
PARCELS = {
    "PX-7": {"status": "in transit", "last_seen": "Lyon sorting hub", "eta_days": 2},
    "PX-9": {"status": "delivered", "last_seen": "front door, Rue Mercière 12", "eta_days": 0},
}


class ShippingExecutor(AgentExecutor):
    """Runs the skill the message's metadata names; a message naming none is told by its parts
    (a data part asks for tracking, text for a note), as a plain A2A client sends them."""

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None
        assert context.context_id is not None
        assert context.message is not None
        metadata = json_format.MessageToDict(context.message.metadata)
        data = [value for value in get_data_parts(context.message.parts) if isinstance(value, dict)]
        skill = str(metadata.get("skill") or ("track_parcel" if data else "apology_note"))
        # The router's hop metadata, one JSON string (docs/a2a.md): shown so the demo can tie each
        # call to its task.
        hop = json.loads(str(metadata.get("agent-reach", "{}")))
        task_id, trace_id = (hop.get(key, "-") for key in ("task_id", "trace_id"))
        print(f"shipping agent ran {skill} (task {task_id}, trace {trace_id})", flush=True)
        if context.current_task is None:
            await event_queue.enqueue_event(
                Task(
                    id=context.task_id,
                    context_id=context.context_id,
                    status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED),
                    history=[context.message],
                )
            )
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        if skill == "track_parcel" and data:
            await updater.add_artifact([new_data_part(_track(data[0]))], name="tracking")
            await updater.complete()
        elif skill == "apology_note":
            await updater.add_artifact([new_text_part(_apology(context.get_user_input()))], name="note")
            await updater.complete()
        else:
            reason = f"no skill {skill!r} for these parts; skills: track_parcel (JSON), apology_note (text)"
            await updater.reject(updater.new_agent_message([new_text_part(reason)]))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None
        assert context.context_id is not None
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def _track(request: dict[str, Any]) -> dict[str, Any]:
    parcel_id = str(request.get("parcel_id", ""))
    return {"parcel_id": parcel_id, **PARCELS.get(parcel_id, {"status": "unknown parcel id"})}


def _apology(complaint: str) -> str:
    first = complaint.strip().split(". ")[0].rstrip(".")
    return f"Dear customer, we are sorry: {first[:1].lower()}{first[1:]}. A voucher is on its way."


def build_app(base_url: str) -> Starlette:
    """The agent's card at ``/.well-known/agent-card.json``, JSON-RPC at ``/a2a``."""
    card = AgentCard(
        name="Shipping Agent",
        description="Tracks parcels and writes apology notes.",
        version="1.0.0",
        supported_interfaces=[
            AgentInterface(url=f"{base_url}/a2a", protocol_binding="JSONRPC", protocol_version="1.0")
        ],
        capabilities=AgentCapabilities(streaming=True),
        default_input_modes=TEXT,
        default_output_modes=TEXT,
        skills=SKILLS,
    )
    handler = DefaultRequestHandler(
        agent_executor=ShippingExecutor(), task_store=InMemoryTaskStore(), agent_card=card
    )
    return Starlette(
        routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, rpc_url="/a2a")]
    )


async def serve(port: int) -> None:
    sock = socket.create_server(("127.0.0.1", port))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}"
    config = uvicorn.Config(build_app(url), log_config=None, lifespan="off", timeout_graceful_shutdown=2)
    server = uvicorn.Server(config)  # it stops on SIGTERM or SIGINT
    task = asyncio.create_task(server.serve(sockets=[sock]))
    async with asyncio.timeout(30):
        while not server.started:
            if task.done():
                task.result()
            await asyncio.sleep(0.01)
    print(f"{READY_PREFIX} url={url}", flush=True)
    await task


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=0, help="0 (the default): one the OS assigns")
    asyncio.run(serve(parser.parse_args().port))


if __name__ == "__main__":
    main()
