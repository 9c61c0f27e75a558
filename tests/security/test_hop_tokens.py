"""Agent-to-agent tokens between gateways (issue 14, item 4): gateway A's agent passes a task on to
gateway B over real MCP (streamable HTTP); B verifies the signed token and applies the permissions
of the principal naming A's agent, and refuses unknown callers, forged and expired tokens."""

from __future__ import annotations

import secrets
import time
from collections.abc import AsyncIterator
from typing import Any, cast

import jwt
import pytest
from mcp import Client
from mcp.types import RequestParamsMeta

from middleware import ResultStatus
from reach_adapters import Router
from reach_adapters.mcp import MCPEndpoint, MCPOptions, MCPServerAgent, start_mcp_server
from reach_adapters.security.guard import SecurityGuard
from reach_adapters.security.hoptokens import HOP_ISSUER
from reach_adapters.security.spec import SecuritySpec
from tests.core.conftest import FAST, agent_info, echo_agent

pytestmark = pytest.mark.timeout(30)

SECRET = "0123456789abcdef0123456789abcdef-shared"
ENV = {"HOP_SECRET": SECRET}
HOPS = {"secret_env": "HOP_SECRET", "ttl_s": 30}
TOKEN_KEY = "agent-reach/caller_token"
TASK_KEY = "agent-reach/task_id"
SIGNED = MCPOptions(hop_tokens=True)


def guard(principals: dict[str, Any], environ: dict[str, str] = ENV) -> SecurityGuard:
    spec = SecuritySpec.model_validate({"principals": principals, "hop_tokens": HOPS})
    return SecurityGuard(spec, environ=environ)


@pytest.fixture
async def gateway_b() -> AsyncIterator[tuple[Router, MCPEndpoint]]:
    router = Router(
        FAST,
        guard=guard({"gateway_a": {"agent_ids": ["mcp:gw_b:*"], "allow": ["pub_*"]}}),
    )
    router.register(echo_agent("public:echo:01", "pub_echo"))
    router.register(echo_agent("internal:vault:01", "secret_read"))
    async with await start_mcp_server(router) as endpoint:
        yield router, endpoint
    await router.aclose()


async def test_a_hop_carries_a_token_the_far_gateway_verifies(
    gateway_b: tuple[Router, MCPEndpoint],
) -> None:
    router_b, endpoint = gateway_b
    router_a = Router(FAST, guard=guard({"alice": {"allow": ["*"]}}))
    router_a.register(await MCPServerAgent.connect("gw_b", endpoint.url, options=SIGNED))
    try:
        allowed = await router_a.route("pub_echo", {"x": 1}, principal="alice")
        assert allowed.status is ResultStatus.OK, allowed.error
        # On B the call is the calling agent's: its principal, named by agent id.
        assert router_b.explain(allowed.task_id).principal == "gateway_a"
        # Gateway A's own caller may reach secret_read; the agent passing it on may not.
        beyond = await router_a.route("secret_read", {}, principal="alice")
        assert beyond.status is ResultStatus.REJECTED
        assert "allow.capabilities ['pub_*'] of principal 'gateway_a'" in (beyond.error or "")
        assert agent_info(router_b, "internal:vault:01").calls == 0
        # The refusal is the caller's doing: A's agent stays healthy.
        assert agent_info(router_a, "mcp:gw_b:0").failures == 0
    finally:
        await router_a.aclose()


async def test_an_unregistered_caller_is_refused(gateway_b: tuple[Router, MCPEndpoint]) -> None:
    _, endpoint = gateway_b
    router_a = Router(FAST, guard=guard({"alice": {"allow": ["*"]}}))
    router_a.register(await MCPServerAgent.connect("stranger", endpoint.url, options=SIGNED))
    try:
        refused = await router_a.route("pub_echo", {}, principal="alice")
        assert refused.status is ResultStatus.REJECTED
        assert "agent 'mcp:stranger:0' may not reach onward" in (refused.error or "")
    finally:
        await router_a.aclose()


def hop_meta(hop_token: str, task_id: str = "task-1") -> RequestParamsMeta:
    return cast(RequestParamsMeta, {TOKEN_KEY: hop_token, TASK_KEY: task_id})


def token(secret: str = SECRET, **claims: Any) -> str:
    now = time.time()
    base = {
        "iss": HOP_ISSUER,
        "sub": "mcp:gw_b:0",
        "aud": "pub_echo",
        "task_id": "task-1",
        "jti": secrets.token_urlsafe(12),
        "iat": int(now),
        "exp": now + 30,
    }
    # A claim given as None is left out.
    payload = {name: value for name, value in {**base, **claims}.items() if value is not None}
    return jwt.encode(payload, secret, algorithm="HS256")


@pytest.mark.parametrize(
    ("forged", "problem"),
    [
        ({"secret": "another-secret-another-secret-xx"}, "do the gateways share hop_tokens.secret_env"),
        ({"exp": -5}, "the hop token has expired"),
        ({"aud": "secret_read"}, "signed for another target, not 'pub_echo'"),
        ({"task_id": "task-0"}, "signed for another task"),
        ({"jti": None}, 'Token is missing the "jti" claim'),
        ({"sub": "mcp:other:01"}, "agent 'mcp:other:01' may not reach onward"),
    ],
)
async def test_forged_expired_and_misdirected_tokens_are_refused(
    gateway_b: tuple[Router, MCPEndpoint], forged: dict[str, Any], problem: str
) -> None:
    _, endpoint = gateway_b
    claims = dict(forged)
    secret = claims.pop("secret", SECRET)
    if "exp" in claims:
        claims["exp"] += time.time()
    bad = token(secret, **claims)
    async with Client(endpoint.url) as client:
        good = await client.call_tool("pub_echo", {}, meta=hop_meta(token()))
        assert not good.is_error
        refused = await client.call_tool("pub_echo", {}, meta=hop_meta(bad))
    assert refused.is_error
    text = " ".join(getattr(block, "text", "") for block in refused.content)
    assert problem in text


async def test_a_token_is_used_once(gateway_b: tuple[Router, MCPEndpoint]) -> None:
    _, endpoint = gateway_b
    once = token()
    async with Client(endpoint.url) as client:
        first = await client.call_tool("pub_echo", {}, meta=hop_meta(once))
        again = await client.call_tool("pub_echo", {}, meta=hop_meta(once))
    assert not first.is_error
    assert again.is_error
    assert "the hop token was used before" in " ".join(getattr(b, "text", "") for b in again.content)


async def test_only_a_gateway_principal_may_present_a_token() -> None:
    router = Router(
        FAST,
        guard=guard(
            {
                "alice": {"allow": ["pub_*"]},
                "peer": {"allow": ["*"], "role": "gateway"},
                "bots": {"agent_ids": ["mcp:gw_b:*"], "allow": ["*"]},
            }
        ),
    )
    router.register(echo_agent("internal:vault:01", "secret_read"))
    stolen = token(aud="secret_read")
    refused = await router.route("secret_read", {}, principal="alice", caller_token=stolen, task_id="task-1")
    assert refused.status is ResultStatus.REJECTED
    assert "only principals with role: gateway" in (refused.error or "")
    served = await router.route("secret_read", {}, principal="peer", caller_token=stolen, task_id="task-1")
    assert served.status is ResultStatus.OK
    assert router.explain("task-1").principal == "bots"


async def test_a_gateway_without_the_secret_is_refused_at_start() -> None:
    with pytest.raises(Exception, match="HOP_SECRET is not set"):
        guard({}, environ={})
    with pytest.raises(Exception, match="the secret in HOP_SECRET is 5 bytes"):
        guard({}, environ={"HOP_SECRET": "short"})
