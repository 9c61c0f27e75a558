"""Gateway throughput: the router served at ``/mcp`` as ``reach serve`` serves it, against the same
trivial tool served by a bare SDK ``MCPServer`` over streamable HTTP on the same machine.

Target (issue 12): the gateway, with a trivial upstream tool and many concurrent client sessions,
reaches >= 0.95x the bare server's calls/s. Server CPU time per call is shown beside it.

Each server runs in a process of its own, bound to 127.0.0.1 on a port the OS picks, so the load
the clients make and the CPU the server spends are kept apart; the server's CPU time is read from
``/proc/<pid>/stat``. The servers:

- ``baseline``: the bare ``MCPServer`` of ``benchmarks/mcp_bench_server.py`` (``add(a, b)``),
  ``streamable_http_app()`` under uvicorn, as ``MCPServer.run("streamable-http")`` would serve it;
- ``mcp-agent``: a `Router` whose one agent is an `MCPServerAgent` connected in process to that
  same ``MCPServer`` (a real MCP hop, in memory), in a `Gateway` served by `serve_http`: MCP at
  ``/mcp`` and the HTTP API beside it, as ``reach serve`` does;
- ``function``: the same, with a `FunctionAgent` of the same ``add`` function as the one agent.

N concurrent ``mcp.Client`` sessions (each on its own HTTP connection) call ``add`` in a loop; each
round opens them, lets them warm up, then counts the calls completed in a fixed window. Rounds of
the three servers are interleaved (the order rotating), so drift of a shared machine reaches all.
When the bare server is not saturated (the clients, all in this one process, may cost more CPU per
call than it does: on a 2-core machine they do), its calls/s is the clients' limit and the calls/s
ratio understates the gap; the server-CPU-per-call ratio is then the one a saturated server shows.

``--profile`` instead runs one round per server with py-spy (``pip install py-spy``) attached to the
server for the window (only the thread holding the GIL is sampled, unless ``--all-threads``), and
shows where each spends its CPU per call, the gateway against the bare server.

Run: ``python -m benchmarks.bench_gateway [--clients N] [--seconds S] [--rounds R] [--profile]``.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import re
import shutil
import socket
import statistics
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

ROOT = Path(__file__).resolve().parents[1]
THROUGHPUT_TARGET = 0.95
ARGS = {"a": 1, "b": 2}
TOOL = "add"
SIDES: dict[str, str] = {
    "baseline": "bare MCPServer",
    "mcp-agent": "gateway -> MCPServerAgent -> MCPServer (in memory)",
    "function": "gateway -> FunctionAgent",
}
SUBJECTS = ("mcp-agent", "function")
Mode = Literal["auto", "legacy"]
_CLK_TCK = os.sysconf("SC_CLK_TCK")


# -- the server process -------------------------------------------------------------------------


def serve(kind: str) -> None:
    """Serve `kind` on 127.0.0.1, any free port; print ``port N pid P``; stop when stdin closes."""
    asyncio.run(_serve(kind))


async def _serve(kind: str) -> None:
    sock = socket.create_server(("127.0.0.1", 0))
    # As start_mcp_server does, so neither side waits out delayed ACKs.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if kind == "baseline":
        await _serve_bare(sock)
    else:
        await _serve_gateway(kind, sock)


def _announce(sock: socket.socket) -> None:
    print(f"port {sock.getsockname()[1]} pid {os.getpid()}", flush=True)


async def _until_stdin_closes() -> None:
    await asyncio.to_thread(sys.stdin.buffer.read)


async def _serve_bare(sock: socket.socket) -> None:
    import uvicorn

    from benchmarks.mcp_bench_server import server as upstream

    # The same uvicorn settings start_mcp_server uses.
    config = uvicorn.Config(
        upstream.streamable_http_app(), log_config=None, lifespan="on", timeout_graceful_shutdown=1
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            task.result()
        await asyncio.sleep(0.01)
    _announce(sock)
    try:
        await _until_stdin_closes()
    finally:
        server.should_exit = True
        await task
        sock.close()


async def _serve_gateway(kind: str, sock: socket.socket) -> None:
    from benchmarks.mcp_bench_server import add
    from benchmarks.mcp_bench_server import server as upstream
    from reach_adapters import FunctionAgent, Router, RoutingPolicy
    from reach_adapters.config import GatewayConfig
    from reach_adapters.gateway import Gateway, serve_http
    from reach_adapters.mcp import MCPServerAgent
    from reach_adapters.router.agent import Agent

    # What Gateway.from_config builds from a directory, with the agent made here: an in-process
    # MCP server cannot be named in a config file.
    policy = RoutingPolicy()
    router = Router(policy)
    agent: Agent
    if kind == "mcp-agent":
        agent = await MCPServerAgent.connect("bench", server=upstream)
    elif kind == "function":
        agent = FunctionAgent(add, agent_id="bench:add:0")
    else:
        sys.exit(f"unknown server kind {kind!r}; pick one of {sorted(SIDES)}")
    router.register(agent)
    config = GatewayConfig(directory=ROOT, files={}, policy=policy, agents={})
    gateway = Gateway(router, config, {agent.agent_id: agent}, drain_timeout_s=1.0)
    endpoint = await serve_http(gateway, sock, shutdown_timeout_s=1.0)
    _announce(sock)
    try:
        await _until_stdin_closes()
    finally:
        await endpoint.aclose()
        await gateway.aclose()


# -- the client side ----------------------------------------------------------------------------


@dataclass
class Server:
    """A server process of one kind, and where it listens."""

    kind: str
    process: asyncio.subprocess.Process
    pid: int
    url: str

    @classmethod
    async def start(cls, kind: str) -> Server:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "benchmarks.bench_gateway",
            "--serve",
            kind,
            cwd=ROOT,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
        )
        assert process.stdout is not None
        line = (await asyncio.wait_for(process.stdout.readline(), 60)).decode()
        found = re.fullmatch(r"port (\d+) pid (\d+)\s*", line)
        if found is None:
            if process.returncode is None:
                process.kill()
            await process.wait()
            sys.exit(f"the {kind} server did not start (said {line!r}); see its output above")
        port, pid = int(found[1]), int(found[2])
        return cls(kind, process, pid, f"http://127.0.0.1:{port}/mcp")

    def cpu_s(self) -> float:
        """User + system CPU seconds of the server process so far (all its threads)."""
        stat = Path(f"/proc/{self.pid}/stat").read_text()
        fields = stat.rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / _CLK_TCK

    async def stop(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            await asyncio.wait_for(self.process.wait(), 10)
        except TimeoutError:
            self.process.kill()
            await self.process.wait()


@dataclass
class Round:
    kind: str
    calls: int
    wall_s: float
    server_cpu_s: float
    client_cpu_s: float
    errors: int
    protocols: set[str] = field(default_factory=set)

    @property
    def calls_per_s(self) -> float:
        return self.calls / self.wall_s

    @property
    def cpu_us_per_call(self) -> float:
        return self.server_cpu_s / self.calls * 1e6

    @property
    def server_busy(self) -> float:
        return self.server_cpu_s / self.wall_s

    @property
    def client_busy(self) -> float:
        return self.client_cpu_s / self.wall_s


async def load_round(
    server: Server,
    *,
    clients: int,
    seconds: float,
    warmup_s: float,
    mode: Mode,
    profile_to: Path | None = None,
    profile_rate: int = 250,
    profile_gil: bool = False,
) -> Round:
    """`clients` sessions call the tool in a loop; count what completes in a `seconds` window."""
    from mcp import Client

    calls = [0, 0]  # completed calls, of which errors
    protocols: set[str] = set()
    opened: list[int] = []
    all_open = asyncio.Event()
    stop = asyncio.Event()

    async def session() -> None:
        # Each session is entered and left by its own task, as the SDK's task groups require.
        async with Client(server.url, mode=mode) as client:
            await client.list_tools()  # as any real client does before calling
            protocols.add(client.protocol_version)
            opened.append(1)
            if len(opened) == clients:
                all_open.set()
            await all_open.wait()
            while not stop.is_set():
                result = await client.call_tool(TOOL, ARGS)
                calls[0] += 1
                calls[1] += bool(result.is_error)

    tasks = [asyncio.create_task(session()) for _ in range(clients)]
    try:
        ready = asyncio.create_task(all_open.wait())
        await asyncio.wait({ready, *tasks}, timeout=60, return_when=asyncio.FIRST_COMPLETED)
        if not ready.done():
            ready.cancel()
            failed = [task.exception() for task in tasks if task.done() and not task.cancelled()]
            sys.exit(f"the {server.kind} sessions did not all open: {failed[:1] or 'timed out'}")
        await asyncio.sleep(warmup_s)
        spy: asyncio.subprocess.Process | None = None
        if profile_to is not None:
            spy = await _attach_py_spy(server.pid, seconds, profile_rate, profile_to, profile_gil)
        start_calls, start_errors = calls
        start, server_start, client_start = time.perf_counter(), server.cpu_s(), time.process_time()
        if spy is None:
            await asyncio.sleep(seconds)
        else:
            await spy.wait()
        wall = time.perf_counter() - start
        server_cpu, client_cpu = server.cpu_s() - server_start, time.process_time() - client_start
        done_calls, done_errors = calls[0] - start_calls, calls[1] - start_errors
    finally:
        stop.set()
        results = await asyncio.gather(*tasks, return_exceptions=True)
    problems = [r for r in results if isinstance(r, BaseException)]
    if problems:
        sys.exit(f"a {server.kind} session failed: {problems[0]!r}")
    return Round(server.kind, done_calls, wall, server_cpu, client_cpu, done_errors, protocols)


# -- the measurement ----------------------------------------------------------------------------


async def measure(
    clients: int, seconds: float, rounds: int, warmup_s: float, mode: Mode
) -> dict[str, list[Round]]:
    servers = {kind: await Server.start(kind) for kind in SIDES}
    results: dict[str, list[Round]] = {kind: [] for kind in SIDES}
    try:
        kinds = list(SIDES)
        for index in range(rounds):
            # The order rotates: each server runs first, and right after each other, equally often.
            order = kinds[index % len(kinds) :] + kinds[: index % len(kinds)]
            for kind in order:
                outcome = await load_round(
                    servers[kind], clients=clients, seconds=seconds, warmup_s=warmup_s, mode=mode
                )
                results[kind].append(outcome)
                print(
                    f"  round {index + 1} {kind:<10} {outcome.calls_per_s:>7.0f} calls/s   "
                    f"server {outcome.cpu_us_per_call:>6.0f} µs CPU/call, busy {outcome.server_busy:>4.0%}   "
                    f"client busy {outcome.client_busy:>4.0%}"
                    + (f"   ERRORS {outcome.errors}" if outcome.errors else ""),
                    flush=True,
                )
    finally:
        for server in servers.values():
            await server.stop()
    return results


def report(results: dict[str, list[Round]]) -> None:
    protocols = sorted({p for rounds in results.values() for r in rounds for p in r.protocols})
    print(f"\n  negotiated protocol version(s): {', '.join(protocols)}; medians of the rounds:")
    print(f"  {'server':<52} {'calls/s':>8} {'CPU µs/call':>12} {'server busy':>12} {'client busy':>12}")
    medians: dict[str, tuple[float, float, float]] = {}
    for kind, rounds in results.items():
        rate = statistics.median(r.calls_per_s for r in rounds)
        cpu = statistics.median(r.cpu_us_per_call for r in rounds)
        busy = statistics.median(r.server_busy for r in rounds)
        client = statistics.median(r.client_busy for r in rounds)
        medians[kind] = (rate, cpu, busy)
        print(f"  {SIDES[kind]:<52} {rate:>8.0f} {cpu:>12.0f} {busy:>12.0%} {client:>12.0%}")
    base_rate, base_cpu, base_busy = medians["baseline"]
    for kind in SUBJECTS:
        rate, cpu, _ = medians[kind]
        ratio = rate / base_rate
        # Rounds run back to back with the baseline's, paired: the spread of their ratios.
        paired = [
            s.calls_per_s / b.calls_per_s for s, b in zip(results[kind], results["baseline"], strict=True)
        ]
        met = "met" if ratio >= THROUGHPUT_TARGET else "NOT MET"
        cpu_paired = [
            s.cpu_us_per_call / b.cpu_us_per_call
            for s, b in zip(results[kind], results["baseline"], strict=True)
        ]
        print(
            f"  {kind} / baseline: calls/s {ratio:.3f}x (target >= {THROUGHPUT_TARGET}x: {met}; "
            f"paired rounds: median {statistics.median(paired):.3f}x, {min(paired):.2f}-{max(paired):.2f})"
        )
        print(
            f"  {' ' * len(kind)}             server CPU per call {cpu / base_cpu:.3f}x "
            f"(paired rounds: median "
            f"{statistics.median(cpu_paired):.3f}x, {min(cpu_paired):.2f}-{max(cpu_paired):.2f}); "
            f"a saturated server: {base_cpu / cpu:.3f}x the calls/s"
        )
    if base_busy < 0.9:
        print(
            f"  note: the bare server was {base_busy:.0%} busy, so the clients, not it, set its calls/s; "
            "the calls/s ratio then understates the gap, and the CPU-per-call ratio is the server-bound one"
        )
    errors = sum(r.errors for rounds in results.values() for r in rounds)
    if errors:
        print(f"  WARNING: {errors} calls answered with is_error; the figures above count them")


# -- profiling ----------------------------------------------------------------------------------


async def _attach_py_spy(
    pid: int, seconds: float, rate: int, out: Path, gil: bool
) -> asyncio.subprocess.Process:
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(py_spy).exists():
        sys.exit("--profile needs py-spy: pip install py-spy")
    # Raw collapsed stacks, samples aggregated per function; nonblocking so the server is not paused.
    command = [py_spy, "record", "--pid", str(pid), "--duration", str(max(1, round(seconds)))]
    command += ["--rate", str(rate), "--format", "raw", "--function", "--nonblocking", "--output", str(out)]
    if gil:
        # Only the thread holding the GIL: Python's own CPU, one sample per tick at most.
        command.append("--gil")
    return await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )


_FRAME = re.compile(r"(?P<func>.*) \((?P<file>.*?)(?::\d+)?\)$")
_GROUPS = (
    ("reach_adapters/", "reach_adapters"),
    ("/middleware/", "middleware"),
    ("/mcp/", "mcp"),
    ("/mcp_types/", "mcp"),
    ("/starlette/", "starlette"),
    ("/sse_starlette/", "starlette"),
    ("/uvicorn/", "uvicorn"),
    ("/h11/", "h11"),
    ("/pydantic", "pydantic"),
    ("/anyio/", "anyio"),
    ("/asyncio/", "asyncio"),
    ("/opentelemetry/", "opentelemetry"),
    ("/jsonschema", "jsonschema"),
    ("/logging/", "logging"),
    ("/json/", "json"),
    ("threading.py", "threads"),
    ("concurrent/futures/", "threads"),
    ("queue.py", "threads"),
    ("selectors.py", "asyncio"),
)


def _frame_name(frame: str) -> tuple[str, str]:
    """(``path:function``, package group) of a py-spy frame ``function (path:line)``."""
    found = _FRAME.match(frame)
    if found is None:
        return frame, "other"
    path = found["file"]
    for marker in ("site-packages/", "/lib/python3.11/", str(ROOT) + "/"):
        if marker in path:
            path = path.split(marker, 1)[1]
            break
    group = next((name for marker, name in _GROUPS if marker in "/" + path), "other")
    if path.startswith(("reach_adapters/", "middleware/")):
        group = path.split("/", 1)[0]
    return f"{path}:{found['func']}", group


@dataclass
class Profile:
    """Samples of one server under load: per function self and inclusive, per package self."""

    kind: str
    calls: int
    us_per_sample: float
    total: int = 0
    own: Counter[str] = field(default_factory=Counter)
    inclusive: Counter[str] = field(default_factory=Counter)
    groups: Counter[str] = field(default_factory=Counter)

    @classmethod
    def read(cls, kind: str, path: Path, calls: int, rate: int) -> Profile:
        profile = cls(kind, calls, 1e6 / rate)
        for line in path.read_text().splitlines():
            stack, _, count_text = line.rpartition(" ")
            if not stack:
                continue
            count = int(count_text)
            frames = [_frame_name(frame) for frame in stack.split(";")]
            profile.total += count
            leaf, group = frames[-1]
            profile.own[leaf] += count
            profile.groups[group] += count
            for name in {name for name, _ in frames}:
                profile.inclusive[name] += count
        return profile

    def per_call(self, samples: float) -> float:
        """Sampled CPU µs per call."""
        return samples * self.us_per_sample / self.calls


async def profile(
    clients: int, seconds: float, warmup_s: float, mode: Mode, rate: int, top: int, gil: bool
) -> None:
    out_dir = Path(tempfile.mkdtemp(prefix="bench_gateway_prof_"))
    profiles: dict[str, Profile] = {}
    for kind in SIDES:
        server = await Server.start(kind)
        try:
            out = out_dir / f"{kind}.txt"
            outcome = await load_round(
                server,
                clients=clients,
                seconds=seconds,
                warmup_s=warmup_s,
                mode=mode,
                profile_to=out,
                profile_rate=rate,
                profile_gil=gil,
            )
        finally:
            await server.stop()
        (out_dir / f"{kind}.calls").write_text(f"{outcome.calls}\n")
        profiles[kind] = Profile.read(kind, out, outcome.calls, rate)
        print(
            f"  {kind:<10} {outcome.calls_per_s:>6.0f} calls/s under py-spy, server "
            f"{outcome.cpu_us_per_call:.0f} µs CPU/call (/proc), "
            f"{profiles[kind].per_call(profiles[kind].total):.0f} µs/call sampled",
            flush=True,
        )
    print(f"  (raw py-spy stacks, and the calls they cover, in {out_dir})")
    base = profiles["baseline"]
    print("\n  self time by package, sampled µs per call")
    print(f"  {'package':<16}" + "".join(f"{kind:>12}" for kind in SIDES))
    groups = sorted({g for p in profiles.values() for g in p.groups}, key=lambda g: -base.groups[g])
    for group in groups:
        print(f"  {group:<16}" + "".join(f"{p.per_call(p.groups[group]):>12.0f}" for p in profiles.values()))
    print(f"  {'total':<16}" + "".join(f"{p.per_call(p.total):>12.0f}" for p in profiles.values()))
    for kind in SUBJECTS:
        _show_gap(profiles[kind], base, top)


def _show_gap(subject: Profile, base: Profile, top: int) -> None:
    gap = subject.per_call(subject.total) - base.per_call(base.total)
    print(f"\n  {subject.kind}: {gap:+.0f} µs CPU per call against the bare server (sampled)")
    print(
        f"  top functions of reach_adapters/ and middleware/, inclusive (share of the {subject.kind} total)"
    )
    ours = [
        (name, n)
        for name, n in subject.inclusive.items()
        if name.startswith(("reach_adapters/", "middleware/"))
    ]
    for name, samples in sorted(ours, key=lambda item: -item[1])[:top]:
        own = subject.own[name]
        print(
            f"    {subject.per_call(samples):>6.0f} µs {samples / subject.total:>6.1%}  "
            f"(self {subject.per_call(own):>4.0f} µs)  {name}"
        )
    print("  functions with the most more inclusive time per call than in the bare server")
    rows: list[tuple[float, str, float, float]] = []
    for name in set(subject.inclusive) | set(base.inclusive):
        if subject.inclusive[name] > 0.6 * subject.total:
            continue  # the event loop and what runs it: under everything
        mine, theirs = subject.per_call(subject.inclusive[name]), base.per_call(base.inclusive[name])
        rows.append((mine - theirs, name, mine, theirs))
    rows.sort(reverse=True)
    for diff, name, mine, theirs in rows[:top]:
        print(f"    {diff:>+6.0f} µs  ({theirs:>5.0f} -> {mine:>5.0f})  {name}")
    print("  most self time per call more than in the bare server")
    selfs = [
        (subject.per_call(subject.own[n]) - base.per_call(base.own[n]), n)
        for n in set(subject.own) | set(base.own)
    ]
    for diff, name in sorted(selfs, reverse=True)[:top]:
        print(f"    {diff:>+6.0f} µs  {name}")


# -- entry point --------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--clients", type=int, default=16, help="concurrent client sessions (16)")
    parser.add_argument("--seconds", type=float, default=3.0, help="measured window per round (3)")
    parser.add_argument("--rounds", type=int, default=6, help="rounds per server, interleaved (6)")
    parser.add_argument("--warmup", type=float, default=1.0, help="seconds of calls before each window (1)")
    parser.add_argument(
        "--mode", choices=["auto", "legacy"], default="auto", help="the clients' mcp.Client mode"
    )
    parser.add_argument("--profile", action="store_true", help="one round per server under py-spy instead")
    parser.add_argument("--profile-rate", type=int, default=250, help="py-spy samples per second (250)")
    parser.add_argument("--top", type=int, default=20, help="rows per profile table (20)")
    parser.add_argument(
        "--all-threads", action="store_true", help="profile: every busy thread, not only the GIL holder"
    )
    parser.add_argument("--serve", choices=sorted(SIDES), help=argparse.SUPPRESS)
    options = parser.parse_args(argv)
    if options.serve is not None:
        serve(options.serve)
        return
    mode: Mode = options.mode
    print(
        f"Gateway throughput: {options.clients} concurrent mcp.Client sessions (mode={mode}) calling "
        f"{TOOL}, each server in its own process; {os.cpu_count()} CPUs"
    )
    if options.profile:
        asyncio.run(
            profile(
                options.clients,
                options.seconds,
                options.warmup,
                mode,
                options.profile_rate,
                options.top,
                gil=not options.all_threads,
            )
        )
        return
    print(f"  {options.rounds} rounds x {options.seconds:g} s per server, interleaved")
    report(asyncio.run(measure(options.clients, options.seconds, options.rounds, options.warmup, mode)))


if __name__ == "__main__":
    with contextlib.suppress(KeyboardInterrupt):
        main()
