"""Real MCP servers for the adapter's tests: stdio and HTTP subprocesses, in-process objects."""

from __future__ import annotations

import select
import signal
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from reach_adapters import AgentState, Router
from reach_adapters.mcp import MCPServerAgent

SERVERS = Path(__file__).parent / "servers"
CALC = str(SERVERS / "calc.py")
NOTES = str(SERVERS / "notes.py")
MUTE = str(SERVERS / "mute.py")
PYTHON = sys.executable


def state_of(router: Router, agent_id: str) -> AgentState:
    return next(info.state for info in router.catalog() if info.agent_id == agent_id)


class HttpCalc:
    """The calc server (or `script`, another of `servers`) in a subprocess, served over
    streamable HTTP on a port the OS picked; `handshake_only`: speaking the 2025 protocol
    versions only, as MCP SDK 1.x servers do."""

    def __init__(self, script: str = CALC, *, handshake_only: bool = False) -> None:
        self.port = 0
        self._script = script
        self._flags = ["--handshake-only"] if handshake_only else []
        self.process = self._spawn()
        self.url = f"http://127.0.0.1:{self.port}/mcp"

    def _spawn(self) -> subprocess.Popen[str]:
        command = [PYTHON, self._script, "--http", "--port", str(self.port), *self._flags]
        process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
        assert process.stdout is not None
        ready, _, _ = select.select([process.stdout], [], [], 15.0)
        if not ready:
            process.kill()
            process.wait(timeout=5)
            pytest.fail("the HTTP calc server did not print its port within 15 s")
        self.port = int(process.stdout.readline())
        return process

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=10)

    def restart(self) -> None:
        self.process = self._spawn()

    def stop(self) -> None:
        if self.process.poll() is None:
            self.kill()
        if self.process.stdout is not None:
            self.process.stdout.close()


@pytest.fixture
def http_calc() -> Iterator[HttpCalc]:
    server = HttpCalc()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
async def calc() -> AsyncIterator[MCPServerAgent]:
    """The calc server over stdio, connected."""
    agent = await MCPServerAgent.connect("calc", command=PYTHON, args=[CALC])
    try:
        yield agent
    finally:
        await agent.aclose()
