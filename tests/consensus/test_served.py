"""Consensus and feedback against a real `reach serve`: over HTTP and through the CLI."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from mcp import Client

from tests.gateway.conftest import ReachServer, run_reach, write

pytestmark = pytest.mark.timeout(120)

CAPITAL = "capabilities:\n  - name: capital\n    input_schema: {type: object, required: [country]}\n"
FRANCE = {"country": "France"}


def voters(config_dir: Path) -> Path:
    """Three voters of three types (two functions, one LangChain runnable); one answers wrong."""
    write(
        config_dir,
        "geo:paris:01.yaml",
        "kind: function\nagent_id: geo:paris:01\nfunction: tests.consensus.agents:paris\n" + CAPITAL,
    )
    write(
        config_dir,
        "geo:chain:01.yaml",
        "kind: langchain\nagent_id: geo:chain:01\nrunnable: tests.consensus.agents:capital\n" + CAPITAL,
    )
    write(
        config_dir,
        "geo:lyon:01.yaml",
        "kind: function\nagent_id: geo:lyon:01\nfunction: tests.consensus.agents:lyon\n" + CAPITAL,
    )
    return config_dir


def rating(server: ReachServer, agent_id: str) -> float:
    catalog = server.api("GET", "/catalog").json()
    entry = next(info for info in catalog if info["agent_id"] == agent_id)
    value: float = entry["ratings"]["capital"]
    return value


def test_consensus_and_feedback_over_http(serve: Callable[..., ReachServer], config_dir: Path) -> None:
    server = serve(voters(config_dir))

    answered = server.api(
        "POST", "/consensus", json={"capability": "capital", "payload": FRANCE, "n": 3, "quorum": 2}
    )

    assert answered.status_code == 200, answered.text
    result = answered.json()
    assert result["status"] == "ok"
    assert result["payload"] == "Paris"
    votes = {vote["agent_id"]: vote for vote in result["extra"]["votes"]}
    assert votes["geo:lyon:01"]["agreed"] is False
    assert votes["geo:lyon:01"]["payload"] == "Lyon"
    assert votes["geo:chain:01"]["agreed"] is True
    record = server.api("GET", f"/explain/{result['task_id']}").json()
    assert {vote["agent_id"] for vote in record["votes"]} == set(votes)
    # The dissenter was rated down; feedback rates the agreeing voters.
    assert rating(server, "geo:lyon:01") < 1.0
    assert rating(server, "geo:paris:01") == 1.0
    rated = server.api(
        "POST", "/feedback", json={"task_id": result["task_id"], "score": 0.0, "reason": "wrong"}
    )
    assert rated.status_code == 200, rated.text
    assert sorted(change["agent_id"] for change in rated.json()["rated"]) == ["geo:chain:01", "geo:paris:01"]
    assert rating(server, "geo:paris:01") < 1.0

    again = server.api("POST", "/feedback", json={"task_id": result["task_id"], "score": 1.0})
    assert (again.status_code, again.json()["error_type"]) == (409, "TaskAlreadyRatedError")
    unknown = server.api("POST", "/feedback", json={"task_id": "nope", "score": 1.0})
    assert (unknown.status_code, unknown.json()["error_type"]) == (404, "UnknownTaskError")
    bad = server.api("POST", "/feedback", json={"task_id": result["task_id"], "score": "great"})
    assert (bad.status_code, bad.json()["error_type"]) == (400, "InvalidFeedbackError")
    assert "from 0 (bad) to 1 (good)" in bad.json()["error"]

    split = server.api(
        "POST", "/consensus", json={"capability": "capital", "payload": FRANCE, "n": 3, "quorum": 3}
    )
    assert split.status_code == 200
    assert split.json()["status"] == "no_consensus"
    assert len(split.json()["extra"]["votes"]) == 3
    wrong = server.api(
        "POST", "/consensus", json={"capability": "capital", "payload": FRANCE, "n": 2, "quorum": 3}
    )
    assert wrong.status_code == 400
    assert "quorum 3 is above n 2" in wrong.json()["error"]
    custom = server.api(
        "POST", "/consensus", json={"capability": "capital", "payload": FRANCE, "vote": "custom"}
    )
    assert custom.status_code == 400


def test_reach_consensus_and_feedback_on_the_command_line(
    serve: Callable[..., ReachServer], config_dir: Path
) -> None:
    server = serve(voters(config_dir))

    done = run_reach("consensus", "capital", json.dumps(FRANCE), "--url", server.url, "--json")

    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    assert result["payload"] == "Paris"
    text = run_reach(
        "consensus", "capital", json.dumps(FRANCE), "--url", server.url, "--quorum", "3", "--explain"
    )
    assert text.returncode == 1
    assert "no_consensus" in text.stdout
    assert "dissented" not in text.stdout  # nothing was decided: no answer dissented from it
    assert "vote      geo:lyon:01: ok, -" in text.stdout

    rated = run_reach("feedback", result["task_id"], "0", "--reason", "not what I asked", "--url", server.url)
    assert rated.returncode == 0, rated.stderr
    assert "rating 1.000 -> 0.800" in rated.stdout
    catalog = run_reach("catalog", "--url", server.url)
    assert "capital (rated 0.80)" in catalog.stdout
    refused = run_reach("feedback", result["task_id"], "1.5", "--url", server.url)
    assert refused.returncode != 0
    assert "from 0 (bad) to 1 (good)" in refused.stderr


def test_reach_consensus_from_a_config_directory(config_dir: Path) -> None:
    done = run_reach(
        "consensus", "capital", json.dumps(FRANCE), "--config", str(voters(config_dir)), "--n", "3"
    )

    assert done.returncode == 0, done.stderr
    assert "payload: Paris" in done.stdout
    assert "geo:lyon:01" in done.stdout
    judge = run_reach("consensus", "capital", "--config", str(config_dir), "--vote", "judge")
    assert judge.returncode != 0
    assert "--judge CAPABILITY goes with --vote judge" in judge.stderr


async def test_reach_serve_offers_the_consensus_tool_only_when_asked(
    serve: Callable[..., ReachServer], config_dir: Path
) -> None:
    plain = serve(voters(config_dir))
    asked = serve(config_dir, "--consensus-tool")
    async with Client(plain.mcp_url) as client:
        assert "reach_consensus" not in {tool.name for tool in (await client.list_tools()).tools}
    async with Client(asked.mcp_url) as client:
        assert "reach_consensus" in {tool.name for tool in (await client.list_tools()).tools}
        answer = await client.call_tool("reach_consensus", {"capability": "capital", "payload": FRANCE})
    assert not answer.is_error, answer.content
    assert answer.structured_content is not None
    assert answer.structured_content["decision"] == "Paris"
