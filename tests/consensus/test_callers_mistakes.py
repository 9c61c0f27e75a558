"""A consensus caller's mistakes are the caller's: refused as `invalid`, fault caller, as a route
refuses them, never a `no_consensus` blamed on the task or on agents."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from middleware import Fault, ResultStatus
from reach_adapters import Capability, FunctionAgent, Router, Verdict, Vote
from reach_adapters.errors import IdempotencyConflictError
from tests.consensus.voters import CAPITAL

pytestmark = pytest.mark.timeout(60)

STRICT = Capability(
    name="capital",
    input_schema={
        "type": "object",
        "properties": {"country": {"type": "string"}},
        "required": ["country"],
        "additionalProperties": False,
    },
)


def counted(agent_id: str, answer: str, asked: list[str], capability: Capability) -> FunctionAgent:
    def capital(country: str) -> str:
        asked.append(agent_id)
        return answer

    return FunctionAgent(capital, agent_id=agent_id, capabilities=[capability])


@pytest.fixture
async def router() -> AsyncIterator[Router]:
    async with Router() as router:
        yield router


async def test_a_payload_breaking_the_input_schema_is_refused_before_any_voter_is_asked(
    router: Router,
) -> None:
    asked: list[str] = []
    for i, answer in enumerate(["Paris", "Paris", "Lyon"]):
        router.register(counted(f"geo:s{i}:01", answer, asked, STRICT))

    result = await router.consensus("capital", {"nope": 1}, n=3, quorum=2)

    assert (result.status, result.fault) == (ResultStatus.INVALID, Fault.CALLER), result.error
    assert result.error_type == "PayloadValidationError"
    assert "'nope' was unexpected" in (result.error or "")
    assert asked == []
    assert router.explain(result.task_id).attempts == []
    assert all(info.health == 1.0 for info in router.catalog())


async def test_when_every_voter_refuses_the_call_itself_the_result_is_the_callers_error(
    router: Router,
) -> None:
    # No schema to check beforehand: each function refuses an argument it does not take.
    asked: list[str] = []
    for i in range(3):
        router.register(counted(f"geo:k{i}:01", "Paris", asked, Capability(name="capital")))

    result = await router.consensus("capital", {"country": "France", "extra": 1}, n=3, quorum=2)

    assert (result.status, result.fault) == (ResultStatus.INVALID, Fault.CALLER), result.error
    assert result.error_type == "InvalidMessageError"
    assert "takes no argument 'extra'" in (result.error or "")
    votes = result.extra["votes"]
    assert isinstance(votes, list)
    assert len(votes) == 3
    assert all(info.health == 1.0 and info.breaker == "closed" for info in router.catalog())


async def test_a_custom_verdict_naming_an_agent_that_did_not_vote_is_refused(router: Router) -> None:
    asked: list[str] = []
    for i, answer in enumerate(["Paris", "Paris", "Lyon"]):
        router.register(counted(f"geo:v{i}:01", answer, asked, CAPITAL))

    def ghostly(votes: list[Vote]) -> Verdict:
        return Verdict("Paris", ["ghost:x:01", *(vote.agent_id for vote in votes)])

    result = await router.consensus("capital", {"country": "France"}, n=3, quorum=2, vote=ghostly)

    assert (result.status, result.fault) == (ResultStatus.INVALID, Fault.CALLER)
    assert "['ghost:x:01'], which did not vote" in (result.error or "")
    assert result.agent_id is None
    assert router.explain(result.task_id).chosen is None

    def scored_ghost(votes: list[Vote]) -> Verdict:
        return Verdict("Paris", [votes[0].agent_id, votes[1].agent_id], {"ghost:y:01": 1.0})

    scored = await router.consensus("capital", {"country": "France"}, n=3, quorum=2, vote=scored_ghost)
    assert scored.status is ResultStatus.INVALID
    assert "ghost:y:01" in (scored.error or "")


async def test_a_repeat_with_another_quorum_names_consensus_in_the_conflict(router: Router) -> None:
    asked: list[str] = []
    for i in range(3):
        router.register(counted(f"geo:r{i}:01", "Paris", asked, CAPITAL))
    first = await router.consensus("capital", {"country": "France"}, n=3, quorum=2, task_id="rep-1")
    assert first.ok, first.error

    again = await router.consensus("capital", {"country": "France"}, n=3, quorum=3, task_id="rep-1")

    assert again.error_type == IdempotencyConflictError.__name__
    assert "the routing options differ (consensus)" in (again.error or "")
    assert "merge" not in (again.error or "")
