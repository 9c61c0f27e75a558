"""Malformed consensus and feedback requests over HTTP, MCP and the CLI: refused strictly, and
told what to send instead; the CLI's votes table and exit codes say what happened."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from mcp import Client
from mcp.types import TextContent
from starlette.applications import Starlette

from reach_adapters import Router
from reach_adapters.cli.consensus import render_votes
from reach_adapters.gateway import Gateway
from reach_adapters.gateway.api import GatewayAPI
from reach_adapters.mcp import RouterMCPServer
from tests.consensus.test_served import voters
from tests.consensus.voters import lambda_voter
from tests.gateway.conftest import run_reach

pytestmark = pytest.mark.timeout(60)

FRANCE = {"country": "France"}


@pytest.fixture
async def api(config_dir: Path) -> AsyncIterator[httpx.AsyncClient]:
    async with await Gateway.start(voters(config_dir)) as gateway:
        app = Starlette(routes=GatewayAPI(gateway).routes())
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client:
            yield client


@pytest.mark.parametrize("field", ["n", "quorum"])
async def test_a_count_given_as_true_is_refused_over_http(api: httpx.AsyncClient, field: str) -> None:
    # Read as 1, either would be a valid consensus: only strictness refuses it.
    body: dict[str, Any] = {"capability": "capital", "payload": FRANCE, "n": 3, "quorum": 1, field: True}

    answer = await api.post("/api/consensus", json=body)

    assert answer.status_code == 400, answer.text
    assert f"field '{field}': Input should be a valid integer" in answer.json()["error"]


async def test_a_malformed_feedback_body_is_shown_a_feedback_example(api: httpx.AsyncClient) -> None:
    answer = await api.post("/api/feedback", json={"task": "x", "score": 1})

    assert answer.status_code == 400
    error = answer.json()["error"]
    assert '"task_id"' in error
    assert '"score"' in error
    assert "agent_id" not in error


@pytest.fixture
async def router() -> AsyncIterator[Router]:
    async with Router() as router:
        router.register(lambda_voter("geo:a:01"))
        router.register(lambda_voter("geo:b:01"))
        yield router


@pytest.mark.parametrize(
    ("arguments", "said"),
    [
        ({"n": "3"}, "field 'n'"),
        ({"n": True}, "field 'n'"),
        ({"quorum": True}, "field 'quorum'"),
        ({"country": "France"}, "'country' was unexpected"),
    ],
)
async def test_the_mcp_tool_refuses_arguments_its_schema_refuses(
    router: Router, arguments: dict[str, Any], said: str
) -> None:
    served = RouterMCPServer(router, consensus_tool=True)
    try:
        async with Client(served.server) as client:
            answer = await client.call_tool(
                "reach_consensus", {"capability": "capital", "payload": FRANCE, "n": 2, **arguments}
            )
    finally:
        served.close()

    text = "".join(block.text for block in answer.content if isinstance(block, TextContent))
    assert answer.is_error
    assert "InvalidMessageError" in text
    assert said in text


def test_the_votes_table_shows_failed_voters_and_no_side_without_a_decision() -> None:
    votes: list[dict[str, Any]] = [
        {"agent_id": "geo:a:01", "status": "ok", "payload": "Paris", "agreed": False},
        {"agent_id": "geo:b:01", "status": "error", "payload": None, "agreed": False, "error": "boom"},
    ]

    undecided = render_votes(votes, decided=False).splitlines()

    assert "dissented" not in "\n".join(undecided)
    assert undecided[2].split()[:3] == ["geo:b:01", "error", "failed"]
    assert undecided[1].split()[:3] == ["geo:a:01", "ok", "-"]
    decided = render_votes(votes, decided=True).splitlines()
    assert decided[1].split()[2] == "dissented"
    assert decided[2].split()[2] == "failed"


def test_quorum_above_n_is_a_usage_error_with_url_and_with_config(config_dir: Path) -> None:
    payload = json.dumps(FRANCE)
    # Checked before any request: no server needs to answer at this URL.
    remote = run_reach(
        "consensus", "capital", payload, "--n", "2", "--quorum", "3", "--url", "http://127.0.0.1:9"
    )
    local = run_reach(
        "consensus", "capital", payload, "--n", "2", "--quorum", "3", "--config", str(config_dir)
    )

    assert (remote.returncode, local.returncode) == (2, 2), (remote.stderr, local.stderr)
    assert "--quorum 3 is above --n 2" in remote.stderr


def test_a_count_over_the_voters_limit_is_a_usage_error_naming_the_flag() -> None:
    # ConsensusHint's own bound, checked before any request: no server needs to answer here.
    done = run_reach("consensus", "capital", "--n", "17", "--quorum", "2", "--url", "http://127.0.0.1:9")

    assert done.returncode == 2, done.stderr
    assert "--n 17: Input should be less than or equal to 16" in done.stderr
