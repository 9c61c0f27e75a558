"""How an A2A call is delivered: the skill's own timeout, the connection pool, closing mid-call,
following a task whose stream was cut, threads across replicas, credentials and origins."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import AsyncGenerator, Callable
from typing import Any

import pytest
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.utils.errors import UnsupportedOperationError
from google.protobuf import json_format
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from middleware import Fault, ResultStatus
from reach_adapters import Router
from reach_adapters.a2a import A2AAgent, A2ACardError
from reach_adapters.a2a.client import Link
from reach_adapters.a2a.options import A2AOptions
from tests.a2a.agents import Served, SkillsExecutor, agent_card, serve_agent, serve_app
from tests.waiting import eventually


@pytest.mark.parametrize("streaming", [True, False])
async def test_a_skills_own_timeout_bounds_its_remote_call(router: Router, streaming: bool) -> None:
    async with serve_agent(streaming=streaming) as served:
        agent = await A2AAgent.connect(
            served.url, options={"timeout_ms": 200}, overrides={"slow": {"timeout_ms": 5000}}
        )
        router.register(agent)
        result = await router.route("slow", {"seconds": 0.5})
        assert (result.status, result.payload) == (ResultStatus.OK, "slept 0.5"), result.error


async def test_a_call_that_finds_no_free_connection_is_not_sent(router: Router) -> None:
    # Without streaming, the long call holds the one connection until it ends: no stream that a
    # busy machine could see cut, and the task then polled on a connection free between polls.
    async with serve_agent(streaming=False) as served:
        agent = await A2AAgent.connect(served.url, options={"max_connections": 1, "connect_timeout_s": 0.2})
        router.register(agent)
        long = asyncio.create_task(router.route("slow", {"seconds": 3}))
        await eventually(lambda: bool(served.executor.record.started), what="the long task to start")
        result = await router.route("hello", "ann", timeout_ms=2000)
        assert (result.status, result.fault, result.delivered) == (ResultStatus.ERROR, Fault.ROUTER, False)
        assert "raise the agent's max_connections" in (result.error or "")
        assert (await long).status is ResultStatus.OK
        assert router.catalog()[0].state.value == "online"


@pytest.mark.parametrize("closing", ["agent", "router"])
async def test_closing_mid_call_cancels_the_remote_task(served: Served, closing: str) -> None:
    router = Router()
    agent = await A2AAgent.connect(served.url)
    router.register(agent)
    call = asyncio.create_task(router.route("slow", {"seconds": 10}))
    await eventually(lambda: bool(served.executor.record.started), what="the remote task to start")
    await (agent.aclose() if closing == "agent" else router.aclose())
    async with asyncio.timeout(10):
        result = await call
    assert result.status is ResultStatus.CANCELLED
    assert result.fault is not Fault.AGENT
    assert served.executor.record.cancelled == served.executor.record.started
    await router.aclose()


class _CutStreams(DefaultRequestHandler):
    """Ends every send's stream after its first event and cannot resubscribe, as behind a proxy
    that cuts long responses."""

    calls: Counter[str]

    async def on_message_send_stream(self, params: Any, context: Any) -> AsyncGenerator[Any, None]:
        async for event in super().on_message_send_stream(params, context):
            yield event
            return

    async def on_subscribe_to_task(self, params: Any, context: Any) -> AsyncGenerator[Any, None]:
        self.calls["subscribe"] += 1
        raise UnsupportedOperationError(message="no resubscribe here")
        yield  # an async generator, as the handler's method is

    async def on_get_task(self, params: Any, context: Any) -> Any:
        self.calls["get"] += 1
        return await super().on_get_task(params, context)


def _cutting(calls: Counter[str]) -> Callable[[str], Starlette]:
    def app(url: str) -> Starlette:
        card = agent_card(f"{url}/a2a")
        handler = _CutStreams(
            agent_executor=SkillsExecutor(), task_store=InMemoryTaskStore(), agent_card=card
        )
        handler.calls = calls
        return Starlette(
            routes=[*create_agent_card_routes(card), *create_jsonrpc_routes(handler, rpc_url="/a2a")]
        )

    return app


async def test_a_task_whose_stream_was_cut_is_polled_not_hammered(router: Router) -> None:
    calls: Counter[str] = Counter()
    async with serve_app(_cutting(calls)) as (url, _):
        router.register(await A2AAgent.connect(url, options={"poll_interval_s": 0.2}))
        result = await router.route("slow", {"seconds": 1.0})
        assert result.payload == "slept 1.0", result.error
        # Subscribing is given up once refused; GetTask comes every poll_interval_s, not in a loop.
        assert calls["subscribe"] == 1
        assert calls["get"] <= 8


async def test_a_reach_servers_word_survives_a_polled_task_that_answered_part(router: Router) -> None:
    """The task, polled after its stream was cut, has an artifact already: the snapshot's status
    and the server's word on it (in its metadata) are taken together."""
    async with serve_app(_cutting(Counter())) as (url, _):
        router.register(await A2AAgent.connect(url, options={"poll_interval_s": 0.1}))
        result = await router.route("partial", "go")
    assert (result.status, result.fault, result.error_type) == (
        ResultStatus.TIMEOUT,
        Fault.ROUTER,
        "TimeoutError",
    ), result.error


async def test_concurrent_first_turns_of_a_thread_share_its_context(routed: Router) -> None:
    thread = {"thread_id": "T"}
    results = await asyncio.gather(*(routed.route("echo", f"m{i}", configurable=thread) for i in range(4)))
    contexts = {str(result.extra["a2a"]["context_id"]) for result in results}  # type: ignore[call-overload,index]
    assert len(contexts) == 1


async def test_a_resume_finds_the_replica_that_asked(router: Router) -> None:
    async with serve_agent() as first, serve_agent() as second:
        for index, served in enumerate((first, second)):
            router.register(await A2AAgent.connect(served.url, "t", options={"instance": str(index)}))
        for index in range(6):
            thread = {"thread_id": f"R{index}"}
            asked = await router.route("ask", "hi", configurable=thread)
            answered = await router.route("ask", None, configurable=thread, resume="Ann")
            assert answered.status is ResultStatus.OK, answered.error
            assert answered.agent_id == asked.agent_id


async def test_credentials_go_to_the_configured_origin_only(router: Router) -> None:
    seen: list[str | None] = []

    def elsewhere(_: str) -> Starlette:
        async def rpc(request: Request) -> JSONResponse:
            seen.append(request.headers.get("authorization"))
            body = await request.json()
            return JSONResponse(
                {"jsonrpc": "2.0", "id": body["id"], "error": {"code": -32603, "message": "x"}}
            )

        return Starlette(routes=[Route("/a2a", rpc, methods=["POST"])])

    async with serve_app(elsewhere) as (other, _):
        card = json_format.MessageToDict(agent_card(f"{other}/a2a"))

        def card_only(_: str) -> Starlette:
            async def serve_card(_: Request) -> JSONResponse:
                return JSONResponse(card)

            return Starlette(routes=[Route("/.well-known/agent-card.json", serve_card)])

        async with serve_app(card_only) as (url, _):
            router.register(await A2AAgent.connect(url, headers={"Authorization": "Bearer s3cret"}))
            await router.route("echo", "hi")
    assert seen == [None]


async def test_a_card_may_not_downgrade_https_to_http() -> None:
    link = Link("https://agent.example", None, None, A2AOptions())
    try:
        with pytest.raises(A2ACardError, match=r"supported_interfaces\[0\]\.url.*plain http"):
            link.adopt(agent_card("http://agent.example/a2a"))
    finally:
        await link.aclose()
