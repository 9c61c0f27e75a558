"""A deferred call: asked for a capability nobody serves yet, it waits (within its deadline) and
is answered by the agent registered a moment later."""

from __future__ import annotations

import asyncio

from reach_adapters import FunctionAgent, Router


def translate(text: str) -> str:
    """Translate a German greeting into English."""
    return {"hallo": "hello"}.get(text, text)


async def deferred_call() -> None:
    async with Router() as router:
        call = asyncio.create_task(router.route("translate", {"text": "hallo"}, defer=True, timeout_ms=5_000))
        async with asyncio.timeout(5):  # the call is in the deferred queue once this counts it
            while router.deferred_waiting == 0:
                await asyncio.sleep(0.01)
        print(f"  route('translate', defer=True) is waiting: {router.deferred_waiting} call deferred")
        await asyncio.sleep(0.3)
        router.register(FunctionAgent(translate, agent_id="lang:translator:01"))
        print("  registered lang:translator:01")
        result = await call
        print(f"  answered: {result.payload!r} by {result.agent_id} [{result.status}]")
        waited = router.explain(result.task_id).deferred_ms or 0.0
        print(f"  explain: deferred, waited {waited / 1000:.1f} s for an agent")
