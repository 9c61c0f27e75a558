"""Lifecycle: a server that dies, comes back, changes its tools, and shuts down cleanly."""

from __future__ import annotations

import asyncio
import os
import signal
from collections.abc import Iterator

import pytest
from mcp import StdioServerParameters
from mcp.server import Server
from mcp.server.mcpserver import MCPServer
from mcp.server.subscriptions import InMemorySubscriptionBus, ToolsListChanged

from middleware import Fault, ResultStatus
from reach_adapters import AgentState, Router
from reach_adapters.mcp import MCPOptions, MCPServerAgent, ReconnectPolicy
from tests.mcp_adapter.conftest import CALC, PYTHON, SERVERS, HttpCalc, state_of
from tests.waiting import alive, eventually

pytestmark = pytest.mark.timeout(60)

QUICK = MCPOptions(reconnect=ReconnectPolicy(initial_delay_s=0.05, max_delay_s=0.5))


async def _pid(router: Router, capability: str = "pid") -> int:
    result = await router.route(capability, {})
    assert result.ok, result.error
    pid = result.payload
    assert isinstance(pid, int)
    return pid


async def test_killed_stdio_server_goes_offline_then_comes_back(router: Router) -> None:
    agent = await MCPServerAgent.connect("calc", command=PYTHON, args=[CALC], options=QUICK)
    router.register(agent)
    first = await _pid(router)
    os.kill(first, signal.SIGKILL)
    await eventually(lambda: state_of(router, agent.agent_id) is AgentState.RECONNECTING, what="RECONNECTING")
    reason = next(info.state_reason for info in router.catalog() if info.agent_id == agent.agent_id)
    assert "closed the connection" in reason
    await eventually(lambda: state_of(router, agent.agent_id) is AgentState.ONLINE, what="recovery")
    assert "add" in router.reachable()
    second = await _pid(router)
    assert second != first
    assert (await router.route("add", {"a": 1, "b": 2})).payload == 3


async def test_call_in_flight_when_the_server_dies_fails_at_once(router: Router) -> None:
    agent = await MCPServerAgent.connect("calc", command=PYTHON, args=[CALC], options=QUICK)
    router.register(agent)
    pid = await _pid(router)
    call = asyncio.create_task(router.route("slow", {"seconds": 30}, timeout_ms=40_000))
    await asyncio.sleep(0.3)
    os.kill(pid, signal.SIGKILL)
    result = await call
    assert result.status is ResultStatus.ERROR
    assert result.error_type == "MCPConnectionError"
    # slow() is not idempotent: it may have run, so it is not sent anywhere else.
    assert result.retryable is False


async def test_replica_takes_over_when_one_is_killed(router: Router) -> None:
    first = await MCPServerAgent.connect(
        "calc", command=PYTHON, args=[CALC], options=QUICK.model_copy(update={"instance": "a"})
    )
    second = await MCPServerAgent.connect(
        "calc", command=PYTHON, args=[CALC], options=QUICK.model_copy(update={"instance": "b"})
    )
    router.register(first)
    router.register(second)
    victim = await router.route("pid", {})
    pid = victim.payload
    assert isinstance(pid, int)
    os.kill(pid, signal.SIGKILL)
    survivor = "mcp:calc:b" if victim.agent_id == "mcp:calc:a" else "mcp:calc:a"
    for _ in range(5):
        result = await router.route("add", {"a": 1, "b": 1})
        assert result.ok, result.error
        assert result.agent_id in (survivor, victim.agent_id)
    await eventually(lambda: state_of(router, victim.agent_id or "") is AgentState.ONLINE, what="recovery")


async def test_one_server_down_never_breaks_the_others(router: Router) -> None:
    calc = await MCPServerAgent.connect(
        "calc", command=PYTHON, args=[CALC], options=MCPOptions(reconnect=ReconnectPolicy(enabled=False))
    )
    time_server = await MCPServerAgent.connect("time", command=PYTHON, args=["-m", "mcp_server_time"])
    router.register(calc)
    router.register(time_server)
    os.kill(await _pid(router), signal.SIGKILL)
    await eventually(lambda: state_of(router, "mcp:calc:0") is AgentState.OFFLINE, what="OFFLINE")
    catalog = {info.agent_id: info.state for info in router.catalog()}
    assert catalog == {"mcp:calc:0": AgentState.OFFLINE, "mcp:time:0": AgentState.ONLINE}
    assert "add" not in router.reachable()
    assert "get_current_time" in router.reachable()
    assert (await router.route("get_current_time", {"timezone": "UTC"})).ok
    assert (await router.route("add", {"a": 1, "b": 1})).status is ResultStatus.NO_CANDIDATE
    await asyncio.sleep(0.5)
    # Reconnect is off: it stays down.
    assert state_of(router, "mcp:calc:0") is AgentState.OFFLINE


async def test_killed_http_server_goes_offline_then_comes_back(http_calc: HttpCalc, router: Router) -> None:
    agent = await MCPServerAgent.connect("calc", http_calc.url, options=QUICK)
    router.register(agent)
    assert (await router.route("add", {"a": 1, "b": 1})).ok
    http_calc.kill()
    # Without any call, its change stream drops and the re-listen is refused.
    await eventually(lambda: state_of(router, agent.agent_id) is AgentState.RECONNECTING, what="RECONNECTING")
    # A call may wait for it within its deadline; this one's is too short, and it says so.
    waited = await router.route("add", {"a": 1, "b": 1}, timeout_ms=300)
    assert waited.status is ResultStatus.TIMEOUT
    assert (waited.fault, waited.delivered) == (Fault.ROUTER, False)
    assert "for a reconnecting agent, never delivered" in (waited.error or "")
    # This one waits until the server is back, and is served.
    pending = asyncio.create_task(router.route("add", {"a": 2, "b": 2}, timeout_ms=20_000))
    await asyncio.sleep(0.2)
    assert not pending.done()
    http_calc.restart()
    served = await asyncio.wait_for(pending, 25)
    assert served.payload == 4
    assert state_of(router, agent.agent_id) is AgentState.ONLINE


async def test_health_probe_does_a_round_trip(http_calc: HttpCalc) -> None:
    agent = await MCPServerAgent.connect("calc", http_calc.url, options=QUICK)
    async with agent:
        assert await agent.probe() is True
        http_calc.kill()
        assert await agent.probe() is False


@pytest.fixture
def handshake_calc() -> Iterator[HttpCalc]:
    """The calc server over HTTP speaking only the 2025 protocol versions, as MCP SDK 1.x servers
    do: a client in "auto" mode falls back to initialize, and to a session the server keeps."""
    server = HttpCalc(handshake_only=True)
    try:
        yield server
    finally:
        server.stop()


async def test_a_session_a_restarted_http_server_forgot_is_opened_again_and_the_call_goes_elsewhere(
    handshake_calc: HttpCalc, router: Router
) -> None:
    preferred = QUICK.model_copy(update={"instance": "a", "weight": 100.0})
    router.register(await MCPServerAgent.connect("calc", handshake_calc.url, options=preferred))
    spare = QUICK.model_copy(update={"instance": "b", "weight": 1.0})
    router.register(await MCPServerAgent.connect("calc", command=PYTHON, args=[CALC], options=spare))
    assert (await router.route("add", {"a": 1, "b": 1})).agent_id == "mcp:calc:a"
    handshake_calc.kill()
    handshake_calc.restart()
    # Not safe to repeat, yet refused before it ran ("Session not found"): the replica takes it.
    moved = await router.route("append_note", {"text": "hello"})
    assert (moved.ok, moved.agent_id, moved.attempts) == (True, "mcp:calc:b", 2)
    refused = router.explain(moved.task_id or "").attempts[0]
    assert (refused.agent_id, refused.delivered) == ("mcp:calc:a", False)
    assert refused.error_type == "MCPSessionExpiredError"
    # The agent opened a new session, and the restarted server ran nothing of the refused call.
    await eventually(lambda: state_of(router, "mcp:calc:a") is AgentState.ONLINE, what="a new session")
    served = await router.send("mcp:calc:a", {}, capability="calls")
    assert served.payload == 0


async def test_a_health_probe_opens_a_new_session_when_a_restarted_http_server_forgot_it(
    handshake_calc: HttpCalc,
) -> None:
    async with await MCPServerAgent.connect("calc", handshake_calc.url, options=QUICK) as agent:
        handshake_calc.kill()
        handshake_calc.restart()
        assert await agent.probe() is False
        await eventually(lambda: agent.connected, what="a new session")
        assert await agent.probe() is True


@pytest.mark.parametrize("transport", ["stdio", "http", "in-process"])
async def test_tools_list_changed_updates_the_catalog(
    transport: str, request: pytest.FixtureRequest, router: Router
) -> None:
    if transport == "stdio":
        agent = await MCPServerAgent.connect("calc", command=PYTHON, args=[CALC])
    elif transport == "http":
        http_calc: HttpCalc = request.getfixturevalue("http_calc")
        agent = await MCPServerAgent.connect("calc", http_calc.url)
    else:
        from tests.mcp_adapter.servers.calc import server

        agent = await MCPServerAgent.connect("calc", server=server)
    router.register(agent)
    changes: list[int] = []
    router.on_catalog_change(lambda: changes.append(1))
    name = f"fresh_{transport.replace('-', '_')}"
    assert (await router.route("grow", {"name": name})).ok
    await eventually(lambda: name in router.reachable(), what="re-scan after tools/list_changed")
    assert changes
    result = await router.route(name, {})
    assert result.ok, result.error
    assert result.payload == name


async def test_aclose_leaves_no_child_process() -> None:
    agent = await MCPServerAgent.connect("calc", command=PYTHON, args=[CALC])
    router = Router()
    router.register(agent)
    pid = await _pid(router)
    assert alive(pid)
    await router.aclose()  # closes every agent that has aclose()
    assert not alive(pid)
    assert state_of(router, agent.agent_id) is AgentState.OFFLINE
    await agent.aclose()  # a second close is harmless


async def test_in_process_server_state_is_shared_not_copied() -> None:
    server = MCPServer("counter")
    seen: list[int] = []

    @server.tool()
    def bump(n: int) -> int:
        seen.append(n)
        return len(seen)

    async with await MCPServerAgent.connect("counter", server=server) as agent, Router() as router:
        router.register(agent)
        for n in range(3):
            assert (await router.route("bump", {"n": n})).payload == n + 1
    assert seen == [0, 1, 2]


async def test_a_server_with_no_tools_connects_and_takes_tools_added_later(router: Router) -> None:
    bus = InMemorySubscriptionBus()
    server = MCPServer("later", subscriptions=bus)
    agent = await MCPServerAgent.connect("later", server=server)
    router.register(agent)
    assert state_of(router, agent.agent_id) is AgentState.ONLINE
    assert agent.capabilities == ()
    assert router.reachable() == {}

    def hello() -> str:
        return "hello"

    server.add_tool(hello, name="hello")
    await bus.publish(ToolsListChanged())
    await eventually(lambda: "hello" in router.reachable(), what="the tool added later")
    assert (await router.route("hello", {})).payload == "hello"


async def test_a_stdio_server_with_no_tools_connects(router: Router) -> None:
    agent = await MCPServerAgent.connect("empty", command=PYTHON, args=[str(SERVERS / "empty.py")])
    router.register(agent)
    assert (state_of(router, agent.agent_id), agent.capabilities) == (AgentState.ONLINE, ())


@pytest.mark.parametrize("protocol", ["auto", "2025-11-25"])
@pytest.mark.parametrize("where", ["in process", "stdio"])
async def test_a_server_without_the_tools_capability_connects(
    router: Router, where: str, protocol: str
) -> None:
    # It would answer tools/list with "method not found": it has no tools to list.
    server = (
        Server("bare")
        if where == "in process"
        else StdioServerParameters(command=PYTHON, args=[str(SERVERS / "bare.py")])
    )
    agent = await MCPServerAgent.connect("bare", server, options=MCPOptions(protocol=protocol))
    router.register(agent)
    assert (state_of(router, agent.agent_id), agent.capabilities) == (AgentState.ONLINE, ())
    assert await agent.probe()
