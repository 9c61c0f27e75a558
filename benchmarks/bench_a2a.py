"""A2A adapter benchmark; every figure and its baseline are measured in the same run.

A routed call (``router.route`` -> `A2AAgent` -> the agent) against the a2a-sdk client calling the
same agent directly: ``ClientFactory().create(card)`` made once, ``send_message`` with the same
message (the same parts, built with the SDK's helpers, and the ``skill`` metadata) read to its
last event. The agent is an a2a-sdk server in another process (benchmarks/a2a_bench_server.py),
once streaming (SSE, the SDK client's default when the card allows it) and once without
streaming (one blocking ``SendMessage``). Target: routed / direct <= 1.10x at p50.

Run: ``python -m benchmarks.bench_a2a [--calls N]``.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from uuid import uuid4

import httpx
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.helpers import new_data_part, new_text_part
from a2a.types.a2a_pb2 import Message, Part, Role, SendMessageRequest
from google.protobuf import struct_pb2
from pydantic import JsonValue

from benchmarks.bench_mcp import alternating, report, verdict
from reach_adapters import Router
from reach_adapters.a2a import A2AAgent
from reach_adapters.a2a.parts import JSON_MEDIA_TYPE, payload_parts

ROOT = Path(__file__).resolve().parents[1]
TARGET = 1.10
READY = re.compile(r"^a2a ready: url=(\S+)$")
CASES: dict[str, tuple[str, JsonValue]] = {
    "sum (JSON)": ("sum", {"a": 1, "b": 2}),
    "echo (text)": ("echo", {"text": "hello"}),
}


@asynccontextmanager
async def bench_server(*args: str) -> AsyncIterator[str]:
    """The benchmark's agent in a subprocess; its base URL."""
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "benchmarks.a2a_bench_server", *args,
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), 30)).decode().strip()
        match = READY.match(line)
        if match is None:
            sys.exit(f"the A2A benchmark agent did not start: {line!r}")
        yield match.group(1)
    finally:
        process.kill()
        await process.wait()


async def direct_client(url: str) -> tuple[Client, httpx.AsyncClient]:
    """The a2a-sdk client as its documentation makes one: the card resolved, one client reused."""
    http = httpx.AsyncClient()
    card = await A2ACardResolver(http, url).get_agent_card()
    return ClientFactory(ClientConfig(httpx_client=http)).create(card), http


def sdk_parts(payload: Any) -> list[Part]:
    """The parts `payload_parts` makes, built with the SDK's own helpers, as its users build them."""
    text = payload.get("text") if isinstance(payload, dict) and len(payload) == 1 else None
    if isinstance(text, str):
        return [new_text_part(text)]
    return [new_data_part(payload, media_type=JSON_MEDIA_TYPE)]


async def direct_call(client: Client, skill: str, payload: Any) -> None:
    metadata = struct_pb2.Struct()
    metadata["skill"] = skill
    message = Message(
        message_id=uuid4().hex, role=Role.ROLE_USER, parts=sdk_parts(payload), metadata=metadata
    )
    async for _ in client.send_message(SendMessageRequest(message=message)):
        pass


async def routed_call(router: Router, skill: str, payload: Any) -> None:
    result = await router.route(skill, payload)
    if not result.ok:
        sys.exit(f"routed call failed: {result.error}")


async def bench(label: str, calls: int, *server_args: str) -> None:
    print(f"\n{label}")
    async with bench_server(*server_args) as url:
        client, http = await direct_client(url)
        async with Router() as router:
            router.register(await A2AAgent.connect(url))
            for case, (skill, payload) in CASES.items():
                direct = f"direct: a2a-sdk Client.send_message, {case}"
                routed = f"routed: router.route -> A2AAgent, {case}"
                p50 = report(
                    await alternating(
                        {
                            direct: lambda s=skill, p=payload: direct_call(client, s, p),  # type: ignore[misc]
                            routed: lambda s=skill, p=payload: routed_call(router, s, p),  # type: ignore[misc]
                        },
                        calls,
                    )
                )
                ratio = p50[routed] / p50[direct]
                met = verdict(ratio <= TARGET)
                print(f"  {case}: routed / direct at p50: {ratio:.3f}x   (target <= {TARGET}x: {met})")
        await client.close()
        await http.aclose()


async def main(calls: int) -> None:
    for _, payload in CASES.values():
        # Both sides send the same message: the baseline only builds it the SDK's way.
        assert sdk_parts(payload) == payload_parts(payload)
    print(f"A2A adapter benchmark: {calls} calls per case, routed and direct called in turn")
    await bench("1. streaming agent (SendStreamingMessage, SSE)", calls)
    await bench("2. agent without streaming (blocking SendMessage)", calls, "--no-streaming")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=2000)
    options = parser.parse_args()
    asyncio.run(main(options.calls))
