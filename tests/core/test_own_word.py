"""An agent that refuses a payload its declaration took, by its own word (as another reach router
does across a hop whose declaration shows no schema): its replicas are not asked again, other
agents still are, and the refusal stays the caller's mistake."""

from __future__ import annotations

from typing import Any

import pytest

from middleware import Fault, ReachMessage, ReachResult, ResultStatus
from reach_adapters import Capability, FunctionAgent, ReachError, Router
from reach_adapters.router import error_result, ok_result
from tests.core.conftest import FAST

pytestmark = pytest.mark.timeout(30)

INT_N = {"type": "object", "properties": {"n": {"type": "integer"}}}


class OwnWord:
    """Takes any payload by its declaration; refuses every one, never having run anything."""

    def __init__(self, agent_id: str, asked: list[str], weight: float = 50.0, **cap: Any) -> None:
        self.agent_id = agent_id
        self.asked = asked
        self.capabilities = (Capability(name="work", idempotent=True, weight=weight, **cap),)

    async def invoke(self, message: ReachMessage) -> ReachResult:
        self.asked.append(self.agent_id)
        return error_result(
            message,
            ResultStatus.INVALID,
            "PayloadValidationError",
            "over there: the payload does not match",
            fault=Fault.CALLER,
            delivered=False,
        )


def answering(agent_id: str, asked: list[str], weight: float, **cap: Any) -> FunctionAgent:
    async def answer(payload: Any) -> Any:
        asked.append(agent_id)
        return agent_id

    capability = Capability(name="work", idempotent=True, weight=weight, **cap)
    return FunctionAgent(answer, agent_id=agent_id, capabilities=[capability], call_style="payload")


def flaky(agent_id: str, asked: list[str], weight: float) -> FunctionAgent:
    """An agent whose schema takes `{"n": int}` and whose every call fails on the way."""

    async def reset(payload: Any) -> Any:
        asked.append(agent_id)
        raise ConnectionError("reset")

    capability = Capability(name="work", input_schema=INT_N, idempotent=True, weight=weight)
    return FunctionAgent(reset, agent_id=agent_id, capabilities=[capability])


async def routed(*agents: Any) -> ReachResult:
    """`{"n": 1}` routed to `work` by a router of `agents` alone."""
    router = Router(FAST)
    for agent in agents:
        router.register(agent)
    result = await router.route("work", {"n": 1})
    await router.aclose()
    return result


async def test_a_refusers_replica_is_not_asked_but_another_agent_is() -> None:
    asked: list[str] = []
    result = await routed(
        OwnWord("far:a:01", asked, weight=100),
        OwnWord("far:a:02", asked, weight=50),
        answering("near:b:01", asked, weight=1),
    )
    assert (result.status, result.agent_id) == (ResultStatus.OK, "near:b:01"), result.error
    assert asked == ["far:a:01", "near:b:01"]


async def test_a_retry_after_a_refusal_goes_to_a_declaration_that_takes_the_payload() -> None:
    asked: list[str] = []
    result = await routed(
        OwnWord("far:a:01", asked, weight=100),
        OwnWord("far:a:02", asked, weight=1),
        flaky("near:b:01", asked, weight=50),
    )
    # Its failure is what the caller hears, not a refusal that another agent's failure turned
    # into "a declaration that cannot serve now takes it".
    assert (result.status, result.fault, result.agent_id) == (ResultStatus.ERROR, Fault.AGENT, "near:b:01")
    assert "far:a:02" not in asked
    assert asked.count("far:a:01") == 1


async def test_a_resume_refused_by_the_agents_own_word_stays_the_callers() -> None:
    router = Router(FAST)
    router.register(OwnWord("far:a:01", []))
    thread = {"thread_id": "t1"}
    result = await router.route("work", None, resume={"ok": 1}, configurable=thread)
    await router.aclose()
    assert (result.status, result.fault) == (ResultStatus.INVALID, Fault.CALLER), result.error


class Unadaptable:
    agent_id = "odd:adapt:01"
    capabilities = (Capability(name="work", weight=100),)

    def adapt_payload(self, capability: str, payload: Any) -> Any:
        msg = "cannot adapt"
        raise ValueError(msg)

    async def invoke(self, message: ReachMessage) -> ReachResult:
        return ok_result(message, self.agent_id, "never")


async def test_an_adapt_payload_that_raises_is_its_agents_failure() -> None:
    router = Router(FAST)
    router.register(Unadaptable())
    strict = Capability(name="work", input_schema={"type": "integer"}, weight=1)
    router.register(FunctionAgent(lambda payload: payload, agent_id="fn:int:01", capabilities=[strict]))
    with pytest.raises(ReachError) as streamed:
        _ = [chunk async for chunk in router.stream("work", 3)]
    refused = await router.route("work", "x")
    [odd] = [info for info in router.catalog() if info.agent_id == "odd:adapt:01"]
    # Counted against it, as a failure of `invoke` would be: quarantined, the next call goes on.
    after = await router.route("work", 3)
    await router.aclose()
    for result in (streamed.value.result, refused):
        assert result is not None
        assert (result.status, result.fault) == (ResultStatus.ERROR, Fault.AGENT), result.error
        assert result.agent_id == "odd:adapt:01"
        assert not result.delivered
    assert odd.failures == 2
    assert (after.status, after.agent_id) == (ResultStatus.OK, "fn:int:01"), after.error


async def test_a_transient_failure_then_a_refusal_answers_with_the_failure() -> None:
    asked: list[str] = []
    result = await routed(flaky("near:b:01", asked, weight=100), OwnWord("far:a:01", asked, weight=1))
    assert (result.status, result.fault) == (ResultStatus.ERROR, Fault.AGENT), result.error
    assert (result.agent_id, result.error_type) == ("near:b:01", "ConnectionError")


async def test_replicas_declaring_the_refusers_schema_are_not_asked_again() -> None:
    asked: list[str] = []
    result = await routed(
        OwnWord("far:a:00", asked, weight=100, input_schema=INT_N),
        OwnWord("far:a:01", asked, weight=50, input_schema=INT_N),
        answering("near:b:01", asked, weight=1, input_schema=INT_N),
    )
    assert (result.status, result.agent_id) == (ResultStatus.OK, "near:b:01"), result.error
    assert asked == ["far:a:00", "near:b:01"]
