"""`reach serve` with a security.yaml, as a subprocess: who gets in on /api, /mcp and /metrics,
what a refusal says, the OAuth metadata, reloads, and binding beyond loopback."""

from __future__ import annotations

import hashlib
import os
import socket
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.server.auth.middleware.auth_context import get_access_token
from starlette.responses import PlainTextResponse
from starlette.types import Receive, Scope, Send

from reach_adapters.gateway import Authentication, Gateway
from tests.gateway.conftest import ECHO, REACH, ROOT, ReachServer, run_reach, write
from tests.security.keys import AUDIENCE, ISSUER, jwks, jwks_server, rsa_key, sign
from tests.waiting import wait_until

Serve = Callable[..., ReachServer]

ALICE = "alice-token-0123456789"
OPS = "ops-token-9876543210"
OPS_SHA = hashlib.sha256(OPS.encode()).hexdigest()
KEY = rsa_key()


def security_yaml(jwks_url: str, *, ops_sha: str = OPS_SHA, extra: str = "") -> str:
    return (
        "principals:\n"
        "  alice: {token_env: REACH_TEST_ALICE, allow: ['*']}\n"
        f"  ops: {{token_sha256: {ops_sha}, allow: ['*'], role: admin}}\n"
        f"jwt: {{issuer: '{ISSUER}', audience: '{AUDIENCE}', jwks_url: '{jwks_url}'}}\n"
        "open: [metrics]\n" + extra
    )


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


@pytest.fixture
def jwks_url() -> Iterator[str]:
    with jwks_server(jwks(KEY)) as url:
        yield url


@pytest.fixture
def secured(serve: Serve, config_dir: Path, jwks_url: str, monkeypatch: pytest.MonkeyPatch) -> ReachServer:
    monkeypatch.setenv("REACH_TEST_ALICE", ALICE)
    write(config_dir, "util:echo:01.yaml", ECHO)
    write(config_dir, "security.yaml", security_yaml(jwks_url))
    return serve(config_dir)


def challenge(response: httpx.Response) -> str:
    assert response.status_code == 401, response.text
    assert response.json()["error_type"] == "AuthenticationError"
    return response.headers["www-authenticate"]


def test_requests_without_good_credentials_are_refused_with_a_challenge(secured: ReachServer) -> None:
    missing = secured.api("GET", "/catalog")
    metadata = f'resource_metadata="{secured.url}/.well-known/oauth-protected-resource/mcp"'
    assert challenge(missing) == f'Bearer realm="agent-reach", {metadata}'
    assert "send 'Authorization: Bearer <token>'" in missing.json()["error"]
    refused = [
        "wrong-token",
        sign(KEY, ttl_s=-60),
        sign(KEY, aud="https://elsewhere.test/mcp"),
        sign(KEY, iss="https://evil.test"),
        sign(rsa_key()),
    ]
    for token in refused:
        header = challenge(secured.api("GET", "/catalog", headers=bearer(token)))
        assert header == f'Bearer realm="agent-reach", error="invalid_token", {metadata}'
    assert 'error="invalid_request"' in challenge(
        secured.api("GET", "/catalog", headers={"Authorization": "Basic x"})
    )
    challenge(secured.api("GET", "/health"))
    assert ALICE not in secured.log.read_text()


def test_a_refusal_comes_before_the_body_is_read(secured: ReachServer) -> None:
    # A declared body far past the size limit, never sent: 401, not 413 and not a wait for it.
    host, port = httpx.URL(secured.url).host, httpx.URL(secured.url).port
    assert port is not None
    with socket.create_connection((host, port), timeout=30) as conn:
        conn.sendall(
            f"POST /api/route HTTP/1.1\r\nHost: {host}:{port}\r\nContent-Type: application/json\r\n"
            "Content-Length: 50000000\r\n\r\n".encode()
        )
        head = conn.recv(65536).decode()
    assert head.startswith("HTTP/1.1 401 "), head


def test_static_tokens_and_jwts_get_in(secured: ReachServer) -> None:
    for token in (ALICE, OPS, sign(KEY)):
        response = secured.api("GET", "/catalog", headers=bearer(token))
        assert response.status_code == 200, response.text
        assert [agent["agent_id"] for agent in response.json()] == ["util:echo:01"]
    # A JWT subject security.yaml does not declare gets in, and may reach nothing.
    stranger = secured.api("GET", "/catalog", headers=bearer(sign(KEY, sub="someone-else", scope="read")))
    assert (stranger.status_code, stranger.json()) == (200, [])
    routed = secured.api(
        "POST", "/route", headers=bearer(ALICE), json={"capability": "echo", "payload": {"text": "hi"}}
    )
    assert routed.json()["status"] == "ok"


def test_an_open_surface_answers_without_credentials_but_not_with_bad_ones(secured: ReachServer) -> None:
    assert httpx.get(f"{secured.url}/metrics", timeout=30).status_code == 200
    challenge(httpx.get(f"{secured.url}/metrics", headers=bearer("wrong"), timeout=30))
    assert httpx.get(f"{secured.url}/metrics", headers=bearer(ALICE), timeout=30).status_code == 200


def test_the_protected_resource_metadata_names_the_issuer(secured: ReachServer) -> None:
    for path in ("/.well-known/oauth-protected-resource/mcp", "/.well-known/oauth-protected-resource"):
        response = httpx.get(secured.url + path, timeout=30)
        assert response.status_code == 200, response.text
        document = response.json()
        assert document["resource"] == secured.mcp_url
        assert document["authorization_servers"] == [ISSUER + "/"]
        assert document["bearer_methods_supported"] == ["header"]


async def test_mcp_clients_need_a_token(secured: ReachServer) -> None:
    async with (
        httpx2.AsyncClient(headers=bearer(sign(KEY)), timeout=30) as http,
        Client(streamable_http_client(secured.mcp_url, http_client=http)) as client,
    ):
        assert [tool.name for tool in (await client.list_tools()).tools] == ["echo"]
    async with httpx.AsyncClient(timeout=30) as anonymous:
        initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}}
        headers = {"Accept": "application/json, text/event-stream"}
        response = await anonymous.post(secured.mcp_url, json=initialize, headers=headers)
    challenge(response)


def test_a_reload_rotates_tokens_and_an_invalid_security_yaml_is_refused(
    secured: ReachServer, config_dir: Path, jwks_url: str
) -> None:
    new_ops = "ops-token-rotated-000"
    rotated = hashlib.sha256(new_ops.encode()).hexdigest()
    write(config_dir, "security.yaml", security_yaml(jwks_url, ops_sha=rotated))
    wait_until(
        lambda: secured.api("GET", "/catalog", headers=bearer(OPS)).status_code == 401,
        what="the old token to be refused",
    )
    assert secured.api("GET", "/catalog", headers=bearer(new_ops)).status_code == 200

    write(config_dir, "security.yaml", security_yaml(jwks_url, ops_sha=rotated, extra="opne: [api]\n"))

    def health() -> dict[str, Any]:
        body: dict[str, Any] = secured.api("GET", "/health", headers=bearer(new_ops)).json()
        return body

    wait_until(lambda: health()["reloads_rejected"] == 1, what="the invalid change to be refused")
    assert "security.yaml:6: field 'opne': unknown key" in health()["last_error"]
    assert secured.api("GET", "/catalog", headers=bearer(new_ops)).status_code == 200
    assert secured.api("GET", "/catalog", headers=bearer(OPS)).status_code == 401

    (config_dir / "security.yaml").unlink()
    wait_until(lambda: secured.api("GET", "/catalog").status_code == 200, what="security.yaml's removal")
    metadata = httpx.get(f"{secured.url}/.well-known/oauth-protected-resource/mcp", timeout=30)
    assert metadata.status_code == 404


def test_reach_check_validates_security_yaml(config_dir: Path, jwks_url: str) -> None:
    write(config_dir, "security.yaml", security_yaml(jwks_url, ops_sha=OPS_SHA))
    done = run_reach("check", str(config_dir))
    assert done.returncode == 3
    assert "security.yaml:2: field 'principals.alice.token_env'" in done.stderr
    done = subprocess.run(
        [*REACH, "check", str(config_dir)],
        cwd=ROOT,
        env={**os.environ, "REACH_TEST_ALICE": ALICE},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert f"security: 2 principal(s), JWTs from {ISSUER}, open: metrics" in done.stdout
    assert ALICE not in done.stdout
    assert OPS_SHA not in done.stdout

    write(config_dir, "security.yaml", "principals:\n  alice: {token_env: REACH_TEST_UNSET_TOKEN}\n")
    done = run_reach("check", str(config_dir))
    assert done.returncode == 3
    assert "security.yaml:2: field 'principals.alice.token_env': environment variable" in done.stderr
    assert "REACH_TEST_UNSET_TOKEN is not set" in done.stderr


# -- beyond loopback ------------------------------------------------------------------------


def test_a_non_loopback_bind_without_security_yaml_is_refused(config_dir: Path) -> None:
    write(config_dir, "util:echo:01.yaml", ECHO)
    done = run_reach("serve", str(config_dir), "--host", "0.0.0.0", "--port", "0")
    assert done.returncode == 3
    [line] = done.stderr.strip().splitlines()[-1:]
    assert "beyond loopback and the config directory has no security.yaml" in line
    assert "add a security.yaml" in line
    assert "--insecure" in line
    assert "ready" not in done.stdout


def test_insecure_allows_a_non_loopback_bind(serve: Serve, config_dir: Path) -> None:
    write(config_dir, "util:echo:01.yaml", ECHO)
    server = serve(config_dir, "--host", "0.0.0.0", "--insecure")
    assert server.url.startswith("http://0.0.0.0:")
    assert server.api("GET", "/catalog").status_code == 200


def test_security_yaml_cannot_be_removed_while_serving_beyond_loopback(
    serve: Serve, config_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REACH_TEST_ALICE", ALICE)
    write(config_dir, "util:echo:01.yaml", ECHO)
    write(config_dir, "security.yaml", "principals:\n  alice: {token_env: REACH_TEST_ALICE}\n")
    server = serve(config_dir, "--host", "0.0.0.0")
    (config_dir / "security.yaml").unlink()

    def rejected() -> bool:
        return bool(server.api("GET", "/health", headers=bearer(ALICE)).json()["reloads_rejected"])

    wait_until(rejected, what="the removal to be refused")
    error = server.api("GET", "/health", headers=bearer(ALICE)).json()["last_error"]
    assert "security.yaml was removed, but the server listens on 0.0.0.0:" in error
    assert server.api("GET", "/catalog").status_code == 401


# -- the middleware, in process -------------------------------------------------------------


async def test_the_middleware_hands_the_principal_to_the_app(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REACH_TEST_ALICE", ALICE)
    (tmp_path / "security.yaml").write_text(
        "principals:\n  alice: {token_env: REACH_TEST_ALICE}\nopen: [health]\n"
    )
    seen: list[tuple[str, str | None]] = []

    async def app(scope: Scope, receive: Receive, send: Send) -> None:
        access = get_access_token()
        seen.append((scope["user"].access_token.client_id, None if access is None else access.client_id))
        await PlainTextResponse("ok")(scope, receive, send)

    async with await Gateway.start(tmp_path) as gateway:
        transport = httpx.ASGITransport(app=Authentication(app, gateway))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            assert (
                await client.get("/api/catalog", headers={"Authorization": f"Bearer {ALICE}"})
            ).text == "ok"
            assert (await client.get("/api/health")).text == "ok"
            assert (await client.get("/mcp")).status_code == 401
    assert seen == [("alice", "alice"), ("anonymous", "anonymous")]
    assert get_access_token() is None
