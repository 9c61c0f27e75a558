"""MCP demo: ``python -m examples.mcp_demo`` (or ``make demo``-style, from the repository root).

1. Scans two MCP servers over stdio into one router: the real ``mcp-server-time`` package and two
   replicas of this demo's own text-tools server.
2. Routes calls to their tools.
3. Kills the replica that answered and shows the other one taking over, then the killed one
   coming back on its own.
4. Serves the router itself as an MCP server over streamable HTTP and calls it with the SDK's
   client: one endpoint that reaches every server behind the router.
"""

from __future__ import annotations

# ruff: noqa: E402
# What the demo needs is checked before it is imported: a missing package is one line saying what to run.
from examples.needs import require

require("examples.mcp_demo", "mcp", "uvicorn", "mcp_server_time")

import asyncio
import json
import logging
import os
import signal
import sys
from collections.abc import Callable
from pathlib import Path

from mcp import Client, StdioServerParameters
from mcp.types import TextContent

from middleware import ReachResult
from reach_adapters import AgentState, Router
from reach_adapters.mcp import MCPOptions, MCPServerAgent, ReconnectPolicy, start_mcp_server

ROOT = Path(__file__).resolve().parents[2]


async def _connect() -> list[MCPServerAgent | BaseException]:
    """The time server and two replicas of the demo's own; one that fails is reported, not fatal."""
    quick = MCPOptions(reconnect=ReconnectPolicy(initial_delay_s=0.5))
    replicas = [
        MCPServerAgent.connect(
            "text",
            StdioServerParameters(
                command="python", args=["-m", "examples.mcp_demo.server"], env={"REPLICA": replica}, cwd=ROOT
            ),
            options=quick.model_copy(update={"instance": replica}),
        )
        for replica in ("a", "b")
    ]
    time_server = MCPServerAgent.connect("time", command="python", args=["-m", "mcp_server_time"])
    return await asyncio.gather(time_server, *replicas, return_exceptions=True)


def _section(title: str) -> None:
    print(f"\n== {title}")


def _show(label: str, result: ReachResult) -> None:
    outcome = json.dumps(result.payload) if result.ok else f"{result.status}: {result.error}"
    served = f"served by {result.agent_id}" if result.agent_id else "not served"
    print(f"  {label:<34} -> {outcome}   [{served}]")


def _state(router: Router, agent_id: str) -> AgentState:
    return next(info.state for info in router.catalog() if info.agent_id == agent_id)


async def _until(check: Callable[[], bool], seconds: float) -> None:
    async with asyncio.timeout(seconds):
        while not check():
            await asyncio.sleep(0.02)


async def main() -> None:
    # Warnings (the killed replica going offline) interleave with the demo's own output.
    logging.basicConfig(level=logging.WARNING, format="  [log] %(message)s", stream=sys.stdout)
    async with Router() as router:
        _section("1. connect the servers and scan their tools")
        for outcome in await _connect():
            if isinstance(outcome, MCPServerAgent):
                router.register(outcome)
            else:
                print(f"  ! could not connect: {outcome}")
        for info in router.catalog():
            names = ", ".join(cap.name for cap in info.capabilities)
            print(f"  {info.agent_id:<12} {info.state:<7} {names}")

        _section("2. route calls to the tools")
        _show(
            "get_current_time(Europe/Paris)",
            await router.route("get_current_time", {"timezone": "Europe/Paris"}),
        )
        _show("word_count", await router.route("word_count", {"text": "one router, many servers"}))
        _show("reverse_words", await router.route("reverse_words", {"text": "find deliver survive"}))

        _section("3. failover between the two text replicas")
        who = await router.route("whoami", {})
        _show("whoami", who)
        assert isinstance(who.payload, dict)
        victim = who.agent_id or ""
        pid = who.payload["pid"]
        assert isinstance(pid, int)
        os.kill(pid, signal.SIGKILL)
        print(f"  killed {victim} (pid {pid})")
        await _until(lambda: _state(router, victim) is AgentState.RECONNECTING, 10)
        print(f"  {victim} is {_state(router, victim)}")
        for _ in range(3):
            _show("whoami", await router.route("whoami", {}))
        await _until(lambda: _state(router, victim) is AgentState.ONLINE, 30)
        print(f"  {victim} reconnected by itself: {_state(router, victim)}")

        _section("4. the router served as an MCP server")
        async with await start_mcp_server(router, port=0) as endpoint, Client(endpoint.url) as client:
            print(f"  listening on {endpoint.url}")
            tools = (await client.list_tools()).tools
            print(f"  tools: {', '.join(sorted(tool.name for tool in tools))}")
            for name, arguments in (
                ("get_current_time", {"timezone": "Asia/Tokyo"}),
                ("word_count", {"text": "through the gateway"}),
            ):
                answer = await client.call_tool(name, arguments)
                text = "".join(block.text for block in answer.content if isinstance(block, TextContent))
                print(f"  {name:<17} -> {json.dumps(answer.structured_content) or text}")
    print("\nall sessions closed, no server process left behind")


if __name__ == "__main__":
    asyncio.run(main())
