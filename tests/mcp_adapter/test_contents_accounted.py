"""Resource reads, prompts and completions asked of upstream servers through the router's MCP
server are admitted and accounted as calls: they count against a principal's quota, a principal
that may reach nothing is refused, and the audit log and metrics hear of each."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp import Client
from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.resources import FunctionResource
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, INVALID_REQUEST, PromptReference
from prometheus_client import CollectorRegistry

from reach_adapters import Access, FunctionAgent, Router
from reach_adapters.gateway.audit import AuditLog
from reach_adapters.mcp import MCPServerAgent, RouterMCPServer, start_mcp_server
from reach_adapters.observability.metrics import ReachMetrics
from reach_adapters.security.guard import SecurityGuard
from reach_adapters.security.spec import SecuritySpec
from tests.mcp_adapter.test_contents import _as, docs, shout
from tests.mcp_adapter.test_instructions import _Principals

pytestmark = pytest.mark.timeout(60)


def _guarded(rules: dict[str, object]) -> Router:
    return Router(guard=SecurityGuard(SecuritySpec.model_validate({"principals": rules})))


@pytest.mark.parametrize("mode", ["legacy", "auto"])
async def test_reads_and_prompts_count_against_the_principals_quota(mode: str, tmp_path: Path) -> None:
    audit = AuditLog(tmp_path / "audit.jsonl")
    async with _guarded({"bob": {"allow": ["search", "shout"], "quota_per_minute": 3}}) as router:
        audit.attach(router)
        router.register(await MCPServerAgent.connect("docs", docs))
        router.register(FunctionAgent(shout, agent_id="util:shout:0"))
        async with (
            await start_mcp_server(router, port=0, limits=_Principals()) as endpoint,
            _as(endpoint.url, "bob", mode) as client,
        ):
            await client.read_resource("docs://readme")
            await client.get_prompt("review", {"code": "x"})
            await client.call_tool("shout", {"text": "a"})
            with pytest.raises(MCPError) as refused:
                await client.read_resource("docs://readme")
            assert refused.value.error.code == INVALID_REQUEST
            assert "quota_per_minute of 3 calls per minute" in refused.value.error.message
            assert refused.value.error.data["error_type"] == "QuotaExceededError"
            # The calls and the reads share the one quota.
            assert (await client.call_tool("shout", {"text": "a"})).is_error
            # Listing what there is does not count, as listing tools does not.
            assert (await client.list_resources()).resources
    audit.close()
    lines = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [(line["principal"], line.get("request"), line["status"]) for line in lines] == [
        ("bob", "resources/read", "ok"),
        ("bob", "prompts/get", "ok"),
        ("bob", None, "ok"),
        ("bob", "resources/read", "rejected"),
        ("bob", None, "rejected"),
    ]


@pytest.mark.parametrize(
    ("rules", "rule"),
    [
        ({}, "has no 'allow' in security.yaml"),
        ({"allow": []}, "allow.capabilities of principal 'eve' is empty"),
        ({"allow": {"namespaces": []}}, "allow.namespaces of principal 'eve' is empty"),
    ],
)
async def test_a_principal_that_may_reach_nothing_is_refused_a_read_saying_why(
    rules: dict[str, object], rule: str
) -> None:
    async with _guarded({"bob": {"allow": ["search"]}, "eve": {**rules, "quota_per_minute": 1}}) as router:
        router.register(await MCPServerAgent.connect("docs", docs))
        async with (
            await start_mcp_server(router, port=0, limits=_Principals()) as endpoint,
            _as(endpoint.url, "eve", "auto") as client,
        ):
            for _ in range(2):
                # Refused for the rule each time: a refusal takes nothing from the quota.
                with pytest.raises(MCPError) as refused:
                    await client.read_resource("docs://readme")
                assert refused.value.error.code == INVALID_REQUEST
                assert rule in refused.value.error.message


def _broken() -> str:
    msg = "the disk is gone"
    raise RuntimeError(msg)


async def test_the_audit_log_and_metrics_hear_of_each_read_prompt_and_completion(tmp_path: Path) -> None:
    audit = AuditLog(tmp_path / "audit.jsonl")
    shelf = MCPServer("shelf")
    shelf.add_resource(FunctionResource(uri="shelf://broken", name="broken", fn=_broken))
    async with Router() as router:
        router.register(await MCPServerAgent.connect("docs", docs))
        router.register(await MCPServerAgent.connect("shelf", shelf))
        audit.attach(router)
        metrics = ReachMetrics(router, CollectorRegistry())
        reach = RouterMCPServer(router)
        try:
            async with Client(reach.server) as client:
                await client.read_resource("docs://pages/token=s3cret")
                await client.get_prompt("review", {"code": "x"})
                await client.complete(
                    PromptReference(type="ref/prompt", name="review"), {"name": "language", "value": "p"}
                )
                with pytest.raises(MCPError) as unknown:
                    await client.read_resource("nowhere://x")
                assert unknown.value.error.code == INVALID_PARAMS
                # The server's own failure is the server's.
                with pytest.raises(MCPError):
                    await client.read_resource("shelf://broken")
        finally:
            reach.close()
    audit.close()
    lines = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    keys = ("principal", "request", "target", "agent_id", "status", "fault")
    assert [tuple(line[key] for key in keys) for line in lines] == [
        (None, "resources/read", "docs://pages/token=***", "mcp:docs:0", "ok", None),
        (None, "prompts/get", "review", "mcp:docs:0", "ok", None),
        (None, "completion/complete", "review", "mcp:docs:0", "ok", None),
        # No server lists it: the caller's mistake, no server asked.
        (None, "resources/read", "nowhere://x", None, "error", "caller"),
        (None, "resources/read", "shelf://broken", "mcp:shelf:0", "error", "agent"),
    ]
    assert all(line["duration_ms"] >= 0 and line["time"].endswith("Z") for line in lines)
    counted = metrics.registry.get_sample_value
    assert counted("reach_accesses_total", {"request": "resources/read", "status": "ok", "fault": ""}) == 1
    assert (
        counted("reach_accesses_total", {"request": "resources/read", "status": "error", "fault": "caller"})
        == 1
    )
    assert (
        counted("reach_accesses_total", {"request": "resources/read", "status": "error", "fault": "agent"})
        == 1
    )
    assert counted("reach_accesses_total", {"request": "prompts/get", "status": "ok", "fault": ""}) == 1


async def test_an_observer_that_fails_on_an_access_keeps_the_read_and_the_others() -> None:
    heard: list[str] = []

    class Failing:
        def on_reach(self, *_: object) -> None:
            pass

        def on_access(self, _: object) -> None:
            raise RuntimeError("boom")

    class Listening(Failing):
        def on_access(self, access: object) -> None:
            heard.append(access.request)  # type: ignore[attr-defined]

    async with Router() as router:
        router.register(await MCPServerAgent.connect("docs", docs))
        router.add_observer(Failing())
        router.add_observer(Listening())
        reach = RouterMCPServer(router)
        try:
            async with Client(reach.server) as client:
                assert (await client.read_resource("docs://readme")).contents
        finally:
            reach.close()
    assert heard == ["resources/read"]


class _Broken:
    """A guard (the `Guard` protocol) whose admission fails: a bug of its own, not a refusal."""

    async def admit(self, message: object, calling_agent: str | None) -> None:
        msg = "the guard's store is gone"
        raise RuntimeError(msg)

    def forbids(self, principal: str, capability: str, agent_id: str, namespace: str) -> None:
        return None

    async def fan_out(self, principal: str, targets: int) -> None:
        return None

    def sees_all(self, principal: str) -> bool:
        return True

    def hop_token(self, meta: object, agent_id: str, target: str) -> None:
        return None


async def test_a_guard_that_fails_is_the_routers_fault_not_a_refusal() -> None:
    heard: list[tuple[str, str | None]] = []

    class Listening:
        def on_reach(self, *_: object) -> None:
            pass

        def on_access(self, access: Access) -> None:
            heard.append((access.status, None if access.fault is None else access.fault.value))

    async with Router(guard=_Broken()) as router:
        router.register(await MCPServerAgent.connect("docs", docs))
        router.add_observer(Listening())
        async with (
            await start_mcp_server(router, port=0, limits=_Principals()) as endpoint,
            _as(endpoint.url, "bob", "auto") as client,
        ):
            with pytest.raises(MCPError):
                await client.read_resource("docs://readme")
    assert heard == [("error", "router")]
