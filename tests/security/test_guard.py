"""Permissions, quotas, visibility and privacy of a router under a `SecurityGuard` (issue 14,
items 2, 3 and 5), with real agents and real LangChain tools."""

from __future__ import annotations

from typing import Any

import pytest
from langchain_core.tools import BaseTool

from middleware import Fault, ReachResult, ResultStatus
from reach_adapters import (
    Capability,
    FunctionAgent,
    PermissionDeniedError,
    QuotaExceededError,
    Router,
    RoutingPolicy,
    UnknownTaskError,
)
from reach_adapters.langchain import ReachToolkit
from reach_adapters.router import ExclusionKind
from reach_adapters.security.guard import SecurityGuard
from reach_adapters.security.spec import SecuritySpec
from tests.core.conftest import FAST, agent_info, echo_agent

pytestmark = pytest.mark.timeout(20)


def guarded(principals: dict[str, Any], policy: RoutingPolicy = FAST, **spec: Any) -> Router:
    guard = SecurityGuard(SecuritySpec.model_validate({"principals": principals, **spec}))
    router = Router(policy, guard=guard)
    router.register(echo_agent("public:echo:01", "pub_echo"))
    router.register(echo_agent("internal:echo:01", "pub_echo"))
    router.register(echo_agent("internal:vault:01", "secret_read"))
    return router


def inner(result: ReachResult) -> dict[str, Any]:
    """The result an agent's own routed call returned, as that agent answered it."""
    assert isinstance(result.payload, dict)
    return result.payload


def tool_names(tools: list[BaseTool]) -> set[str]:
    return {tool.name for tool in tools}


async def test_a_capability_outside_the_allow_list_is_rejected_naming_the_rule() -> None:
    router = guarded({"alice": {"allow": ["pub_*"]}})
    ok = await router.route("pub_echo", {"x": 1}, principal="alice")
    assert ok.status is ResultStatus.OK
    refused = await router.route("secret_read", {}, principal="alice")
    assert (refused.status, refused.fault, refused.delivered) == (ResultStatus.REJECTED, Fault.CALLER, False)
    assert refused.error_type == "PermissionDeniedError"
    assert "allow.capabilities ['pub_*'] of principal 'alice' does not match 'secret_read'" in (
        refused.error or ""
    )
    with pytest.raises(PermissionDeniedError, match="secret_read"):
        refused.raise_for_status()
    # The caller's doing: the agent it was kept from is as healthy as before.
    assert agent_info(router, "internal:vault:01").calls == 0


async def test_namespaces_and_agents_narrow_which_replica_serves() -> None:
    router = guarded(
        {
            "outside": {"allow": {"capabilities": ["pub_*"], "namespaces": ["public"]}},
            "pinned": {"allow": {"agents": ["internal:echo:*"]}},
            "nowhere": {"allow": {"namespaces": ["elsewhere"]}},
        }
    )
    for _ in range(6):
        result = await router.route("pub_echo", {}, principal="outside")
        assert result.agent_id == "public:echo:01"
        assert (await router.route("pub_echo", {}, principal="pinned")).agent_id == "internal:echo:01"
    record = router.explain(result.task_id)
    # Agents a principal may not reach are not listed in its records.
    assert [e for e in record.exclusions if e.kind is ExclusionKind.FORBIDDEN] == []
    assert "internal:echo:01" not in str(record.to_dict())
    refused = await router.route("pub_echo", {}, principal="nowhere")
    assert refused.status is ResultStatus.REJECTED
    assert "allow.namespaces ['elsewhere']" in (refused.error or "")


async def test_directed_calls_and_fallbacks_respect_the_allow_list() -> None:
    router = guarded({"alice": {"allow": {"namespaces": ["public"]}}, "reader": {"allow": ["pub_*"]}})
    # An agent the principal may not reach at all is answered as one that is not there.
    hidden = await router.send("internal:vault:01", {}, principal="alice")
    absent = await router.send("internal:nothing:01", {}, principal="alice")
    assert (hidden.status, hidden.error_type) == (absent.status, absent.error_type)
    assert hidden.error == (absent.error or "").replace("internal:nothing:01", "internal:vault:01")

    # One it may see, for a capability of it the principal may not use: refused, naming the rule.
    async def either(payload: Any) -> Any:
        return payload

    caps = [Capability(name="pub_two"), Capability(name="secret_two")]
    router.register(FunctionAgent(either, agent_id="internal:two:01", capabilities=caps))
    assert (await router.send("internal:two:01", {}, principal="reader", capability="pub_two")).ok
    refused = await router.send("internal:two:01", {}, principal="reader", capability="secret_two")
    assert (refused.status, refused.error_type) == (ResultStatus.REJECTED, "PermissionDeniedError")
    assert "does not match 'secret_two'" in (refused.error or "")
    served = await router.send("public:echo:01", {}, principal="alice")
    assert served.status is ResultStatus.OK
    # A fallback agent the principal may not reach is passed over, not delivered to, and not named.
    missing = await router.route("nothing_here", {}, principal="alice", fallback=["internal:vault:01"])
    assert missing.status is ResultStatus.NO_CANDIDATE
    assert agent_info(router, "internal:vault:01").calls == 0
    assert "internal:vault:01" not in str(router.explain(missing.task_id).to_dict())


async def test_unknown_principals_are_refused_and_the_program_itself_is_not() -> None:
    router = guarded({"alice": {"allow": ["pub_*"]}, "idle": {}})
    unknown = await router.route("pub_echo", {}, principal="mallory")
    assert "principal 'mallory' is not declared in security.yaml" in (unknown.error or "")
    nothing = await router.route("pub_echo", {}, principal="idle")
    assert "has no 'allow'" in (nothing.error or "")
    owner = await router.route("secret_read", {})
    assert owner.status is ResultStatus.OK


async def test_catalog_tools_and_suggestions_show_only_what_a_principal_may_reach() -> None:
    router = guarded({"alice": {"allow": {"capabilities": ["pub_*"], "namespaces": ["public"]}}})
    catalog = router.catalog(principal="alice")
    assert [info.agent_id for info in catalog] == ["public:echo:01"]
    assert set(router.reachable(principal="alice")) == {"pub_echo"}
    assert set(router.reachable()) == {"pub_echo", "secret_read"}
    assert router.catalog(principal="mallory") == []
    tools = ReachToolkit(router, principal="alice").get_tools()
    assert tool_names(tools) == {"reach_agent", "pub_echo"}
    generic = next(tool for tool in tools if tool.name == "reach_agent")
    assert "secret_read" not in generic.description
    answer = await generic.ainvoke({"target": "secret_read", "payload": {}})
    assert "PermissionDeniedError" in str(answer)
    # A name that does not exist suggests only names the principal may reach.
    typo = await router.route("pub_ech", {}, principal="alice")
    assert "pub_echo" in (typo.error or "")
    assert "secret_read" not in (typo.error or "")
    matched = await router.route(None, principal="alice", text="secret read")
    assert matched.status is ResultStatus.NO_CANDIDATE


async def test_quota_per_minute_and_burst_refuse_with_retry_after() -> None:
    router = guarded({"alice": {"allow": ["*"], "quota_per_minute": 3}, "bob": {"allow": ["*"], "burst": 2}})
    for _ in range(3):
        assert (await router.route("pub_echo", {}, principal="alice")).ok
    over = await router.route("pub_echo", {}, principal="alice")
    assert (over.status, over.fault, over.error_type) == (
        ResultStatus.REJECTED,
        Fault.CALLER,
        "QuotaExceededError",
    )
    assert "quota_per_minute of 3 calls per minute" in (over.error or "")
    retry_after = over.extra["retry_after_s"]
    assert isinstance(retry_after, float)
    assert 1 <= retry_after <= 60
    with pytest.raises(QuotaExceededError):
        over.raise_for_status()
    # Quotas are per principal; the program itself has none.
    assert (await router.route("pub_echo", {}, principal="bob")).ok
    assert (await router.route("pub_echo", {})).ok
    assert (await router.route("pub_echo", {}, principal="bob")).ok
    burst = await router.route("pub_echo", {}, principal="bob")
    assert "burst of 2 calls per second" in (burst.error or "")


async def test_broadcast_fan_out_is_limited_and_counts_against_the_quota() -> None:
    router = guarded(
        {
            "wide": {"allow": ["*"], "max_broadcast_targets": 1},
            "counted": {"allow": ["*"], "quota_per_minute": 3},
        }
    )
    refused = await router.broadcast("pub_echo", {}, principal="wide")
    assert (refused.status, refused.error_type) == (ResultStatus.REJECTED, "QuotaExceededError")
    assert "reach 2 agents, over the limit of 1 for principal 'wide'" in (refused.error or "")
    first = await router.broadcast("pub_echo", {}, principal="counted")
    assert first.ok
    assert len(first.results or []) == 2
    # Two targets took two of the three calls: one more call fits, a second broadcast does not.
    again = await router.broadcast("pub_echo", {}, principal="counted")
    assert again.error_type == "QuotaExceededError"


async def test_a_task_id_belongs_to_its_principal() -> None:
    router = guarded(
        {"alice": {"allow": ["*"]}, "bob": {"allow": ["*"]}, "ops": {"allow": ["*"], "role": "admin"}}
    )
    first = await router.route("pub_echo", {"card": "4111"}, principal="alice", task_id="t-1")
    assert first.ok
    replay = await router.route("pub_echo", {"card": "4111"}, principal="bob", task_id="t-1")
    assert (replay.status, replay.error_type) == (ResultStatus.REJECTED, "IdempotencyConflictError")
    assert replay.payload is None
    assert "another caller uses it" in (replay.error or "")
    assert "4111" not in str(replay.model_dump())
    assert router.explain("t-1", principal="alice").principal == "alice"
    with pytest.raises(UnknownTaskError):
        router.explain("t-1", principal="bob")
    assert router.explain("t-1", principal="ops").task_id == "t-1"
    await router.route("pub_echo", {}, principal="bob")
    assert {r.principal for r in router.recent_decisions(10, principal="bob")} == {"bob"}
    assert {r.principal for r in router.recent_decisions(10, principal="ops")} == {"alice", "bob"}


async def test_records_keep_payloads_only_when_asked() -> None:
    quiet = guarded({"alice": {"allow": ["*"]}})
    result = await quiet.route("pub_echo", {"card": "4111"}, principal="alice")
    assert "4111" not in str(quiet.explain(result.task_id).to_dict())
    kept = guarded({"alice": {"allow": ["*"]}}, FAST.model_copy(update={"record_payloads": True}))
    result = await kept.route("pub_echo", {"card": "4111"}, principal="alice")
    record = kept.explain(result.task_id)
    assert record.payload == {"card": "4111"}
    assert record.result_payload == result.payload


async def test_an_agent_reaching_onward_calls_as_its_own_principal() -> None:
    guard = SecurityGuard(
        SecuritySpec.model_validate(
            {
                "principals": {
                    "alice": {"allow": ["ask_*"]},
                    "researcher": {"agent_ids": ["team:research:*"], "allow": ["pub_*"]},
                }
            }
        )
    )
    router = Router(FAST, guard=guard)
    router.register(echo_agent("public:echo:01", "pub_echo"))
    router.register(echo_agent("internal:vault:01", "secret_read"))

    def asker(agent_id: str, inner: str) -> FunctionAgent:
        async def ask(payload: Any) -> Any:
            # No principal given: the router knows which agent's delivery this call runs in.
            return (await router.route(inner, payload)).model_dump(mode="json")

        return FunctionAgent(ask, agent_id=agent_id, capabilities=[Capability(name=f"ask_{inner}")])

    router.register(asker("team:research:01", "pub_echo"))
    router.register(asker("team:rogue:01", "secret_read"))
    allowed = await router.route("ask_pub_echo", {"q": 1}, principal="alice")
    assert inner(allowed)["status"] == "ok"
    assert router.explain(inner(allowed)["task_id"]).principal == "researcher"
    unnamed = await router.route("ask_secret_read", {}, principal="alice")
    assert inner(unnamed)["status"] == "rejected"
    assert "agent 'team:rogue:01' may not reach onward" in inner(unnamed)["error"]
    # An agent cannot reach further than its principal allows, whoever called it.
    router.register(asker("team:research:02", "secret_read"))
    beyond = await router.send("team:research:02", {}, principal="alice")
    assert inner(beyond)["status"] == "rejected"
    assert "principal 'researcher' does not match 'secret_read'" in inner(beyond)["error"]
    assert agent_info(router, "internal:vault:01").calls == 0


async def test_a_namespace_toolkit_leaves_a_hidden_capability_to_the_guard_and_follows_reloads() -> None:
    """A capability the namespace declares but the principal may not reach is refused by the
    router's guard, naming its rule, not by the toolkit as one nobody declares; and the toolkit
    sees the rules a reload brings."""
    router = guarded({"alice": {"allow": ["pub_*"]}})
    toolkit = ReachToolkit(router, namespace="internal", principal="alice")
    assert tool_names(toolkit.get_tools()) == {"reach_agent", "pub_echo"}
    (generic,) = [tool for tool in toolkit.get_tools() if tool.name == "reach_agent"]
    hidden = await generic.ainvoke(call_of("secret_read"))
    assert "PermissionDeniedError" in hidden.content
    assert "allow.capabilities ['pub_*'] of principal 'alice'" in hidden.content
    unknown = await generic.ainvoke(call_of("nothing"))
    assert (
        unknown.content == "reach_agent may not reach 'nothing': no agent of namespace 'internal' declares it"
    )
    router.set_guard(SecurityGuard(SecuritySpec.model_validate({"principals": {"alice": {"allow": ["*"]}}})))
    assert tool_names(toolkit.get_tools()) == {"reach_agent", "pub_echo", "secret_read"}
    granted = await generic.ainvoke(call_of("secret_read"))
    assert granted.status == "success", granted.content
    assert inner(granted.artifact)["agent"] == "internal:vault:01"


def call_of(target: str) -> dict[str, Any]:
    return {"name": "reach_agent", "args": {"target": target, "payload": {}}, "id": "c1", "type": "tool_call"}


async def test_a_hidden_capability_of_a_later_namespace_is_still_the_guards_to_refuse() -> None:
    router = guarded({"alice": {"allow": {"namespaces": ["public"]}}})
    toolkit = ReachToolkit(router, namespaces=["public", "internal"], principal="alice")
    (generic,) = [tool for tool in toolkit.get_tools() if tool.name == "reach_agent"]
    hidden = await generic.ainvoke(call_of("secret_read"))
    # Routed to the namespace that declares it, where the guard names its rule: not the router's
    # no_candidate in the first namespace listed, which reads as "nobody declares it".
    assert "PermissionDeniedError" in hidden.content
    assert "allow.namespaces ['public'] of principal 'alice'" in hidden.content


async def test_an_agent_whose_nested_calls_run_out_of_quota_is_not_quarantined() -> None:
    """Its principal's quota is "not now", not a failure of the agent: the task it serves cannot
    be done now (fault task), and its breaker stays closed for when the quota comes back."""
    router = guarded({"researcher": {"agent_ids": ["research:*"], "allow": ["pub_*"], "quota_per_minute": 2}})

    async def research(topic: str) -> Any:
        return (await router.route("pub_echo", {"topic": topic})).raise_for_status().payload

    router.register(
        FunctionAgent(research, agent_id="research:a:01", capabilities=[Capability(name="pub_research")])
    )
    answers = [await router.route("pub_research", {"topic": str(n)}) for n in range(5)]
    assert [answer.ok for answer in answers] == [True, True, False, False, False]
    assert {(answer.status, answer.fault, answer.error_type) for answer in answers[2:]} == {
        (ResultStatus.ERROR, Fault.TASK, "QuotaExceededError")
    }
    assert "quota_per_minute of 2 calls per minute" in (answers[2].error or "")
    info = agent_info(router, "research:a:01")
    assert (info.failures, info.breaker) == (0, "closed")
