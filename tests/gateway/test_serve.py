"""`reach serve` in a subprocess: MCP and the HTTP API on one port, clean stops, bad input refused."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import cast

import httpx
import pytest
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.types import RequestParamsMeta, TextContent

from reach_adapters import Capability
from reach_adapters.mcp.converter import META_PREFIX
from tests.gateway.conftest import (
    ECHO,
    PROBE,
    PROBE_SERVER,
    PYTHON,
    REACH,
    ROOT,
    SHOUT,
    ReachServer,
    run_reach,
    write,
)
from tests.waiting import alive, wait_until

pytestmark = pytest.mark.timeout(90)

Serve = Callable[..., ReachServer]


@pytest.fixture
def mixed(config_dir: Path) -> Path:
    """Function agents, a LangChain runnable, the real mcp-server-time and the test MCP server."""
    write(config_dir, "routing_policy.yaml", "max_retries: 1\ndefault_agent: util:where:01\n")
    write(config_dir, "util:echo:01.yaml", ECHO)
    write(
        config_dir,
        "util:shout:01.yaml",
        SHOUT + "overrides:\n  shout:\n    weight: 90\n    read_only: true\n",
    )
    write(
        config_dir,
        "util:where:01.yaml",
        "kind: function\nagent_id: util:where:01\nfunction: tests.gateway.agents:where\n",
    )
    write(
        config_dir,
        "text:reverse:01.yaml",
        "kind: langchain\nagent_id: text:reverse:01\nrunnable: tests.gateway.agents:reverser\n",
    )
    write(
        config_dir, "mcp:time:0.yaml", "kind: mcp\nname: time\ncommand: python\nargs: [-m, mcp_server_time]\n"
    )
    write(
        config_dir,
        "mcp:probe:0.yaml",
        PROBE + "overrides:\n  say:\n    timeout_ms: 4000\n    keywords: [parrot]\n",
    )
    return config_dir


def text_of(blocks: Sequence[object]) -> str:
    return "".join(block.text for block in blocks if isinstance(block, TextContent))


async def test_one_port_serves_mcp_and_the_api(serve: Serve, mixed: Path) -> None:
    server = serve(mixed)
    assert server.mcp_url == f"{server.url}/mcp"
    # The ready line names every endpoint served, A2A's too (the a2a extra is installed here).
    assert server.a2a_url == f"{server.url}/a2a"
    assert server.url.startswith("http://127.0.0.1:")
    async with Client(server.mcp_url) as client:
        tools = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert {
            "echo",
            "shout",
            "where",
            "reverse",
            "get_current_time",
            "convert_time",
            "pid",
            "grow",
        } <= set(tools)
        assert tools["shout"].annotations is not None
        assert tools["shout"].annotations.read_only_hint is True
        shouted = await client.call_tool("shout", {"text": "hello"})
        assert text_of(shouted.content) == "HELLO"
        reversed_ = await client.call_tool("reverse", {"input": "abc"})
        assert text_of(reversed_.content) == "cba"
        now = await client.call_tool("get_current_time", {"timezone": "Europe/Paris"})
        assert not now.is_error
        assert now.structured_content is not None
        assert now.structured_content["timezone"] == "Europe/Paris"
    health = server.health()
    assert health["generation"] == 1
    assert health["agents"] == health["usable_agents"] == 6
    catalog = {info["agent_id"]: info for info in server.api("GET", "/catalog").json()}
    probe = {cap["name"]: cap for cap in catalog["mcp:probe:0"]["capabilities"]}
    assert probe["say"]["timeout_ms"] == 4000
    assert probe["say"]["keywords"] == ["parrot"]
    assert catalog["util:shout:01"]["calls"] == 1


async def test_the_api_routes_sends_and_explains(serve: Serve, mixed: Path) -> None:
    server = serve(mixed)
    routed = server.api("POST", "/route", json={"capability": "say", "payload": {"text": "hi"}}).json()
    assert routed["status"] == "ok"
    assert routed["payload"] == "hi"
    assert routed["agent_id"] == "mcp:probe:0"
    sent = server.api("POST", "/send", json={"agent_id": "util:echo:01", "payload": [1, 2]}).json()
    assert (sent["status"], sent["payload"]) == ("ok", [1, 2])
    fell_back = server.api("POST", "/route", json={"capability": "nobody_has_it", "payload": {}}).json()
    assert fell_back["served_by"] == "default"
    assert fell_back["payload"] == {"capability": "nobody_has_it"}

    record = server.api("GET", f"/explain/{routed['task_id']}", params={"why_not": "util:echo:01"}).json()
    assert record["chosen"] == "mcp:probe:0"
    assert record["capability"] == "say"
    assert record["why_not"].startswith("util:echo:01 was not a candidate")
    recent = server.api("GET", "/decisions", params={"limit": "2"}).json()
    assert [r["task_id"] for r in recent] == [fell_back["task_id"], sent["task_id"]]
    only_say = server.api("GET", "/decisions", params={"capability": "say"}).json()
    assert [r["task_id"] for r in only_say] == [routed["task_id"]]

    metrics = httpx.get(f"{server.url}/metrics", timeout=30)
    assert metrics.status_code == 200
    assert (
        'reach_reaches_total{capability="say",fault="",served_by="candidate",status="ok"} 1.0' in metrics.text
    )
    assert "reach_config_generation 1.0" in metrics.text


async def test_a_task_keeps_its_ids_from_the_mcp_client_to_the_mcp_server_behind(
    serve: Serve, config_dir: Path
) -> None:
    # The probe is no reach router, so it gets the task only when its config asks for that.
    write(config_dir, "mcp:probe:0.yaml", PROBE + "task_meta: always\n")
    server = serve(config_dir, "--log-json")
    meta = cast(
        "RequestParamsMeta", {f"{META_PREFIX}task_id": "order-42", f"{META_PREFIX}trace_id": "trace-abc"}
    )
    async with Client(server.mcp_url) as client:
        answer = await client.call_tool("seen", {}, meta=meta)
    assert answer.structured_content is not None
    assert answer.structured_content[f"{META_PREFIX}task_id"] == "order-42"
    assert answer.structured_content[f"{META_PREFIX}trace_id"] == "trace-abc"
    record = server.api("GET", "/explain/order-42").json()
    assert (record["trace_id"], record["chosen"]) == ("trace-abc", "mcp:probe:0")
    assert server.terminate() == 0
    logged = [json.loads(line) for line in server.log.read_text().splitlines() if line.startswith("{")]
    decision = next(r for r in logged if r["logger"] == "reach_adapters.decisions")
    assert (decision["task_id"], decision["trace_id"], decision["decision_type"]) == (
        "order-42",
        "trace-abc",
        "selected",
    )


async def test_bad_requests_are_4xx_with_what_to_fix(serve: Serve, config_dir: Path) -> None:
    write(config_dir, "util:echo:01.yaml", ECHO)
    server = serve(config_dir, "--log-json")
    not_json = server.api("POST", "/route", content=b"{nope", headers={"Content-Type": "application/json"})
    assert not_json.status_code == 400
    assert "not JSON" in not_json.json()["error"]
    unknown_key = server.api("POST", "/route", json={"capability": "echo", "colour": "red"})
    assert unknown_key.status_code == 400
    assert "field 'colour'" in unknown_key.json()["error"]
    bad_option = server.api("POST", "/route", json={"capability": "echo", "options": {"priority": 99}})
    assert bad_option.status_code == 400
    assert bad_option.json()["error_type"] == "InvalidMessageError"
    missing = server.api("GET", "/explain/no-such-task")
    assert missing.status_code == 404
    assert missing.json()["error_type"] == "UnknownTaskError"
    bad_limit = server.api("GET", "/decisions", params={"limit": "lots"})
    assert bad_limit.status_code == 400
    # A routed call that fails is still a 200: the outcome is data.
    failed = server.api("POST", "/route", json={"capability": "missing_everywhere"})
    assert failed.status_code == 200
    assert failed.json()["status"] == "no_candidate"
    assert server.terminate() == 0
    records = [json.loads(line) for line in server.log.read_text().splitlines() if line.startswith("{")]
    decision = next(r for r in records if r.get("decision_type") == "filtered")
    assert decision["task_id"] == failed.json()["task_id"]
    assert decision["trace_id"] == failed.json()["trace_id"]
    assert decision["logger"] == "reach_adapters.decisions"


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
async def test_a_stop_signal_stops_everything_it_started(serve: Serve, config_dir: Path, signum: int) -> None:
    write(config_dir, "mcp:probe:0.yaml", PROBE)
    server = serve(config_dir)
    async with Client(server.mcp_url) as client:
        answer = await client.call_tool("pid", {})
    pid = int(text_of(answer.content))
    assert alive(pid)
    server.process.send_signal(signum)
    assert server.process.wait(timeout=30) == 0
    wait_until(lambda: not alive(pid), what="the MCP server process to end")
    with pytest.raises(httpx.ConnectError):
        httpx.get(f"{server.api_url}/health", timeout=5)


async def test_stdio_transport_serves_mcp_on_stdio_and_the_api_on_its_port(
    config_dir: Path, tmp_path: Path
) -> None:
    write(config_dir, "util:echo:01.yaml", ECHO)
    log = tmp_path / "stderr.log"
    args = [*REACH[1:], "serve", str(config_dir), "--transport", "stdio", "--api-port", "0", "--no-reload"]
    params = StdioServerParameters(command=REACH[0], args=args, cwd=ROOT)
    with log.open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            answer = await client.call_tool("echo", {"text": "over stdio"})
            assert answer.structured_content == {"text": "over stdio"}
            ready = next(line for line in log.read_text().splitlines() if line.startswith("reach ready:"))
            fields = dict(pair.split("=", 1) for pair in ready.split()[2:])
            api = fields["api"]
            assert fields["mcp"] == "stdio"
            health = httpx.get(f"{api}/health", timeout=30).json()
            assert health["agents"] == 1


def test_without_a2a_the_ready_line_names_no_a2a_endpoint(serve: Serve, config_dir: Path) -> None:
    write(config_dir, "util:echo:01.yaml", ECHO)
    server = serve(config_dir, "--no-a2a")
    assert server.a2a_url is None
    assert httpx.get(f"{server.url}/.well-known/agent-card.json", timeout=30).status_code == 404


def test_a_port_in_use_is_one_line_and_nothing_starts(config_dir: Path, tmp_path: Path) -> None:
    marker = tmp_path / "started"
    # The server would leave a mark if it were ever started.
    write(
        config_dir,
        "mcp:probe:0.yaml",
        f"kind: mcp\nname: probe\ncommand: sh\nargs: [-c, 'touch {marker} && exec python {PROBE_SERVER}']\n",
    )
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        done = run_reach("serve", str(config_dir), "--port", str(port))
    assert done.returncode == 4
    assert done.stdout == ""
    lines = done.stderr.strip().splitlines()
    assert lines[-1].startswith(f"reach serve: error: --port {port}: cannot listen on 127.0.0.1:{port}: ")
    assert "pick another port" in lines[-1]
    assert not marker.exists()


def test_an_invalid_config_is_one_line_naming_file_line_and_field(config_dir: Path) -> None:
    path = write(config_dir, "util:echo:01.yaml", ECHO + "overrides:\n  echo:\n    retries: 3\n")
    done = run_reach("serve", str(config_dir), "--port", "0")
    assert done.returncode == 3
    assert done.stdout == ""
    allowed = ", ".join(name for name in Capability.model_fields if name != "name")
    assert done.stderr.strip().splitlines()[-1] == (
        f"reach serve: error: {path}:6: field 'overrides.echo.retries': unknown key; "
        f"the keys allowed here are: {allowed}"
    )


def test_a_server_that_fails_to_start_stops_the_others(config_dir: Path, tmp_path: Path) -> None:
    pid_file = tmp_path / "probe.pid"
    write(
        config_dir,
        "mcp:probe:0.yaml",
        "kind: mcp\nname: probe\ncommand: sh\n"
        f"args: [-c, 'echo $$ > {pid_file} && exec python {PROBE_SERVER}']\n",
    )
    path = write(
        config_dir,
        "mcp:dead:0.yaml",
        "kind: mcp\nname: dead\ncommand: python\nargs: [-c, 'raise SystemExit(3)']\n",
    )
    done = run_reach("serve", str(config_dir), "--port", "0")
    assert done.returncode == 3
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith(f"reach serve: error: {path}:3: field 'command': MCP server 'dead'")
    assert done.stdout == ""
    pid = int(pid_file.read_text())
    wait_until(lambda: not alive(pid), what="the started MCP server to be stopped")


def test_a_factory_that_fails_is_reported_against_its_file(config_dir: Path) -> None:
    path = write(
        config_dir,
        "util:rev:01.yaml",
        "kind: langchain\nagent_id: util:rev:01\nrunnable: tests.gateway.agents:broken_factory\n",
    )
    done = run_reach("serve", str(config_dir), "--port", "0")
    assert done.returncode == 3
    assert done.stderr.strip().splitlines()[-1] == (
        f"reach serve: error: {path}:3: field 'runnable': factory 'tests.gateway.agents:broken_factory' "
        "failed: RuntimeError: no model configured"
    )


def test_a_stop_signal_while_agents_are_built_closes_them_and_never_serves(
    config_dir: Path, tmp_path: Path
) -> None:
    pid_file = tmp_path / "slow.pid"
    write(
        config_dir,
        "mcp:slow:0.yaml",
        "kind: mcp\nname: slow\ncommand: sh\n"
        f"args: [-c, 'echo $$ > {pid_file} && sleep 1 && exec {PYTHON} {PROBE_SERVER}']\n",
    )
    process = subprocess.Popen(
        [*REACH, "serve", str(config_dir), "--port", "0"],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(pid_file.exists, what="the slow server to be started")
        process.send_signal(signal.SIGTERM)
        out, _ = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
    assert process.returncode == 0
    assert "reach ready" not in out
    pid = int(pid_file.read_text())
    wait_until(lambda: not alive(pid), what="the half-started MCP server to be stopped")
