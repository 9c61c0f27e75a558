"""MCP adapter benchmarks; every figure and its baseline are measured in the same run.

1. stdio: a routed call (``router.route`` -> `MCPServerAgent` -> stdio server) against a direct
   ``ClientSession.call_tool`` on a persistent session to another copy of the same server, opened
   with ``stdio_client`` + ``initialize()`` and having listed the tools once, as any real client
   does. Target: routed / ClientSession <= 1.10x at p50. Also shown against a persistent
   ``mcp.Client`` (which negotiates 2026-07-28 by ``server/discover``, as the router's own client
   does) and a bare ``ClientSession`` that adopted 2026-07-28 by ``discover()``, each with its tools
   listed, each on its own server process; and a routed call whose agent keeps to 2025-11-25
   (``MCPOptions(protocol="2025-11-25")``), the baseline session's version, which shows the
   router's own cost apart from the protocol's.
2. Gateway hop: an MCP client calling the router served as an MCP server, which calls the
   upstream server, against the client calling the upstream directly; the upstream in process.
   Target: the hop adds <= 1 ms at p50. Shown with the client in process and over streamable HTTP.
3. langchain-mcp-adapters (mcp 1.x, in its own virtual environment ``benchmarks/.venv-lcmcp``,
   created on first run) calling the same stdio server: its default tools (a new session per call)
   and its persistent-session tools, as ratios to ours.

Run: ``python -m benchmarks.bench_mcp [--calls N] [--no-lcmcp]``.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import socket
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

import uvicorn
from mcp import Client, ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

from benchmarks.mcp_bench_server import server as upstream
from benchmarks.stats import measure, summary
from reach_adapters import Router
from reach_adapters.langchain import ReachToolkit
from reach_adapters.mcp import MCPOptions, MCPServerAgent, RouterMCPServer, start_mcp_server

ROOT = Path(__file__).resolve().parents[1]
SERVER = str(Path(__file__).with_name("mcp_bench_server.py"))
LCMCP_VENV = Path(__file__).with_name(".venv-lcmcp")
STDIO_TARGET = 1.10
HOP_TARGET_MS = 1.0
ARGS = {"a": 1, "b": 2}

Cases = dict[str, Callable[[], Awaitable[Any]]]


async def alternating(cases: Cases, calls: int) -> dict[str, list[float]]:
    """Per-call latencies in µs, the cases called in turn one call each: whatever else the machine
    does at any moment slows them all alike. Which goes first rotates, so each case also runs right
    after each other one equally often."""
    for call in cases.values():
        await measure(call, 0)  # its warm-up only
    samples: dict[str, list[float]] = {name: [] for name in cases}
    items = list(cases.items())
    clock = time.perf_counter
    gc.collect()
    gc.disable()
    try:
        for i in range(calls):
            shift = i % len(items)
            for name, call in items[shift:] + items[:shift]:
                start = clock()
                await call()
                samples[name].append((clock() - start) * 1e6)
    finally:
        gc.enable()
    return samples


def report(samples: dict[str, list[float]]) -> dict[str, float]:
    """Print p50/p99 of each case in microseconds; return the p50s."""
    p50s: dict[str, float] = {}
    for name, values in samples.items():
        p50, p99 = summary(values)
        p50s[name] = p50
        print(f"  {name:<52} p50 {p50:>9.1f} µs   p99 {p99:>9.1f} µs   (n={len(values)})")
    return p50s


def verdict(met: bool) -> str:
    return "met" if met else "NOT MET"


@asynccontextmanager
async def bare_session(
    params: StdioServerParameters, *, modern: bool = False
) -> AsyncIterator[ClientSession]:
    """A bare SDK session over stdio, opened as the SDK documents it: ``stdio_client`` +
    ``ClientSession(read, write)`` + ``initialize()`` (or ``discover()`` with `modern`, the
    2026-07-28 way in); the tools listed once, as any real client does before calling them."""
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        if modern:
            await session.discover()
        else:
            await session.initialize()
        await session.list_tools()
        yield session


async def bench_stdio(calls: int) -> None:
    print("\n1. stdio: routed call vs direct call_tool on a persistent SDK session (tools listed first)")
    params = StdioServerParameters(command=sys.executable, args=[SERVER])
    session_case = "direct: ClientSession.call_tool (initialize)"
    modern_case = "direct: ClientSession.call_tool (discover)"
    client_case = "direct: mcp.Client.call_tool"
    routed_case = "routed: router.route -> MCPServerAgent"
    legacy_case = "routed: ... MCPOptions(protocol='2025-11-25')"
    async with AsyncExitStack() as stack:
        session = await stack.enter_async_context(bare_session(params))
        modern = await stack.enter_async_context(bare_session(params, modern=True))
        client = await stack.enter_async_context(Client(params))
        await client.list_tools()
        router = await stack.enter_async_context(Router())
        agent = await MCPServerAgent.connect("bench", command=sys.executable, args=[SERVER])
        router.register(agent)
        # The same, keeping to the baseline session's protocol version: the router's own cost.
        legacy_router = await stack.enter_async_context(Router())
        options = MCPOptions(protocol="2025-11-25")
        legacy = await MCPServerAgent.connect("bench", command=sys.executable, args=[SERVER], options=options)
        legacy_router.register(legacy)
        routed_client = agent._connection.client  # only to show its protocol version
        versions = {
            session_case: session.protocol_version,
            modern_case: modern.protocol_version,
            client_case: client.protocol_version,
            routed_case: routed_client.protocol_version if routed_client is not None else "?",
        }
        print("  protocol versions: " + "; ".join(f"{case}: {v}" for case, v in versions.items()))
        p50 = report(
            await alternating(
                {
                    session_case: lambda: session.call_tool("add", ARGS),
                    modern_case: lambda: modern.call_tool("add", ARGS),
                    client_case: lambda: client.call_tool("add", ARGS),
                    routed_case: lambda: router.route("add", ARGS),
                    legacy_case: lambda: legacy_router.route("add", ARGS),
                },
                calls,
            )
        )
    ratio = p50[routed_case] / p50[session_case]
    met = verdict(ratio <= STDIO_TARGET)
    print(f"  routed / ClientSession (initialize) at p50: {ratio:.3f}x   (target <= {STDIO_TARGET}x: {met})")
    print(f"  routed / ClientSession (discover) at p50:   {p50[routed_case] / p50[modern_case]:.3f}x")
    print(f"  routed / mcp.Client at p50:                 {p50[routed_case] / p50[client_case]:.3f}x")
    same = p50[legacy_case] / p50[session_case]
    print(f"  routed with protocol 2025-11-25 / ClientSession (initialize), one version: {same:.3f}x")


@asynccontextmanager
async def served_directly() -> AsyncIterator[str]:
    """The upstream server alone over streamable HTTP: the baseline of the HTTP gateway case."""
    sock = socket.create_server(("127.0.0.1", 0))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as start_mcp_server does
    config = uvicorn.Config(upstream.streamable_http_app(), log_config=None, timeout_graceful_shutdown=1)
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        await asyncio.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
    finally:
        server.should_exit = True
        await task
        sock.close()


async def bench_gateway(calls: int) -> None:
    print(
        "\n2. gateway hop: client -> reach MCP server -> upstream vs client -> upstream (upstream in process)"
    )
    async with Router() as router:
        router.register(await MCPServerAgent.connect("bench", server=upstream))
        reach = RouterMCPServer(router)
        async with (
            Client(upstream) as direct,
            Client(reach.server) as via,
            served_directly() as direct_url,
            Client(direct_url) as direct_http,
            await start_mcp_server(router) as endpoint,
            Client(endpoint.url) as via_http,
        ):
            in_process = await alternating(
                {
                    "in process: client -> upstream": lambda: direct.call_tool("add", ARGS),
                    "in process: client -> reach -> upstream": lambda: via.call_tool("add", ARGS),
                },
                calls,
            )
            over_http = await alternating(
                {
                    "HTTP: client -> upstream": lambda: direct_http.call_tool("add", ARGS),
                    "HTTP: client -> reach -> upstream (in process)": lambda: via_http.call_tool("add", ARGS),
                },
                calls,
            )
            p50 = report(in_process | over_http)
        reach.close()
    pairs = {
        "in process": ("in process: client -> upstream", "in process: client -> reach -> upstream"),
        "HTTP": ("HTTP: client -> upstream", "HTTP: client -> reach -> upstream (in process)"),
    }
    for transport, (baseline, hop) in pairs.items():
        added_ms = (p50[hop] - p50[baseline]) / 1000.0
        met = verdict(added_ms <= HOP_TARGET_MS)
        print(f"  {transport}: the hop adds {added_ms:.3f} ms at p50   (target <= {HOP_TARGET_MS} ms: {met})")


def lcmcp_python() -> Path:
    """The python of a separate venv with langchain-mcp-adapters and mcp 1.x, made on first use."""
    python = LCMCP_VENV / "bin" / "python"
    marker = LCMCP_VENV / ".installed"
    if not marker.exists():
        print(f"  creating {LCMCP_VENV} with langchain-mcp-adapters and mcp<2 ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(LCMCP_VENV)], check=True)
        pip = [str(python), "-m", "pip", "install", "-q", "langchain-mcp-adapters", "mcp<2"]
        installed = subprocess.run(pip, capture_output=True, text=True)
        if installed.returncode != 0:
            sys.exit(f"installing langchain-mcp-adapters failed:\n{installed.stderr}")
        marker.touch()
    return python


def lcmcp_version(python: Path) -> str:
    code = "import importlib.metadata as m; print(m.version('langchain-mcp-adapters'), m.version('mcp'))"
    out = subprocess.run([str(python), "-c", code], check=True, capture_output=True, text=True).stdout.split()
    return f"langchain-mcp-adapters {out[0]}, mcp {out[1]}"


async def bench_lcmcp(calls: int, fresh_calls: int) -> None:
    print("\n3. vs langchain-mcp-adapters, same stdio server")
    python = lcmcp_python()
    print(f"  ({lcmcp_version(python)}, in {LCMCP_VENV.name})")
    probe = [str(python), "-m", "benchmarks.lcmcp_probe", "--server-python", sys.executable]
    probe += ["--calls", str(calls), "--fresh-calls", str(fresh_calls)]
    done = await asyncio.to_thread(
        subprocess.run, probe, cwd=ROOT, check=True, capture_output=True, text=True
    )
    theirs: dict[str, list[float]] = json.loads(done.stdout)
    async with Router() as router:
        router.register(await MCPServerAgent.connect("bench", command=sys.executable, args=[SERVER]))
        tool = next(t for t in ReachToolkit(router).get_tools() if t.name == "add")
        ours = await alternating(
            {
                "ours: router.route": lambda: router.route("add", ARGS),
                "ours: ReachToolkit tool.ainvoke (LangChain tool)": lambda: tool.ainvoke(ARGS),
            },
            calls,
        )
    p50 = report(
        {
            "theirs: default tool (new session per call)": theirs["default"],
            "theirs: persistent-session tool": theirs["persistent"],
            **ours,
        }
    )
    for base in ("ours: router.route", "ours: ReachToolkit tool.ainvoke (LangChain tool)"):
        for other in ("theirs: default tool (new session per call)", "theirs: persistent-session tool"):
            print(f"  {other} / {base}: {p50[other] / p50[base]:.2f}x")


async def main(calls: int, with_lcmcp: bool) -> None:
    print(f"MCP adapter benchmarks: {calls} calls per case, the cases of each table called in turn")
    await bench_stdio(calls)
    await bench_gateway(calls)
    if with_lcmcp:
        await bench_lcmcp(calls, fresh_calls=20)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--no-lcmcp", action="store_true", help="skip the langchain-mcp-adapters comparison")
    options = parser.parse_args()
    asyncio.run(main(options.calls, not options.no_lcmcp))
