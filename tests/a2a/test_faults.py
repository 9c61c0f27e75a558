"""Whose fault an A2A call's failure is (DESIGN §6): streams that end other than completed, HTTP
statuses of the JSON-RPC endpoint, and endpoints that cannot be connected to."""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator

import pytest
from a2a.server.routes import create_agent_card_routes
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from middleware import Fault, ResultStatus
from reach_adapters import BreakerState, Router
from reach_adapters.a2a import A2AAgent
from reach_adapters.errors import AgentCallError, InputRequiredError, PermissionDeniedError, ReachError
from tests.a2a.agents import SkillsExecutor, agent_card, build_app, serve_agent, serve_app


@pytest.mark.parametrize(
    ("skill", "raised", "status", "fault"),
    [
        ("fail", AgentCallError, ResultStatus.ERROR, Fault.TASK),
        ("reject", ReachError, ResultStatus.REJECTED, Fault.TASK),
        ("auth", PermissionDeniedError, ResultStatus.REJECTED, Fault.CALLER),
    ],
)
async def test_a_stream_ends_with_the_tasks_outcome_not_the_agents_failure(
    routed: Router, skill: str, raised: type[ReachError], status: ResultStatus, fault: Fault
) -> None:
    for _ in range(3):  # two agent failures in a row would quarantine it
        with pytest.raises(raised) as caught:
            _ = [chunk async for chunk in routed.stream(skill, "x")]
        result = caught.value.result
        assert result is not None
        assert (result.status, result.fault, result.agent_id) == (status, fault, "a2a:test-agent:0")
    assert routed.catalog()[0].state.value == "online"
    assert (await routed.route("echo", "still here")).payload == "still here"


async def test_a_stream_that_asks_for_input_is_resumed_on_its_thread(routed: Router) -> None:
    thread = {"thread_id": "streamed"}
    with pytest.raises(InputRequiredError) as caught:
        _ = [chunk async for chunk in routed.stream("ask", "hi", configurable=thread)]
    asked = caught.value.result
    assert asked is not None
    assert (asked.status, asked.fault, asked.payload) == (
        ResultStatus.INPUT_REQUIRED,
        None,
        "what is your name?",
    )
    answered = await routed.route("ask", None, configurable=thread, resume="Ann")
    assert answered.status is ResultStatus.OK, answered.error
    assert str(answered.payload).startswith("hello Ann")


def _status_app(url: str, status: int) -> Starlette:
    async def rpc(_: Request) -> Response:
        return Response("no", status_code=status)

    card = agent_card(f"{url}/a2a")
    return Starlette(routes=[*create_agent_card_routes(card), Route("/a2a", rpc, methods=["POST"])])


@pytest.mark.parametrize("status", [401, 403])
async def test_refused_credentials_are_the_agents_and_another_replica_takes_the_call(status: int) -> None:
    """The router's own credentials for the agent, which no caller can fix: the agent's failure
    (its configuration), never started, so a replica that takes them serves the call."""
    lighter = {"echo": {"weight": 1}}  # the refusing replica first, while its breaker lets it
    async with (
        serve_app(lambda url: _status_app(url, status)) as (refusing, _),
        serve_agent() as served,
        Router() as alone,
        Router() as replicated,
    ):
        alone.register(await A2AAgent.connect(refusing, "t"))
        refused = await alone.route("echo", "hi")
        replicated.register(await A2AAgent.connect(refusing, "t", options={"instance": "0"}))
        replicated.register(
            await A2AAgent.connect(served.url, "t", options={"instance": "1"}, overrides=lighter)
        )
        taken = [await replicated.route("echo", f"hi {index}") for index in range(3)]
        breakers = {info.agent_id: info.breaker for info in replicated.catalog()}
    assert (refused.status, refused.fault, refused.delivered) == (ResultStatus.ERROR, Fault.AGENT, False)
    assert refused.error_type == "A2ADeniedError"
    assert f"refused the router's credentials (HTTP {status})" in (refused.error or "")
    for index, result in enumerate(taken):
        assert (result.payload, result.agent_id) == (f"hi {index}", "a2a:t:1"), result.error
    # Tried first until its breaker opened (two failures in a row), each call then taken by the other.
    attempts = [[attempt.agent_id for attempt in replicated.explain(one.task_id).attempts] for one in taken]
    assert attempts == [["a2a:t:0", "a2a:t:1"], ["a2a:t:0", "a2a:t:1"], ["a2a:t:1"]]
    assert breakers == {"a2a:t:0": BreakerState.OPEN, "a2a:t:1": BreakerState.CLOSED}


def _stateless_app(url: str, state: int | str) -> Starlette:
    """An agent whose task comes back in `state`, to a send and to every GetTask."""

    async def rpc(request: Request) -> Response:
        body = await request.json()
        task = {"id": "t1", "contextId": "c1", "status": {"state": state}}
        result = {"task": task} if body["method"] == "SendMessage" else task
        return JSONResponse({"jsonrpc": "2.0", "id": body["id"], "result": result})

    card = agent_card(f"{url}/a2a", streaming=False)
    return Starlette(routes=[*create_agent_card_routes(card), Route("/a2a", rpc, methods=["POST"])])


@pytest.mark.parametrize("state", [99, "TASK_STATE_UNSPECIFIED"])
async def test_a_task_in_an_unknown_state_fails_at_once_naming_the_field(
    router: Router, state: int | str
) -> None:
    async with serve_app(lambda url: _stateless_app(url, state)) as (url, _):
        router.register(await A2AAgent.connect(url))
        # Followed until its deadline, it would end `timeout` after 20 s instead.
        result = await router.route("echo", "hi", timeout_ms=20_000)
    failed = (result.status, result.fault, result.error_type)
    assert failed == (ResultStatus.ERROR, Fault.AGENT, "A2AProtocolError")
    assert url in (result.error or "")
    assert "'status.state'" in (result.error or "")


@pytest.fixture
def blackhole() -> Iterator[int]:
    """A port whose listen queue is full: connecting to it hangs, as to a host that drops SYNs."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(0)
    fillers = []
    for _ in range(3):
        filler = socket.socket()
        filler.setblocking(False)
        with contextlib.suppress(BlockingIOError):
            filler.connect(server.getsockname())
        fillers.append(filler)
    try:
        yield server.getsockname()[1]
    finally:
        for filler in fillers:
            filler.close()
        server.close()


async def test_an_endpoint_that_never_connects_is_offline_and_the_call_goes_elsewhere(
    router: Router, blackhole: int
) -> None:
    rpc = f"http://127.0.0.1:{blackhole}/a2a"
    async with serve_agent() as good, serve_app(lambda _: build_app(rpc, SkillsExecutor())) as (url, _):
        bad = await A2AAgent.connect(
            url,
            "t",
            # Its connect gives up after 0.5 s, which leaves the good replica seconds to answer
            # on a loaded machine.
            options={
                "instance": "bad",
                "weight": 1000,
                "timeout_ms": 5000,
                "connect_timeout_s": 0.5,
                "reprobe": {"enabled": False},
            },
        )
        router.register(bad)
        router.register(await A2AAgent.connect(good.url, "t", options={"instance": "good", "weight": 1}))
        # 'echo' is not safe to repeat: it goes elsewhere only because it was never sent.
        result = await router.route("echo", "hi")
        assert (result.status, result.agent_id, result.payload) == (ResultStatus.OK, "a2a:t:good", "hi")
        assert not bad.connected
        first = router.explain(result.task_id).attempts[0]
        assert (first.agent_id, first.fault, first.delivered) == ("a2a:t:bad", Fault.AGENT, False)
        assert "the call was not sent" in (first.error or "")
