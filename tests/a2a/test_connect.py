"""Connecting: the card's skills as capabilities, overrides, and cards the router cannot use."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable

import pytest
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from reach_adapters import Router
from reach_adapters.a2a import A2AAgent, A2ACardError, A2AConnectionError
from reach_adapters.a2a.card import TEXT_INPUT
from reach_adapters.errors import InvalidDeclarationError
from tests.a2a.agents import Served, SkillsExecutor, agent_card, serve_app

CARD_PATH = "/.well-known/agent-card.json"


async def test_each_skill_is_a_capability(agent: A2AAgent) -> None:
    assert agent.agent_id == "a2a:test-agent:0"
    caps = {cap.name: cap for cap in agent.capabilities}
    assert {"echo", "sum", "slow", "stream", "ask", "fail"} <= caps.keys()
    echo = caps["echo"]
    assert echo.title == "Echo"
    assert echo.description == "Echo the text back."
    assert echo.keywords == ["echo", "repeat"]
    assert echo.examples == ["say it back"]
    # Text-only skills take {"text": ...}; JSON skills any object.
    assert echo.input_schema == TEXT_INPUT
    assert caps["sum"].input_schema == {"type": "object"}
    assert caps["sum"].meta["a2a"] == {
        "input_modes": ["application/json"],
        "output_modes": ["application/json"],
    }
    assert agent.connected


async def test_name_options_and_overrides(served: Served) -> None:
    agent = await A2AAgent.connect(
        served.url,
        "helper",
        options={"instance": "7", "timeout_ms": 1234},
        overrides={"echo": {"idempotent": True, "weight": 80.0, "keywords": ["parrot"]}},
    )
    try:
        assert agent.agent_id == "a2a:helper:7"
        echo = next(cap for cap in agent.capabilities if cap.name == "echo")
        assert (echo.idempotent, echo.weight, echo.keywords, echo.timeout_ms) == (
            True,
            80.0,
            ["parrot"],
            1234,
        )
    finally:
        await agent.aclose()


async def test_an_override_for_no_skill_names_the_skills(served: Served) -> None:
    with pytest.raises(A2ACardError, match=r"overrides name no skill \['nope'\].*'echo'"):
        await A2AAgent.connect(served.url, overrides={"nope": {"weight": 1.0}})


async def test_bad_arguments() -> None:
    with pytest.raises(InvalidDeclarationError, match="base URL"):
        await A2AAgent.connect("ftp://x")
    with pytest.raises(InvalidDeclarationError, match="timeout_ms"):
        await A2AAgent.connect("http://127.0.0.1:1", options={"timeout_ms": -1})


def _card_app(body: str | None, status: int = 200) -> Callable[[str], Starlette]:
    async def card(_: Request) -> Response:
        return Response(body or "", status_code=status, media_type="application/json")

    return lambda _url: Starlette(routes=[] if body is None else [Route(CARD_PATH, card)])


@pytest.fixture
async def card_url(request: pytest.FixtureRequest) -> AsyncIterator[str]:
    async with serve_app(_card_app(*request.param)) as (url, _):
        yield url


@pytest.mark.parametrize(
    ("card_url", "match"),
    [
        ((None,), r"no agent card at http://127\.0\.0\.1:\d+/\.well-known/agent-card\.json \(HTTP 404\)"),
        (
            ("{not json",),
            r"agent card at http://127\.0\.0\.1:\d+/\.well-known/agent-card\.json cannot be read",
        ),
        (('["a list"]',), r"agent card at .*cannot be read.*JSON object"),
        (
            (
                '{"name": "x", "supportedInterfaces": [{"url": "http://127.0.0.1:1/a2a", '
                '"protocolBinding": "JSONRPC", "protocolVersion": "1.0"}], '
                '"skills": [{"id": "ok", "name": "ok"}, {"name": "Nameless"}]}',
            ),
            r"agent card at http://127\.0\.0\.1:\d+: skills\[1\] \(Nameless\) has no 'id'",
        ),
        (
            (
                '{"name": "x", "supportedInterfaces": [{"url": "grpc://x", "protocolBinding": "GRPC"}], '
                '"skills": []}',
            ),
            r"field 'supported_interfaces' offers \['GRPC '\]",
        ),
    ],
    indirect=["card_url"],
    ids=["404", "invalid-json", "not-an-object", "skill-without-id", "no-transport"],
)
async def test_bad_cards_name_the_url_and_the_field(card_url: str, match: str) -> None:
    with pytest.raises(A2ACardError, match=match):
        await A2AAgent.connect(card_url)


async def test_an_unreachable_agent_names_its_url() -> None:
    async with serve_app(_card_app(None)) as (url, _server):
        pass  # stopped: nothing listens on its port any more
    with pytest.raises(A2AConnectionError, match=rf"cannot reach the A2A agent at {url}"):
        await A2AAgent.connect(url, options={"connect_timeout_s": 5})


async def test_an_a2a_0_3_agent_is_reached_through_the_compatible_transport() -> None:
    """A 0.3 card (``url``, ``protocolVersion``) and a server that speaks 0.3 only on its endpoint."""
    executor = SkillsExecutor()

    def app(url: str) -> Starlette:
        card = agent_card(f"{url}/a2a")
        handler = DefaultRequestHandler(
            agent_executor=executor, task_store=InMemoryTaskStore(), agent_card=card
        )
        legacy = {
            "name": "Old Agent",
            "description": "speaks A2A 0.3",
            "url": f"{url}/a2a",
            "protocolVersion": "0.3.0",
            "preferredTransport": "JSONRPC",
            "version": "1",
            "capabilities": {"streaming": True},
            "defaultInputModes": ["text/plain"],
            "defaultOutputModes": ["text/plain"],
            "skills": [{"id": "echo", "name": "Echo", "description": "Echo.", "tags": ["echo"]}],
        }

        async def old_card(_: Request) -> Response:
            return Response(json.dumps(legacy), media_type="application/json")

        routes = [
            Route(CARD_PATH, old_card),
            *create_jsonrpc_routes(handler, "/a2a", enable_v0_3_compat=True),
        ]
        return Starlette(routes=routes)

    async with serve_app(app) as (url, _server):
        agent = await A2AAgent.connect(url)
        try:
            assert agent.agent_id == "a2a:old-agent:0"
            assert agent.card.supported_interfaces[0].protocol_version == "0.3.0"
            router = Router()
            router.register(agent)
            assert (await router.route("echo", "from 1.0 to 0.3")).payload == "from 1.0 to 0.3"
            assert [chunk async for chunk in router.stream("echo", "streamed")] == ["streamed"]
        finally:
            await agent.aclose()
