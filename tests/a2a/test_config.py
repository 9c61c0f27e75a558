"""``kind: a2a`` agent files: validated, built like any agent, served by ``reach serve``, and
written by ``reach scan --a2a``."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
import yaml

from reach_adapters.a2a import A2AAgent
from reach_adapters.config import A2AAgentFile, ConfigError, load_config
from reach_adapters.gateway.build import build_agents, close_agents
from tests.a2a.agents import Served
from tests.a2a.conftest import AgentProcess
from tests.gateway.conftest import ReachServer, run_reach
from tests.waiting import wait_until


def _write(directory: Path, text: str, name: str = "a2a:helper:0.yaml") -> Path:
    path = directory / name
    path.write_text(text, encoding="utf-8")
    return path


def test_the_file_is_checked(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = A2AAgentFile.model_validate(
        {"kind": "a2a", "name": "helper", "url": "http://127.0.0.1:1", "timeout_ms": 5000}
    )
    assert model.agent_id == "a2a:helper:0"
    assert model.options().timeout_ms == 5000
    _write(tmp_path, "kind: a2a\nname: helper\nurl: ftp://nope\n")
    with pytest.raises(ConfigError, match="must start with http:// or https://"):
        load_config(tmp_path)
    _write(tmp_path, "kind: a2a\nname: helper\nurl: http://127.0.0.1:1\nbearer_token_env: REACH_TEST_A2A\n")
    monkeypatch.delenv("REACH_TEST_A2A", raising=False)
    with pytest.raises(ConfigError, match="REACH_TEST_A2A is not set"):
        load_config(tmp_path)
    monkeypatch.setenv("REACH_TEST_A2A", "s3cret")
    spec = load_config(tmp_path).agents["a2a:helper:0"]
    assert isinstance(spec.model, A2AAgentFile)
    assert spec.model.http_headers({"REACH_TEST_A2A": "s3cret"}) == {"Authorization": "Bearer s3cret"}


async def test_built_with_overrides_by_skill_id(tmp_path: Path, served: Served) -> None:
    _write(
        tmp_path, f"kind: a2a\nname: helper\nurl: {served.url}\noverrides:\n  echo: {{idempotent: true}}\n"
    )
    config = load_config(tmp_path)
    agents = await build_agents(config.agents.values(), tmp_path)
    try:
        (agent,) = agents
        assert isinstance(agent, A2AAgent)
        assert agent.agent_id == "a2a:helper:0"
        assert next(cap for cap in agent.capabilities if cap.name == "echo").idempotent
    finally:
        await close_agents(agents)


async def test_an_override_for_no_skill_names_the_field(tmp_path: Path, served: Served) -> None:
    _write(tmp_path, f"kind: a2a\nname: helper\nurl: {served.url}\noverrides:\n  nope: {{weight: 1}}\n")
    config = load_config(tmp_path)
    with pytest.raises(ConfigError, match=r"overrides.*name no skill \['nope'\]"):
        await build_agents(config.agents.values(), tmp_path)


def test_reach_serve_routes_to_an_a2a_agent(agent_process: AgentProcess, tmp_path: Path) -> None:
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    _write(config_dir, f"kind: a2a\nname: helper\nurl: {agent_process.url}\n")
    server = ReachServer(config_dir, tmp_path / "reach.log")
    try:
        routed = server.api(
            "POST", "/route", json={"capability": "sum", "payload": {"a": 20, "b": 22}}
        ).json()
        assert routed["status"] == "ok", routed
        assert routed["payload"] == {"sum": 42}
        assert routed["agent_id"] == "a2a:helper:0"
    finally:
        server.stop()
    # Third-party INFO lines would name every URL fetched and dump the agent's card.
    logged = server.log.read_text()
    assert "HTTP Request:" not in logged
    assert "a2a.client.card_resolver" not in logged


def test_scan_prints_an_agent_file_from_a_card(agent_process: AgentProcess, tmp_path: Path) -> None:
    done = run_reach("scan", "--a2a", agent_process.url, "--name", "helper")
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("# a2a:helper:0.yaml: written by `reach scan`")
    data = yaml.safe_load(done.stdout)
    assert (data["kind"], data["url"]) == ("a2a", agent_process.url)
    assert data["overrides"]["echo"]["keywords"] == ["echo", "repeat"]
    (tmp_path / "a2a:helper:0.yaml").write_text(done.stdout)
    spec = load_config(tmp_path).agents["a2a:helper:0"]
    assert isinstance(spec.model, A2AAgentFile)
    assert {"echo", "sum", "ask"} <= set(spec.model.overrides)


def test_scan_of_a_url_without_a_card(tmp_path: Path) -> None:
    done = run_reach("scan", "--a2a", "http://127.0.0.1:9", "--timeout", "5")
    assert done.returncode != 0
    assert "cannot reach the A2A agent at http://127.0.0.1:9" in done.stderr


def test_reach_serve_starts_with_a_dead_a2a_agent_and_takes_it_in_when_it_comes_up(tmp_path: Path) -> None:
    config_dir = tmp_path / "config"
    config_dir.mkdir()
    free = socket.create_server(("127.0.0.1", 0))
    port = free.getsockname()[1]
    free.close()
    url = f"http://127.0.0.1:{port}"
    fast = "reprobe: {initial_delay_s: 0.05, max_delay_s: 0.2, jitter_s: 0}\n"
    _write(config_dir, f"kind: a2a\nname: helper\nurl: {url}\n{fast}overrides:\n  sum: {{weight: 7}}\n")
    server = ReachServer(config_dir, tmp_path / "reach.log")
    try:
        (entry,) = server.api("GET", "/catalog").json()
        assert (entry["agent_id"], entry["state"]) == ("a2a:helper:0", "offline")
        assert [cap["name"] for cap in entry["capabilities"]] == ["sum"]
        assert f"A2A agent a2a:helper:0 at {url} cannot be reached" in server.log.read_text()
        process = AgentProcess("--port", str(port))
        try:

            def served() -> bool:
                (agent,) = server.api("GET", "/catalog").json()
                return agent["state"] == "online" and len(agent["capabilities"]) > 1

            wait_until(served, what="the agent's card to be taken in")
            routed = server.api("POST", "/route", json={"capability": "echo", "payload": "back"}).json()
            assert (routed["status"], routed["payload"]) == ("ok", "back"), routed
        finally:
            process.stop()
    finally:
        server.stop()


def test_scan_writes_no_credentials(agent_process: AgentProcess) -> None:
    done = run_reach(
        "scan",
        "--a2a",
        agent_process.url,
        "--name",
        "helper",
        "--header",
        "Authorization=Bearer s3cret-token",
        "--header",
        "X-Api-Key=s3cret-key",
        "--header",
        "X-Team=blue",
    )
    assert done.returncode == 0, done.stderr
    assert "s3cret" not in done.stdout
    data = yaml.safe_load(done.stdout)
    assert data["bearer_token_env"] == "HELPER_TOKEN"
    assert data["headers"] == {"X-Api-Key": "***", "X-Team": "blue"}
    assert "$HELPER_TOKEN" in done.stderr
    assert "X-Api-Key are masked" in done.stderr


def test_two_authorizations_are_refused_at_the_field(tmp_path: Path) -> None:
    _write(
        tmp_path,
        "kind: a2a\nname: helper\nurl: http://127.0.0.1:1\n"
        "headers: {Authorization: x}\nbearer_token_env: T\n",
    )
    with pytest.raises(ConfigError) as refused:
        load_config(tmp_path)
    assert "field 'bearer_token_env': " in str(refused.value)
    assert "not both" in str(refused.value)
