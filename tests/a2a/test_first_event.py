"""A streamed call cancelled before the agent's first event: that event, when it comes, names a
task nobody follows any more, and the adapter tells the agent to cancel it."""

from __future__ import annotations

import asyncio

import pytest
from a2a.server.agent_execution import RequestContext
from a2a.server.events import EventQueue

from reach_adapters import Router
from reach_adapters.a2a import A2AAgent
from tests.a2a.agents import SkillsExecutor, build_app, serve_app
from tests.waiting import eventually


class LateExecutor(SkillsExecutor):
    """Says nothing at all (no task yet) until `release` is set, then runs the skill."""

    def __init__(self) -> None:
        super().__init__()
        self.entered = asyncio.Event()
        self.release = asyncio.Event()

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.entered.set()
        await self.release.wait()
        await super().execute(context, event_queue)


async def test_a_call_cancelled_before_the_first_event_cancels_the_task_it_names() -> None:
    executor = LateExecutor()
    async with serve_app(lambda url: build_app(f"{url}/a2a", executor)) as (url, _):
        router = Router()
        router.register(await A2AAgent.connect(url))
        try:
            call = asyncio.ensure_future(router.route("slow", {"seconds": 30}))
            async with asyncio.timeout(20):
                await executor.entered.wait()
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            executor.release.set()
            await eventually(lambda: bool(executor.record.started), what="the remote task to start")
            remote = executor.record.started[0]
            await eventually(
                lambda: remote in executor.record.cancelled, what="CancelTask to reach the agent"
            )
            # The agent serves on, and so does the adapter.
            assert (await router.route("echo", "again")).payload == "again"
        finally:
            await router.aclose()
