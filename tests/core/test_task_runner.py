"""`Router.use_task_runner`: another runner installed in place of the in-memory one."""

from __future__ import annotations

import asyncio

import pytest

from reach_adapters import FunctionAgent, Router
from reach_adapters.errors import InvalidDeclarationError
from reach_adapters.router.tasks import AsyncTasks, MemoryTaskStore, TaskRecord, TaskStatus


async def test_a_new_runner_takes_over_the_callback_sender_and_the_old_one_is_closed() -> None:
    release = asyncio.Event()

    async def slow(text: str) -> str:
        await release.wait()
        return text

    async with Router() as router:
        router.register(FunctionAgent(slow, agent_id="util:slow:01"))

        async def notifier(record: TaskRecord) -> None: ...

        router.async_tasks.notifier = notifier
        task = await router.submit("slow", {"text": "x"})
        replacement = AsyncTasks(router.dispatch, router.policy, MemoryTaskStore())
        with pytest.raises(InvalidDeclarationError, match="1 running"):
            await router.use_task_runner(replacement)
        release.set()
        assert (await router.wait(task.task_id, timeout=10)).status is TaskStatus.OK
        await router.use_task_runner(replacement)
        assert router.async_tasks is replacement
        assert replacement.notifier is notifier
        again = await router.submit("slow", {"text": "y"})
        assert (await router.wait(again.task_id, timeout=10)).status is TaskStatus.OK
