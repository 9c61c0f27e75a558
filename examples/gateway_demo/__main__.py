"""Gateway demo: ``python -m examples.gateway_demo`` (from the repository root).

1. Starts ``reach serve examples/config --port 0`` as a subprocess: LangChain agents, Python
   functions and MCP servers (the real ``mcp-server-time`` and this project's own demo server),
   all from config files.
2. Calls it over MCP with the SDK's client: lists the tools, calls a LangChain-backed tool and
   MCP-backed ones, and shows the decision record of each call.
3. Calls it over the HTTP API: catalog, route, explain, and a capability nobody declares.
4. Stops the server with SIGTERM and prints the structured decision log it wrote.
"""

from __future__ import annotations

# ruff: noqa: E402
# What the demo needs is checked before it is imported: a missing package is one line saying what to run.
from examples.needs import require

require(
    "examples.gateway_demo",
    "mcp",
    "httpx",
    "starlette",
    "uvicorn",
    "langchain",
    "langgraph",
    "mcp_server_time",
)

import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any, cast

import httpx
from mcp import Client
from mcp.types import RequestParamsMeta, TextContent

from examples.processes import ready_fields, running
from middleware import new_task_id, new_trace_id
from reach_adapters.cli.render import render_catalog, render_decision
from reach_adapters.cli.serve import READY_PREFIX
from reach_adapters.mcp.converter import META_PREFIX

ROOT = Path(__file__).resolve().parents[2]
CONFIG = ROOT / "examples" / "config"


def _section(title: str) -> None:
    print(f"\n== {title}")


def _explain(http: httpx.Client, task_id: str) -> None:
    print(render_decision(http.get(f"/api/explain/{task_id}").json(), indent="    "))


async def _over_mcp(mcp_url: str, http: httpx.Client) -> None:
    _section("2. over MCP (the SDK's client, streamable HTTP)")
    async with Client(mcp_url) as client:
        tools = sorted(tool.name for tool in (await client.list_tools()).tools)
        print(f"  tools: {', '.join(tools)}")
        calls: list[tuple[str, dict[str, Any]]] = [
            (
                "refund",
                {"messages": [{"role": "user", "content": "My kettle from order 42 arrived broken."}]},
            ),
            ("get_current_time", {"timezone": "Asia/Tokyo"}),
            ("word_count", {"text": "one router for every agent"}),
        ]
        trace_id = new_trace_id()
        for name, arguments in calls:
            # The caller names the task (and one trace for all three) in the request's _meta; the
            # server routes under those ids, so the decision record can be fetched by task id.
            task_id = new_task_id()
            meta = cast(
                "RequestParamsMeta", {f"{META_PREFIX}task_id": task_id, f"{META_PREFIX}trace_id": trace_id}
            )
            answer = await client.call_tool(name, arguments, meta=meta)
            text = "".join(block.text for block in answer.content if isinstance(block, TextContent))
            # A bare value (the refund's text) comes as text and boxed, {"result": value}: the text says it.
            boxed = (answer.meta or {}).get(f"{META_PREFIX}boxed")
            shown = json.dumps(answer.structured_content) if answer.structured_content and not boxed else text
            print(f"\n  {name}({json.dumps(arguments)[:60]}...)\n    -> {shown}")
            _explain(http, task_id)


def _over_http(http: httpx.Client) -> None:
    _section("3. over the HTTP API")
    for line in render_catalog(http.get("/api/catalog").json()).splitlines():
        print(f"  {line}")
    for capability, payload in (
        ("lookup_order", {"order_id": "42"}),
        ("summarize", {"text": "The kettle arrived broken. I would like my money back, please."}),
        ("translate", {"text": "bonjour"}),
    ):
        result = http.post("/api/route", json={"capability": capability, "payload": payload}).json()
        print(f"\n  POST /api/route {capability} -> [{result['status']}] {json.dumps(result['payload'])}")
        _explain(http, result["task_id"])


async def main() -> None:
    _section("1. reach serve examples/config --port 0")
    with tempfile.TemporaryDirectory() as scratch:
        log = Path(scratch) / "reach.log"
        serve = ("-m", "reach_adapters.cli", "serve", str(CONFIG), "--port", "0", "--log-json")
        async with running(sys.executable, *serve, cwd=ROOT, log=log) as process:
            urls = await ready_fields(process, READY_PREFIX, log, "reach serve")
            print(f"  serving MCP at {urls['mcp']} and the API at {urls['api']}")
            with httpx.Client(base_url=urls["url"], timeout=30) as http:
                await _over_mcp(urls["mcp"], http)
                _over_http(http)
        code = process.returncode
        _section(f"4. stopped with SIGTERM (exit code {code}); the server's decision log")
        for line in log.read_text().splitlines():
            record = json.loads(line) if line.startswith("{") else {}
            if record.get("logger") == "reach_adapters.decisions":
                fields = ("decision_type", "capability", "agent_id", "score", "reason")
                print("  " + json.dumps({key: record.get(key) for key in ("task_id", *fields)}))
    print("\nserver stopped; its MCP servers and their processes are closed")


if __name__ == "__main__":
    asyncio.run(main())
