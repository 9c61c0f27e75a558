"""The example adapter, routed to through a real router and a real HTTP service (served in-process)."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from middleware import MetaInfo
from reach_adapters import AgentInfo, Capability, Router
from reach_adapters.router import Fault, ReachMessage, ResultStatus, time_left
from tests.sdk import example_adapter
from tests.sdk.example_adapter import TIMEOUT_HEADER, HTTPServiceAgent

AGENT_ID = "calc:http:01"
NUMBERS = {
    "type": "object",
    "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
    "required": ["a", "b"],
}


async def divide(request: Request) -> JSONResponse:
    body = await request.json()
    if not isinstance(body, dict) or not {"a", "b"} <= body.keys():
        return JSONResponse({"detail": "give a and b"}, status_code=422)
    if body["b"] == 0:
        return JSONResponse({"detail": "division by zero"}, status_code=400)
    return JSONResponse({"quotient": body["a"] / body["b"]})


async def broken(request: Request) -> JSONResponse:
    return JSONResponse({"detail": "database down"}, status_code=500)


async def hang(request: Request) -> JSONResponse:
    await asyncio.Event().wait()
    raise AssertionError


async def budget(request: Request) -> JSONResponse:
    return JSONResponse({"timeout_ms": int(request.headers[TIMEOUT_HEADER])})


SERVICE = Starlette(
    routes=[
        Route(f"/{endpoint.__name__}", endpoint, methods=["POST"])
        for endpoint in (divide, broken, hang, budget)
    ]
)


@pytest.fixture
async def router() -> AsyncIterator[Router]:
    client = httpx.AsyncClient(transport=httpx.ASGITransport(app=SERVICE), base_url="http://calc")
    capabilities = [
        Capability(name="divide", description="a / b"),
        Capability(name="divide_checked", description="a / b, numbers checked", input_schema=NUMBERS),
        Capability(name="broken"),
        Capability(name="hang"),
        Capability(name="budget"),
    ]
    router = Router()
    router.register(HTTPServiceAgent(client, agent_id=AGENT_ID, capabilities=capabilities))
    try:
        yield router
    finally:
        await router.aclose()
    assert client.is_closed, "the router closes the agent, which closes its client"


def info(router: Router) -> AgentInfo:
    return next(entry for entry in router.catalog() if entry.agent_id == AGENT_ID)


async def test_ok(router: Router) -> None:
    result = await router.route("divide", {"a": 6, "b": 3})
    assert result.ok, result.error
    assert result.payload == {"quotient": 2.0}
    assert result.agent_id == AGENT_ID
    assert (await router.send(AGENT_ID, {"a": 1, "b": 4}, capability="divide")).payload == {"quotient": 0.25}


async def test_task_error_is_the_tasks_not_the_agents(router: Router) -> None:
    result = await router.route("divide", {"a": 1, "b": 0})
    assert (result.status, result.fault, result.error_type) == (ResultStatus.ERROR, Fault.TASK, "TaskError")
    assert "division by zero" in (result.error or "")
    assert info(router).failures == 0


async def test_agent_failure_counts_against_it(router: Router) -> None:
    result = await router.route("broken", {})
    assert (result.status, result.fault, result.error_type) == (
        ResultStatus.ERROR,
        Fault.AGENT,
        "HTTPStatusError",
    )
    assert result.delivered
    assert info(router).failures == 1


async def test_bad_payload_is_the_callers(router: Router) -> None:
    # Caught by the service (no schema declared) ...
    refused = await router.route("divide", {"a": 1})
    assert (refused.status, refused.fault) == (ResultStatus.INVALID, Fault.CALLER)
    # ... or by the router, against the declared schema, before delivery.
    checked = await router.route("divide_checked", {"a": 1, "b": "two"})
    assert (checked.status, checked.fault, checked.delivered) == (ResultStatus.INVALID, Fault.CALLER, False)
    assert info(router).failures == 0


async def test_deadline_is_respected_and_passed_on(router: Router) -> None:
    hung = await router.route("hang", {}, timeout_ms=200)
    assert hung.status is ResultStatus.TIMEOUT
    told = await router.route("budget", {}, timeout_ms=5_000)
    assert told.ok, told.error
    assert isinstance(told.payload, dict)
    passed_on = told.payload["timeout_ms"]
    assert isinstance(passed_on, int)
    assert 0 < passed_on <= 5_000
    # The agent's own 30 s limit, less the moments spent on the way (a few ms on a loaded machine).
    unbounded = await router.route("budget", {})
    assert isinstance(unbounded.payload, dict)
    budget = unbounded.payload["timeout_ms"]
    assert isinstance(budget, int)
    assert 25_000 < budget <= 30_000


def test_time_left() -> None:
    def message(deadline: float | None) -> ReachMessage:
        return ReachMessage(meta_info=MetaInfo(deadline=deadline))

    assert time_left(message(None), 7.0) == 7.0
    assert 0 < time_left(message(time.time() + 60), 7.0) <= 7.0
    assert 0 < time_left(message(time.time() + 2), 7.0) <= 2.0
    assert time_left(message(time.time() - 1), 7.0) == 0.001


def test_the_adapter_in_the_docs_is_the_one_tested() -> None:
    docs = (Path(__file__).resolve().parents[2] / "docs" / "adapters.md").read_text()
    shown = next(block for block in docs.split("```python\n")[1:] if block.startswith("class "))
    tested = Path(example_adapter.__file__).read_text()
    assert shown.split("```")[0] in tested, "docs/adapters.md shows another adapter than the tested one"
