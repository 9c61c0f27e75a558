"""Two `reach serve` processes, A passing tasks on to B over MCP (issue 14, item 4): A's MCP agent
authenticates to B with a bearer token from the environment, each hop carries a token signed by A,
and B applies the permissions of the principal that names A's agent."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.gateway.conftest import ECHO, SHOUT, ReachServer, write

pytestmark = pytest.mark.timeout(120)

Serve = Callable[..., ReachServer]

SECRETS = {
    "REACH_TEST_HOP_SECRET": "hop-secret-0123456789abcdef0123456789",
    "REACH_TEST_GATEWAY_A": "gateway-a-token-0123456789",
    "REACH_TEST_ALICE": "alice-token-0123456789",
    "REACH_TEST_OPS": "ops-token-0123456789",
}
GATEWAY_B = """\
principals:
  gateway-a: {token_env: REACH_TEST_GATEWAY_A, allow: ["*"], role: gateway}
  a-agents: {agent_ids: ["mcp:gateway_b:*"], allow: [echo]}
  ops: {token_env: REACH_TEST_OPS, allow: ["*"], role: admin}
hop_tokens: {secret_env: REACH_TEST_HOP_SECRET}
"""
GATEWAY_A = """\
principals:
  alice: {token_env: REACH_TEST_ALICE, allow: ["*"]}
hop_tokens: {secret_env: REACH_TEST_HOP_SECRET}
"""


def bearer(variable: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {SECRETS[variable]}"}


def test_a_gateway_passes_tasks_on_under_the_far_sides_rules(
    serve: Serve, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name, value in SECRETS.items():
        monkeypatch.setenv(name, value)
    b_dir, a_dir = tmp_path / "b", tmp_path / "a"
    b_dir.mkdir(mode=0o755)
    a_dir.mkdir(mode=0o755)
    write(b_dir, "util:echo:01.yaml", ECHO)
    write(b_dir, "util:shout:01.yaml", SHOUT)
    write(b_dir, "security.yaml", GATEWAY_B)
    b = serve(b_dir)
    write(a_dir, "security.yaml", GATEWAY_A)
    agent = (
        f"kind: mcp\nname: gateway_b\nurl: {b.mcp_url}\nbearer_token_env: REACH_TEST_GATEWAY_A\n"
        "hop_tokens: true\n"
    )
    write(a_dir, "mcp:gateway_b:0.yaml", agent)
    a = serve(a_dir)

    def route(capability: str) -> tuple[int, dict[str, object]]:
        body = {"capability": capability, "payload": {"text": "hi"}}
        response = a.api("POST", "/route", headers=bearer("REACH_TEST_ALICE"), json=body)
        return response.status_code, response.json()

    status, served = route("echo")
    assert (status, served["status"]) == (200, "ok"), served
    # On B the call is A's agent's, under the principal that names it, not the connection's.
    record = b.api("GET", f"/explain/{served['task_id']}", headers=bearer("REACH_TEST_OPS")).json()
    assert record["principal"] == "a-agents"
    # Gateway A lists shout (its connection may see all); the agent passing a call on may not
    # reach it: B refuses, and A answers 403 with B's reason.
    status, refused = route("shout")
    assert status == 403, refused
    assert refused["error_type"] == "PermissionDeniedError"
    assert "of principal 'a-agents' does not match 'shout'" in str(refused["error"])
    # B's refusal is the caller's doing: A's agent for B stays in service, however many there are
    # (two agent failures in a row would quarantine it).
    assert [route("shout")[0] for _ in range(3)] == [403, 403, 403]
    # The MCP SDK's HTTP client would log every request to B at INFO, its URL and all.
    assert "HTTP Request:" not in a.log.read_text()
    health = a.api("GET", "/health", headers=bearer("REACH_TEST_ALICE")).json()
    assert (health["status"], health["problems"]) == ("ok", {}), health
    for server in (a, b):
        assert all(secret not in server.log.read_text() for secret in SECRETS.values())
