"""`MCPServerAgent.connect` takes the SDK's own server types; the old factories still work, warned."""

from __future__ import annotations

import logging
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from mcp import StdioServerParameters
from mcp.server.mcpserver import MCPServer

from reach_adapters import InvalidDeclarationError, Router
from reach_adapters.mcp import (
    MCPConnectionError,
    MCPOptions,
    MCPServerAgent,
    MCPServerConfig,
    MCPTimeoutError,
    ReconnectPolicy,
    StdioTarget,
)
from tests.mcp_adapter.conftest import CALC, MUTE, PYTHON, SERVERS, HttpCalc, state_of
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(60)

WHERE = str(SERVERS / "where.py")
ROOT = Path(__file__).resolve().parents[2]


async def test_stdio_server_parameters_with_env_and_cwd(tmp_path: Path, router: Router) -> None:
    params = StdioServerParameters(command=PYTHON, args=[WHERE], env={"REACH_PROBE": "seen"}, cwd=tmp_path)
    async with await MCPServerAgent.connect("where", params) as agent:
        router.register(agent)
        result = await router.route("where", {"variable": "REACH_PROBE"})
    assert result.ok, result.error
    assert result.payload == {"python": PYTHON, "cwd": str(tmp_path), "value": "seen"}


@pytest.mark.parametrize("how", ["command", "parameters"])
async def test_python_is_the_interpreter_running_reach_whatever_path_says(
    how: str, tmp_path: Path, router: Router
) -> None:
    # A PATH holding no python at all: only the interpreter running reach can start the server.
    env = {"PATH": str(tmp_path)}
    params = StdioServerParameters(command="python", args=[WHERE], env=env)
    agent = await (
        MCPServerAgent.connect("where", params)
        if how == "parameters"
        else MCPServerAgent.connect("where", command="python", args=[WHERE], options={"instance": "c"})
    )
    async with agent:
        router.register(agent)
        result = await router.route("where", {"variable": "PATH"})
    assert result.ok, result.error
    assert isinstance(result.payload, dict)
    assert result.payload["python"] == sys.executable


async def test_a_url_server(http_calc: HttpCalc) -> None:
    async with await MCPServerAgent.connect("calc", http_calc.url) as agent:
        assert agent.agent_id == "mcp:calc:0"
        assert "add" in {cap.name for cap in agent.capabilities}
        assert "http://127.0.0.1" in repr(agent)


async def test_an_in_process_server_object(router: Router) -> None:
    server = MCPServer("inline")

    @server.tool()
    def double(n: int) -> int:
        return 2 * n

    async with await MCPServerAgent.connect("inline", server, options=MCPOptions(prefix="x.")) as agent:
        router.register(agent)
        assert (await router.route("x.double", {"n": 21})).payload == 42
        # The low-level server the SDK object wraps is accepted as well.
        low = await MCPServerAgent.connect("low", server._lowlevel_server)
        async with low:
            assert {cap.name for cap in low.capabilities} == {"double"}


async def test_options_as_a_mapping_are_checked_like_the_model() -> None:
    with pytest.raises(InvalidDeclarationError, match=r"MCP server 'calc': invalid options: field 'weight'"):
        await MCPServerAgent.connect("calc", command=PYTHON, args=[CALC], options={"weight": -1})
    with pytest.raises(InvalidDeclarationError, match=r"field 'reconnect\.initial_delay_s'"):
        await MCPServerAgent.connect(
            "calc", command=PYTHON, args=[CALC], options={"reconnect": {"initial_delay_s": 0}}
        )


async def test_common_slips_in_the_arguments_are_named() -> None:
    params = StdioServerParameters(command=PYTHON, args=[CALC])
    with pytest.raises(InvalidDeclarationError, match="the agent's name first, got StdioServerParameters"):
        await MCPServerAgent.connect(params)  # type: ignore[arg-type]
    # A string would be split into one-letter arguments and the server never start.
    with pytest.raises(InvalidDeclarationError, match=r"args= takes a list of arguments.*\['-m', 'x'\]"):
        await MCPServerAgent.connect("calc", command=PYTHON, args="-m x")
    with pytest.raises(InvalidDeclarationError, match="must start with http:// or https://"):
        await MCPServerAgent.connect("calc", "ftp://127.0.0.1/mcp")


async def test_reconnect_backs_off_while_the_server_is_down_then_comes_back(
    http_calc: HttpCalc, router: Router, caplog: pytest.LogCaptureFixture
) -> None:
    quick = MCPOptions(reconnect=ReconnectPolicy(initial_delay_s=0.05, max_delay_s=0.2, jitter_s=0.01))
    agent = await MCPServerAgent.connect("calc", http_calc.url, options=quick)
    router.register(agent)
    with caplog.at_level(logging.INFO, logger="reach_adapters.mcp.agent"):
        http_calc.kill()
        # Several attempts fail while it is down: the backoff retries, it does not give up.
        await eventually(lambda: caplog.text.count("reconnect failed") >= 3, what="three failed attempts")
        http_calc.restart()
        await eventually(lambda: "mcp:calc:0 reconnected" in caplog.text, what="reconnected")
    assert state_of(router, agent.agent_id).value == "online"
    assert (await router.route("add", {"a": 2, "b": 3})).payload == 5


# -- deprecated ------------------------------------------------------------------------------


async def test_start_is_a_deprecated_wrapper_of_connect() -> None:
    config = MCPServerConfig(name="calc", target=StdioTarget(command=PYTHON, args=[CALC]), instance="old")
    with pytest.warns(DeprecationWarning, match=r"MCPServerAgent\.start\(config\) is deprecated"):
        agent = await MCPServerAgent.start(config)
    async with agent:
        assert agent.agent_id == "mcp:calc:old"
        assert agent.options.instance == "old"


async def test_connect_all_is_deprecated_and_reports_each_failure(router: Router) -> None:
    configs = [
        MCPServerConfig(name="calc", target=StdioTarget(command=PYTHON, args=[CALC])),
        MCPServerConfig(name="ghost", target=StdioTarget(command="/nonexistent/mcp-server")),
        MCPServerConfig(name="mute", target=StdioTarget(command=PYTHON, args=[MUTE]), connect_timeout_s=0.5),
    ]
    with pytest.warns(DeprecationWarning, match="connect_all"):
        report = await MCPServerAgent.connect_all(configs)
    assert [agent.agent_id for agent in report.agents] == ["mcp:calc:0"]
    assert isinstance(report.failures["mcp:ghost:0"], MCPConnectionError)
    assert isinstance(report.failures["mcp:mute:0"], MCPTimeoutError)
    for agent in report.agents:
        router.register(agent)
    assert (await router.route("add", {"a": 1, "b": 2})).payload == 3


async def test_connect_all_refuses_what_it_cannot_connect() -> None:
    with (
        pytest.warns(DeprecationWarning, match="connect_all"),
        pytest.raises(InvalidDeclarationError, match="takes MCPServerConfig items"),
    ):
        await MCPServerAgent.connect_all([{"name": "calc"}])  # type: ignore[list-item]
    twice = MCPServerConfig(name="calc", target=StdioTarget(command=PYTHON, args=[CALC]))
    with (
        pytest.warns(DeprecationWarning, match="connect_all"),
        pytest.raises(InvalidDeclarationError, match="given twice"),
    ):
        await MCPServerAgent.connect_all([twice, twice])


# -- the sync loop -----------------------------------------------------------------------------


def test_sessions_opened_from_sync_code_are_closed_at_exit(tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"
    script = textwrap.dedent(
        f"""
        import atexit, threading

        def after_reach():
            # Registered first, so it runs after the adapter's exit hook.
            threads = [t.name for t in threading.enumerate()]
            print("portal thread:", "agent-reach-portal" in threads)

        atexit.register(after_reach)

        from mcp import StdioServerParameters
        from reach_adapters.mcp import MCPServerAgent

        env = {{"REACH_PID_FILE": {str(pid_file)!r}}}
        params = StdioServerParameters(command="python", args=[{WHERE!r}], env=env)
        agent = MCPServerAgent.connect_sync("where", params)
        print("connected:", agent.connected)
        """
    )
    done = subprocess.run(
        [PYTHON, "-W", "error::RuntimeWarning", "-c", script],
        capture_output=True,
        text=True,
        timeout=45,
        cwd=ROOT,
        env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "connected: True" in done.stdout
    assert "portal thread: False" in done.stdout
    assert "Task was destroyed" not in done.stderr
    assert "Exception ignored" not in done.stderr, done.stderr
    server_pid = int(pid_file.read_text())
    # The server process was stopped with the session, not orphaned.
    assert subprocess.run(["kill", "-0", str(server_pid)], capture_output=True, check=False).returncode != 0
