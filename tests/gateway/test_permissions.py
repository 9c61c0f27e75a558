"""`reach serve` with a security.yaml, as a subprocess: what each principal may reach over HTTP and
MCP, its quota, and what it may see of others' tasks (issue 14, items 2, 3 and 5)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

from tests.gateway.conftest import ECHO, SHOUT, ReachServer, write

pytestmark = pytest.mark.timeout(120)

Serve = Callable[..., ReachServer]

TOKENS = {"alice": "alice-token-0123456789", "bob": "bob-token-0123456789", "ops": "ops-token-0123456789"}
SECURITY = """\
principals:
  alice: {token_env: REACH_TEST_ALICE, allow: [echo]}
  bob: {token_env: REACH_TEST_BOB, allow: ["*"], quota_per_minute: 4}
  ops: {token_env: REACH_TEST_OPS, allow: ["*"], role: admin}
"""


def bearer(principal: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {TOKENS[principal]}"}


@pytest.fixture
def secured(
    serve: Serve, config_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> tuple[ReachServer, Path]:
    for principal, token in TOKENS.items():
        monkeypatch.setenv(f"REACH_TEST_{principal.upper()}", token)
    write(config_dir, "util:echo:01.yaml", ECHO)
    write(config_dir, "util:shout:01.yaml", SHOUT)
    write(config_dir, "security.yaml", SECURITY)
    audit = tmp_path / "audit.jsonl"
    return serve(config_dir, "--audit-log", str(audit)), audit


def route(
    server: ReachServer, principal: str, capability: str, payload: object, **body: object
) -> httpx.Response:
    return server.api(
        "POST",
        "/route",
        headers=bearer(principal),
        json={"capability": capability, "payload": payload, **body},
    )


async def test_allowed_and_denied_capabilities_over_http_and_mcp(secured: tuple[ReachServer, Path]) -> None:
    server, _ = secured
    allowed = route(server, "alice", "echo", {"text": "hi"})
    assert (allowed.status_code, allowed.json()["status"]) == (200, "ok")
    denied = route(server, "alice", "shout", {"text": "hi"})
    assert denied.status_code == 403
    assert denied.json()["error_type"] == "PermissionDeniedError"
    assert "allow.capabilities ['echo'] of principal 'alice' does not match 'shout'" in denied.json()["error"]
    catalog = server.api("GET", "/catalog", headers=bearer("alice")).json()
    assert [agent["agent_id"] for agent in catalog] == ["util:echo:01"]
    assert len(server.api("GET", "/catalog", headers=bearer("ops")).json()) == 2
    # Who calls is the server's to say: a request cannot name another principal.
    forged = route(server, "alice", "shout", {"text": "hi"}, options={"principal": "ops"})
    assert forged.status_code == 400
    # Nor present another gateway's hop token: those come over MCP, from gateways.
    hopped = route(server, "alice", "shout", {"text": "hi"}, options={"caller_token": "x.y.z"})
    assert hopped.status_code == 400
    async with (
        httpx2.AsyncClient(headers=bearer("alice"), timeout=30) as http,
        Client(streamable_http_client(server.mcp_url, http_client=http)) as client,
    ):
        assert [tool.name for tool in (await client.list_tools()).tools] == ["echo"]
        served = await client.call_tool("echo", {"payload": {"text": "hi"}})
        assert not served.is_error
        refused = await client.call_tool("shout", {"text": "hi"})
        assert refused.is_error
        text = " ".join(getattr(block, "text", "") for block in refused.content)
        assert "PermissionDeniedError" in text
        assert "does not match 'shout'" in text


def test_over_the_quota_is_429_with_retry_after(secured: tuple[ReachServer, Path]) -> None:
    server, _ = secured
    for _ in range(4):
        assert route(server, "bob", "echo", {}).status_code == 200
    over = route(server, "bob", "echo", {})
    assert over.status_code == 429
    assert over.json()["error_type"] == "QuotaExceededError"
    assert 1 <= int(over.headers["retry-after"]) <= 60
    # One principal's quota is not another's.
    assert route(server, "alice", "echo", {}).status_code == 200


def test_principals_cannot_see_each_others_results_or_decisions(secured: tuple[ReachServer, Path]) -> None:
    server, audit = secured
    secret = {"card": "4111-1111"}
    first = route(server, "alice", "echo", secret, options={"task_id": "shared-1"})
    assert first.json()["payload"] == secret
    replay = route(server, "bob", "echo", secret, options={"task_id": "shared-1"})
    assert replay.status_code == 409
    assert replay.json()["error_type"] == "IdempotencyConflictError"
    assert "4111" not in replay.text
    assert server.api("GET", "/explain/shared-1", headers=bearer("bob")).status_code == 404
    assert server.api("GET", "/explain/shared-1", headers=bearer("alice")).json()["principal"] == "alice"
    assert server.api("GET", "/explain/shared-1", headers=bearer("ops")).status_code == 200
    route(server, "bob", "shout", {"text": "x"})
    mine = server.api("GET", "/decisions", headers=bearer("bob")).json()
    assert mine
    assert {record["principal"] for record in mine} == {"bob"}
    everyone = server.api("GET", "/decisions", headers=bearer("ops")).json()
    assert {record["principal"] for record in everyone} == {"alice", "bob"}
    # Records keep no payloads unless the policy says record_payloads: true.
    assert "4111" not in server.api("GET", "/explain/shared-1", headers=bearer("alice")).text
    server.stop()
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    assert {(line["principal"], line["task_id"]) for line in lines} >= {("alice", "shared-1")}
    assert "4111" not in audit.read_text()
