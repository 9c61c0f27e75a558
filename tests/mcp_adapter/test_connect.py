"""Connecting servers: transports, tool scanning, capability mapping, bad input at connect."""

from __future__ import annotations

import asyncio
import base64
import logging
import re
from typing import Any

import httpx2
import pytest
from mcp import StdioServerParameters
from mcp.server.mcpserver import MCPServer

from reach_adapters import AgentState, Capability, InvalidDeclarationError, Router
from reach_adapters.mcp import (
    MCPConnectionError,
    MCPOptions,
    MCPProtocolError,
    MCPServerAgent,
    MCPTimeoutError,
    streams,
)
from tests.mcp_adapter.asgi import mute_listen, serve_asgi
from tests.mcp_adapter.conftest import CALC, MUTE, PYTHON, HttpCalc
from tests.mcp_adapter.servers.paged import GOOD, INVALID_NAME, INVALID_SCHEMA, paged_server
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(60)

URL = "http://127.0.0.1:1/mcp"


def _cap(agent: MCPServerAgent, name: str) -> Capability:
    return next(cap for cap in agent.capabilities if cap.name == name)


async def test_stdio_server_tools_become_capabilities(calc: MCPServerAgent) -> None:
    assert calc.agent_id == "mcp:calc:0"
    names = {cap.name for cap in calc.capabilities}
    assert {"add", "append_note", "delete_note", "describe", "fail", "grow", "pid", "slow"} <= names
    add = _cap(calc, "add")
    assert add.description == "Add two integers."
    assert add.input_schema["required"] == ["a", "b"]
    assert add.input_schema["properties"]["a"]["type"] == "integer"
    assert add.output_schema is not None
    assert add.output_schema["type"] == "integer"
    assert _cap(calc, "describe").output_schema is None


async def test_annotations_set_the_flags_retries_rely_on(calc: MCPServerAgent) -> None:
    add, delete, append = _cap(calc, "add"), _cap(calc, "delete_note"), _cap(calc, "append_note")
    assert (add.read_only, add.idempotent, add.destructive) == (True, True, False)
    # Destructive yet idempotent (delete by id): safe to repeat, not read-only.
    assert (delete.read_only, delete.idempotent, delete.destructive) == (False, True, True)
    # No hints: the MCP defaults, neither read-only nor idempotent, and destructive.
    assert (append.read_only, append.idempotent, append.destructive) == (False, False, True)


async def test_options_reach_every_capability() -> None:
    agent = await MCPServerAgent.connect(
        "calc",
        command=PYTHON,
        args=[CALC],
        options=MCPOptions(timeout_ms=1234, max_concurrency=3, weight=7.0),
    )
    async with agent:
        assert {(c.timeout_ms, c.max_concurrency, c.weight) for c in agent.capabilities} == {(1234, 3, 7.0)}


async def test_http_server_connects_with_headers_and_auth(http_calc: HttpCalc, router: Router) -> None:
    agent = await MCPServerAgent.connect(
        "calc", http_calc.url, headers={"x-team": "reach"}, auth=httpx2.BasicAuth("ada", "secret")
    )
    router.register(agent)
    result = await router.route("add", {"a": 20, "b": 22})
    assert result.ok, result.error
    assert result.payload == 42
    assert result.agent_id == "mcp:calc:0"
    assert (await router.route("header", {"name": "x-team"})).payload == "reach"
    authorization = (await router.route("header", {"name": "authorization"})).payload
    assert authorization == "Basic " + base64.b64encode(b"ada:secret").decode()


async def test_in_process_server_connects(router: Router) -> None:
    server = MCPServer("inline")

    @server.tool()
    def double(x: int) -> int:
        return 2 * x

    router.register(await MCPServerAgent.connect("inline", server=server))
    result = await router.route("double", {"x": 21})
    assert result.payload == 42


async def test_real_mcp_server_time(router: Router) -> None:
    agent = await MCPServerAgent.connect("time", command=PYTHON, args=["-m", "mcp_server_time"])
    router.register(agent)
    assert agent.agent_id == "mcp:time:0"
    current = _cap(agent, "get_current_time")
    assert current.read_only
    assert current.idempotent
    assert current.input_schema["required"] == ["timezone"]
    assert current.output_schema is not None
    result = await router.route("get_current_time", {"timezone": "UTC"})
    assert result.ok, result.error
    assert isinstance(result.payload, dict)
    assert result.payload["timezone"] == "UTC"
    converted = await router.route(
        "convert_time", {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}
    )
    assert converted.ok, converted.error
    assert isinstance(converted.payload, dict)
    assert converted.payload["time_difference"] == "+9.0h"


async def test_pagination_is_followed_and_bad_tools_skipped_with_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    with caplog.at_level(logging.WARNING, logger="reach_adapters.mcp"):
        agent = await MCPServerAgent.connect("paged", server=paged_server())
    async with agent:
        assert sorted(cap.name for cap in agent.capabilities) == sorted(GOOD)
    warned = " ".join(record.getMessage() for record in caplog.records)
    assert f"skipped tool {INVALID_SCHEMA!r}" in warned
    assert "input_schema" in warned
    assert f"skipped tool {INVALID_NAME!r}" in warned


async def test_a_listing_that_never_ends_is_a_protocol_error() -> None:
    with pytest.raises(MCPProtocolError, match="pagination never ends"):
        await MCPServerAgent.connect("paged", server=paged_server(endless=True))


async def test_same_tool_on_two_servers_gives_two_candidates(router: Router) -> None:
    first = await MCPServerAgent.connect("calc", command=PYTHON, args=[CALC], options={"instance": "a"})
    second = await MCPServerAgent.connect("calc", command=PYTHON, args=[CALC], options={"instance": "b"})
    router.register(first)
    router.register(second)
    serving = {info.agent_id for info in router.catalog() if any(c.name == "add" for c in info.capabilities)}
    assert serving == {"mcp:calc:a", "mcp:calc:b"}
    result = await router.broadcast("add", {"a": 1, "b": 1})
    assert result.results is not None
    assert sorted(r.agent_id or "" for r in result.results if r.ok) == ["mcp:calc:a", "mcp:calc:b"]


async def test_prefix_keeps_servers_that_are_not_replicas_apart(router: Router) -> None:
    plain = await MCPServerAgent.connect("calc", command=PYTHON, args=[CALC])
    prefixed = await MCPServerAgent.connect(
        "other", command=PYTHON, args=[CALC], options=MCPOptions(prefix="other.")
    )
    router.register(plain)
    router.register(prefixed)
    assert "other.add" in router.reachable()
    result = await router.route("other.add", {"a": 2, "b": 3})
    assert result.ok, result.error
    assert result.agent_id == "mcp:other:0"
    assert (await router.route("add", {"a": 2, "b": 3})).agent_id == "mcp:calc:0"


async def test_command_that_cannot_start_names_server_and_cause() -> None:
    with pytest.raises(MCPConnectionError, match=r"MCP server 'ghost'.*FileNotFoundError"):
        await MCPServerAgent.connect("ghost", command="/nonexistent/mcp-server")


async def test_process_that_exits_at_once_names_server_and_cause() -> None:
    with pytest.raises(MCPConnectionError, match=r"MCP server 'quitter'.*closed the connection"):
        await MCPServerAgent.connect("quitter", command=PYTHON, args=["-c", "raise SystemExit(3)"])


async def test_refused_url_names_server_and_cause() -> None:
    with pytest.raises(
        MCPConnectionError, match=r"MCP server 'nobody' \(http://127\.0\.0\.1:9/mcp\).*Connect"
    ):
        await MCPServerAgent.connect("nobody", "http://127.0.0.1:9/mcp", options={"http_timeout_s": 5.0})


async def test_server_hanging_in_initialize_times_out() -> None:
    with pytest.raises(MCPTimeoutError, match=r"MCP server 'mute'.*did not finish initialize"):
        await MCPServerAgent.connect(
            "mute", command=PYTHON, args=[MUTE], options=MCPOptions(connect_timeout_s=0.5)
        )


async def test_a_server_that_never_acknowledges_its_change_stream_still_connects(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The stream is optional; a server that frames its acknowledgement wrongly is no dead agent."""
    server = MCPServer("calc")

    @server.tool()
    def add(a: int, b: int) -> int:
        return a + b

    options = MCPOptions(connect_timeout_s=2, sse_read_timeout_s=1)
    async with serve_asgi(mute_listen(server.streamable_http_app())) as url, Router() as router:
        with caplog.at_level(logging.WARNING):
            agent = await MCPServerAgent.connect("calc", url, options=options)
        router.register(agent)
        assert (await router.route("add", {"a": 1, "b": 2})).payload == 3
        # The unanswered stream is not left to the read timeout, which would end the session.
        await asyncio.sleep(1.5)
        assert (await router.route("add", {"a": 2, "b": 2})).payload == 4
        assert router.catalog()[0].state is AgentState.ONLINE
    assert "did not acknowledge its change stream" in caplog.text


async def test_a_change_stream_never_acknowledged_is_warned_of_once_in_a_row(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Asked again and again, the stream would log a warning each time, for as long as it runs."""
    monkeypatch.setattr(streams, "_REASK_S", 0.05)
    server = MCPServer("calc")

    @server.tool()
    def add(a: int, b: int) -> int:
        return a + b

    options = MCPOptions(connect_timeout_s=0.4, sse_read_timeout_s=0.2)
    said = "left its change stream unacknowledged"
    async with serve_asgi(mute_listen(server.streamable_http_app())) as url:
        with caplog.at_level(logging.INFO, logger="reach_adapters.mcp.streams"):
            agent = await MCPServerAgent.connect("calc", url, options=options)
            await eventually(lambda: caplog.text.count(said) >= 3, what="three requests unanswered")
        await agent.aclose()
    levels = [record.levelno for record in caplog.records if said in record.getMessage()]
    assert levels[:3] == [logging.WARNING, logging.INFO, logging.INFO]


async def test_a_resource_watched_at_a_server_that_never_acknowledges_keeps_the_session(
    caplog: pytest.LogCaptureFixture,
) -> None:
    server = MCPServer("counter")

    @server.resource("counter://value")
    def value() -> str:
        return "0"

    @server.tool()
    def add(a: int, b: int) -> int:
        return a + b

    options = MCPOptions(connect_timeout_s=2, sse_read_timeout_s=1)
    async with serve_asgi(mute_listen(server.streamable_http_app())) as url, Router() as router:
        agent = await MCPServerAgent.connect("counter", url, options=options)
        router.register(agent)
        with caplog.at_level(logging.INFO, logger="reach_adapters"):
            await agent.watch("counter://value")
            await asyncio.sleep(1.5)
        assert (await router.route("add", {"a": 2, "b": 2})).payload == 4
    # The unanswered request is withdrawn before the read timeout, which would end the session
    # (and every call in flight on it).
    assert "reconnecting" not in caplog.text
    assert "left a stream of resource updates unacknowledged" in caplog.text


@pytest.mark.parametrize(
    ("server", "arguments", "problem"),
    [
        (None, {}, "give the server: StdioServerParameters(...) or command="),
        (URL, {"command": PYTHON}, "give the server or command=, not both"),
        ("ftp://example.com", {}, "a URL must start with http:// or https://"),
        (None, {"args": ["x"]}, "args= goes with command="),
        (None, {"command": PYTHON, "headers": {"a": "b"}}, "headers= and auth= apply to a URL server"),
        (StdioServerParameters(command=""), {}, "the command is empty"),
        (42, {}, "cannot connect to a int"),
        (None, {"command": PYTHON, "options": {"timeout_ms": 0}}, "invalid options: field 'timeout_ms'"),
        (None, {"command": PYTHON, "options": {"timeout": 1}}, "field 'timeout': Extra inputs"),
        (None, {"command": PYTHON, "options": {"instance": "a b"}}, "valid agent id"),
        # Keywords connect took before: where each went.
        (None, {"command": PYTHON, "timeout_ms": 5}, "options=MCPOptions(timeout_ms=...)"),
        (
            None,
            {"command": PYTHON, "env": {"TZ": "UTC"}},
            "StdioServerParameters(command=..., args=..., env=...)",
        ),
        (None, {"url": URL}, "give the URL itself as the server"),
        (None, {"command": PYTHON, "retries": 2}, "connect takes name, server, command="),
    ],
)
async def test_bad_connect_arguments_are_rejected(
    server: object, arguments: dict[str, Any], problem: str
) -> None:
    with pytest.raises(InvalidDeclarationError, match=re.escape(problem)):
        await MCPServerAgent.connect("calc", server, **arguments)  # type: ignore[arg-type]


async def test_an_agent_is_built_by_connect() -> None:
    with pytest.raises(InvalidDeclarationError, match=r"with MCPServerAgent\.connect\(\)"):
        MCPServerAgent({"name": "calc"})  # type: ignore[arg-type]
