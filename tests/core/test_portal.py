"""The private loop that serves sync calls from sync code is wound down, never left running."""

from __future__ import annotations

import asyncio
import gc
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

from reach_adapters import Router
from reach_adapters.router import Portal
from tests.core.conftest import echo_agent

ROOT = Path(__file__).resolve().parents[2]


def test_a_collected_portal_stops_its_thread_and_closes_its_loop() -> None:
    portal = Portal()

    async def which() -> asyncio.AbstractEventLoop:
        return asyncio.get_running_loop()

    before = set(threading.enumerate())
    loop = portal.call(which(), method="which_sync")
    (thread,) = [t for t in threading.enumerate() if t not in before and t.name == "agent-reach-portal"]
    del portal
    gc.collect()
    thread.join(timeout=10)
    assert not thread.is_alive()
    assert loop.is_closed()


def test_close_is_idempotent_and_sync_calls_work_before_it() -> None:
    router = Router()
    router.register(echo_agent("util:echo:01"))
    assert router.route_sync("echo", {"x": 1}).ok
    router.close()
    router._portal.close()


def test_the_interpreter_exits_after_winding_the_loop_down() -> None:
    script = textwrap.dedent(
        """
        import asyncio
        from reach_adapters import Capability, FunctionAgent, Router

        kept = []

        async def forever():
            try:
                await asyncio.sleep(3600)
            finally:
                print("wound down", flush=True)

        async def start(payload):
            kept.append(asyncio.get_running_loop().create_task(forever()))
            return "started"

        router = Router()
        router.register(FunctionAgent(start, agent_id="t:start:01", capabilities=[Capability(name="start")]))
        assert router.route_sync("start", {}).payload == "started"
        print("leaving", flush=True)
        """
    )
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["leaving", "wound", "down"]
