"""Calls: payloads, content blocks, tool errors, validation before the call, timeouts, sync code."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from middleware import ReachMessage, ResultStatus
from reach_adapters import InvalidMessageError, Router
from reach_adapters.mcp import MCPConnectionError, MCPOptions, MCPServerAgent
from tests.mcp_adapter.conftest import CALC, PYTHON
from tests.mcp_adapter.servers.calc import PIXEL

pytestmark = pytest.mark.timeout(60)


async def test_structured_content_is_the_payload(calc: MCPServerAgent, router: Router) -> None:
    router.register(calc)
    result = await router.route("add", {"a": 2, "b": 40})
    assert result.status is ResultStatus.OK
    assert result.payload == 42
    assert result.extra["content"] == [{"type": "text", "text": "42"}]


async def test_content_blocks_become_a_json_safe_list(calc: MCPServerAgent, router: Router) -> None:
    router.register(calc)
    result = await router.route("describe", {"text": "hello"})
    assert result.ok, result.error
    assert result.payload == [
        {"type": "text", "text": "HELLO"},
        {"type": "image", "data": PIXEL, "mimeType": "image/png"},
        {"type": "resource", "resource": {"uri": "note://1", "mimeType": "text/plain", "text": "hello"}},
    ]
    assert json.loads(json.dumps(result.payload)) == result.payload


async def test_tool_error_is_an_error_result_nobody_retries(calc: MCPServerAgent, router: Router) -> None:
    router.register(calc)
    result = await router.route("fail", {"reason": "no such account"})
    assert result.status is ResultStatus.ERROR
    assert result.error_type == "MCPToolError"
    assert result.error is not None
    assert "no such account" in result.error
    assert result.retryable is False
    assert result.attempts == 1


async def test_arguments_not_matching_the_schema_never_reach_the_server(
    calc: MCPServerAgent, router: Router
) -> None:
    router.register(calc)
    before = await router.route("calls", {})
    rejected = await router.route("add", {"a": 1, "b": "two"})
    missing = await router.route("add", {"a": 1})
    after = await router.route("calls", {})
    assert rejected.status is ResultStatus.INVALID
    assert rejected.error_type == "PayloadValidationError"
    assert rejected.error is not None
    assert "'b'" in rejected.error
    assert missing.status is ResultStatus.INVALID
    assert before.payload == after.payload


async def test_call_timeout_is_the_capability_timeout() -> None:
    agent = await MCPServerAgent.connect(
        "calc", command=PYTHON, args=[CALC], options=MCPOptions(timeout_ms=300)
    )
    async with Router() as router:
        router.register(agent)
        result = await router.route("slow", {"seconds": 5})
        assert result.status is ResultStatus.TIMEOUT
        # The session survives a timed-out call: the next one is served.
        assert (await router.route("add", {"a": 1, "b": 1})).ok


async def test_a_message_timeout_shorter_than_the_capability_wins(
    calc: MCPServerAgent, router: Router
) -> None:
    router.register(calc)
    result = await router.route("slow", {"seconds": 5}, timeout_ms=300)
    assert result.status is ResultStatus.TIMEOUT


async def test_invoke_without_a_known_capability_says_what_it_has(calc: MCPServerAgent) -> None:
    message = ReachMessage.model_validate({"raw_payload": {}, "meta_info": {"capability": "nope"}})
    with pytest.raises(InvalidMessageError, match=r"no tool for capability 'nope'.*'add'"):
        await calc.invoke(message)


async def test_invoke_rejects_arguments_that_are_not_an_object(calc: MCPServerAgent) -> None:
    message = ReachMessage.model_validate({"raw_payload": [1, 2], "meta_info": {"capability": "add"}})
    with pytest.raises(InvalidMessageError, match="JSON object of arguments"):
        await calc.invoke(message)


async def test_calls_share_one_session_concurrently(calc: MCPServerAgent, router: Router) -> None:
    router.register(calc)
    results = await asyncio.gather(*(router.route("add", {"a": i, "b": i}) for i in range(20)))
    assert [r.payload for r in results] == [2 * i for i in range(20)]
    pids = {json.dumps((await router.route("pid", {})).payload) for _ in range(3)}
    assert len(pids) == 1


def test_sync_program_connects_and_routes() -> None:
    agent = MCPServerAgent.connect_sync("calc", command=PYTHON, args=[CALC])
    router = Router()
    try:
        router.register(agent)
        # The router's sync portal runs on its own loop; the session lives on the agent's.
        result = router.route_sync("add", {"a": 5, "b": 6})
        assert result.payload == 11
    finally:
        agent.close_sync()
        router.close()
    message = ReachMessage.model_validate({"raw_payload": {}, "meta_info": {"capability": "pid"}})
    with pytest.raises(MCPConnectionError, match="offline"):
        asyncio.run(agent.invoke(message))


async def test_sync_call_from_a_worker_thread_while_the_loop_runs(
    calc: MCPServerAgent, router: Router
) -> None:
    router.register(calc)
    await router.route("add", {"a": 0, "b": 0})  # binds the router to this loop
    seen: list[object] = []

    def worker() -> None:
        seen.append(router.route_sync("add", {"a": 3, "b": 4}).payload)

    thread = threading.Thread(target=worker)
    thread.start()
    await asyncio.to_thread(thread.join, 30)
    assert seen == [7]
