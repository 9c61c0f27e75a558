"""Real a2a-sdk agents for the A2A adapter's tests: in this event loop, or as a subprocess."""

from __future__ import annotations

import re
import select
import subprocess
import sys
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from reach_adapters import Router
from reach_adapters.a2a import A2AAgent
from tests.a2a.agents import Served, serve_agent

ROOT = Path(__file__).resolve().parents[2]
READY = re.compile(r"^a2a ready: url=(\S+)$")


@pytest.fixture
async def served() -> AsyncIterator[Served]:
    """The test agent served in this event loop."""
    async with serve_agent() as served:
        yield served


@pytest.fixture
async def agent(served: Served) -> AsyncIterator[A2AAgent]:
    agent = await A2AAgent.connect(served.url)
    try:
        yield agent
    finally:
        await agent.aclose()


@pytest.fixture
async def routed(agent: A2AAgent, router: Router) -> Router:
    router.register(agent)
    return router


class AgentProcess:
    """``python -m tests.a2a.agents --port P`` in a subprocess; its URL from the ready line."""

    def __init__(self, *args: str) -> None:
        self.process = subprocess.Popen(
            [sys.executable, "-m", "tests.a2a.agents", *args],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        assert self.process.stdout is not None
        ready, _, _ = select.select([self.process.stdout], [], [], 30.0)
        line = self.process.stdout.readline() if ready else ""
        match = READY.match(line.strip())
        if match is None:
            self.stop()
            pytest.fail(f"the A2A test agent did not start (got {line!r})")
        self.url = match.group(1)
        self.port = int(self.url.rsplit(":", 1)[1])

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.wait(timeout=20)
        if self.process.stdout is not None:
            self.process.stdout.close()


@pytest.fixture
def agent_process() -> Iterator[AgentProcess]:
    """The test agent in a subprocess, always stopped after the test."""
    process = AgentProcess("--port", "0")
    try:
        yield process
    finally:
        process.stop()
