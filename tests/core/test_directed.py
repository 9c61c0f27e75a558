"""Directed calls name the capability they want (issue 10, item 5)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from middleware import Fault, ReachMessage, ResultStatus
from reach_adapters import Capability, FunctionAgent, Router
from tests.core.conftest import FAST, echo_agent

pytestmark = pytest.mark.timeout(20)


def two_faced() -> FunctionAgent:
    async def handle(message: ReachMessage) -> Any:
        return {"capability": message.meta_info.capability, "payload": message.raw_payload}

    return FunctionAgent(
        handle,
        agent_id="text:tools:01",
        capabilities=[Capability(name="upper"), Capability(name="lower")],
    )


async def test_send_calls_the_capability_it_names() -> None:
    router = Router(FAST)
    router.register(two_faced())
    lower = await router.send("text:tools:01", {"t": "A"}, capability="lower")
    assert lower.payload == {"capability": "lower", "payload": {"t": "A"}}
    assert lower.capability == "lower"
    assert (await router.send("text:tools:01", {}, capability="upper")).payload == {
        "capability": "upper",
        "payload": {},
    }
    sync = await asyncio.to_thread(router.send_sync, "text:tools:01", {}, capability="lower")
    assert sync.capability == "lower"


async def test_an_agent_with_several_capabilities_needs_one_named() -> None:
    router = Router(FAST)
    router.register(two_faced())
    result = await router.send("text:tools:01", {})
    assert (result.status, result.fault, result.delivered) == (ResultStatus.INVALID, Fault.CALLER, False)
    assert "declares several capabilities ['upper', 'lower']" in (result.error or "")
    assert "capability=" in (result.error or "")


async def test_an_agent_with_one_capability_is_called_as_before() -> None:
    router = Router(FAST)
    router.register(echo_agent("util:echo:01"))
    result = await router.send("util:echo:01", {"x": 1})
    assert (result.ok, result.capability) == (True, "echo")


async def test_naming_a_capability_the_agent_lacks_lists_what_it_has() -> None:
    router = Router(FAST)
    router.register(two_faced())
    router.update_policy(FAST.model_copy(update={"default_agent": "util:echo:01"}))
    router.register(echo_agent("util:echo:01"))
    result = await router.send("text:tools:01", {}, capability="title")
    assert (result.status, result.fault, result.served_by) == (ResultStatus.INVALID, Fault.CALLER, "none")
    assert "does not declare 'title'; it declares ['upper', 'lower']" in (result.error or "")


async def test_why_not_of_a_directed_call_names_the_target() -> None:
    router = Router(FAST)
    router.register(echo_agent("util:echo:01"))
    router.register(echo_agent("util:echo:02"))
    result = await router.send("util:echo:01", {})
    record = router.explain(result.task_id)
    assert record.capability == "echo"
    assert (
        record.why_not("util:echo:02")
        == "util:echo:02 was not considered: the call was directed to util:echo:01"
    )
    assert "None" not in record.why_not("util:echo:02")
