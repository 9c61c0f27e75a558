"""Consensus through the Python API, with real LangChain agents and an MCP server as voters."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any, cast

import pytest
from langchain_core.runnables import RunnableLambda

from middleware import ConsensusHint, Fault, ReachMessage, ReachResult, ResultStatus, RoutingHint
from reach_adapters import (
    Capability,
    FunctionAgent,
    InvalidMessageError,
    NoConsensusError,
    Router,
    RoutingPolicy,
    Verdict,
    Vote,
)
from reach_adapters.langchain import LangChainAgent
from reach_adapters.router.observe import decision_type
from tests.consensus.voters import CAPITAL, chat_voter, graph_voter, lambda_voter, mcp_voter

pytestmark = pytest.mark.timeout(60)

FRANCE = {"country": "France"}


@pytest.fixture
async def voters() -> AsyncIterator[Router]:
    """Four agents of four types that know the capital of France, and one that answers wrong."""
    router = Router(RoutingPolicy(backoff_ms=0.0, jitter_ms=0.0))
    router.register(lambda_voter())
    router.register(chat_voter())
    router.register(graph_voter(calls=5))
    router.register(await mcp_voter())
    router.register(lambda_voter("geo:wrong:01", answer="Lyon"))
    try:
        yield router
    finally:
        await router.aclose()


def votes_of(result: ReachResult) -> list[dict[str, Any]]:
    votes = result.extra["votes"]
    assert isinstance(votes, list)
    return cast("list[dict[str, Any]]", votes)


def info(router: Router, agent_id: str) -> Any:
    return next(entry for entry in router.catalog() if entry.agent_id == agent_id)


async def test_the_majority_decides_and_the_wrong_agent_is_a_dissenting_vote(voters: Router) -> None:
    result = await voters.consensus("capital", FRANCE, n=5, quorum=3)

    assert result.ok, result.error
    assert result.payload == "Paris"
    votes = result.extra["votes"]
    assert isinstance(votes, list)
    by_agent = {vote["agent_id"]: vote for vote in votes if isinstance(vote, dict)}
    assert set(by_agent) == {"geo:lambda:01", "geo:chat:01", "geo:graph:01", "mcp:geo:0", "geo:wrong:01"}
    assert by_agent["geo:wrong:01"] == {
        "agent_id": "geo:wrong:01",
        "status": "ok",
        "payload": "Lyon",
        "agreed": False,
    }
    assert all(
        vote["agreed"] and vote["payload"] == "Paris" for a, vote in by_agent.items() if a != "geo:wrong:01"
    )
    assert result.agent_id in by_agent
    assert result.agent_id != "geo:wrong:01"
    # The record shows the votes, without payloads unless the policy keeps them.
    record = voters.explain(result.task_id)
    assert record.mode == "consensus"
    assert {(v["agent_id"], v["agreed"]) for v in record.votes} == {
        (a, a != "geo:wrong:01") for a in by_agent
    }
    assert all("payload" not in vote for vote in record.to_dict()["votes"])
    assert len(record.attempts) == 5
    assert "dissented" in record.why_not("geo:wrong:01")
    # A dissenting answer is an answer: not a failure for the breaker, only a lower rating.
    wrong = info(voters, "geo:wrong:01")
    assert (wrong.calls, wrong.failures, wrong.breaker) == (1, 0, "closed")
    assert wrong.ratings["capital"] < 1.0
    assert info(voters, "mcp:geo:0").ratings["capital"] == 1.0


async def test_too_few_agreeing_answers_end_no_consensus_with_the_answers_that_came() -> None:
    def broken(task: dict[str, Any]) -> str:
        raise RuntimeError("the atlas is on fire")

    async with Router(RoutingPolicy(backoff_ms=0.0, jitter_ms=0.0)) as router:
        router.register(lambda_voter())
        router.register(chat_voter(reply="Marseille"))
        router.register(
            LangChainAgent(RunnableLambda(broken), agent_id="geo:broken:01", capabilities=[CAPITAL])
        )

        result = await router.consensus("capital", FRANCE, n=3, quorum=2)

        assert result.status is ResultStatus.NO_CONSENSUS
        assert result.payload is None
        assert result.fault is Fault.TASK
        assert "no answer had more votes than every other (2 answered" in (result.error or "")
        votes = {vote["agent_id"]: vote for vote in votes_of(result)}
        assert votes["geo:lambda:01"]["payload"] == "Paris"
        assert votes["geo:chat:01"]["payload"] == "Marseille"
        assert votes["geo:broken:01"]["status"] == "error"
        assert "the atlas is on fire" in votes["geo:broken:01"]["error"]
        assert not any(vote["agreed"] for vote in votes.values())
        with pytest.raises(NoConsensusError, match="no_consensus") as raised:
            result.raise_for_status()
        assert raised.value.result is result
        # Nothing was decided: nobody is rated for dissent.
        assert info(router, "geo:chat:01").ratings["capital"] == 1.0
        assert router.explain(result.task_id).status == "no_consensus"


async def test_failed_voters_leave_too_few_answers_and_are_to_blame() -> None:
    def broken(task: dict[str, Any]) -> str:
        raise RuntimeError("down")

    async with Router() as router:
        router.register(lambda_voter())
        router.register(
            LangChainAgent(RunnableLambda(broken), agent_id="geo:broken:01", capabilities=[CAPITAL])
        )

        result = await router.consensus("capital", FRANCE, n=2, quorum=2)

        assert result.status is ResultStatus.NO_CONSENSUS
        assert result.fault is Fault.AGENT
        assert "1 of 2 agents answered" in (result.error or "")


async def test_fewer_eligible_agents_than_the_quorum_end_at_once_with_no_agent_asked() -> None:
    async with Router() as router:
        router.register(lambda_voter())

        result = await router.consensus("capital", FRANCE, n=3, quorum=2)

        assert result.status is ResultStatus.NO_CONSENSUS
        assert result.fault is Fault.ROUTER
        assert result.extra["votes"] == []
        assert result.attempts == 0
        assert info(router, "geo:lambda:01").calls == 0


async def test_fewer_eligible_than_n_but_enough_for_the_quorum_decide_and_say_so(voters: Router) -> None:
    result = await voters.consensus("capital", FRANCE, n=9, quorum=4)

    assert result.ok
    assert len(result.extra["votes"]) == 5  # type: ignore[arg-type]
    assert "only that many could serve, of n=9" in (voters.explain(result.task_id).note or "")


async def test_voters_are_of_different_agent_types_before_replicas() -> None:
    async with Router() as router:
        for instance in range(1, 5):
            router.register(lambda_voter(f"geo:lambda:0{instance}"))
        router.register(chat_voter())

        for _ in range(5):
            result = await router.consensus("capital", FRANCE, n=2, quorum=2)
            kinds = {vote["agent_id"].rsplit(":", 1)[0] for vote in votes_of(result)}
            assert kinds == {"geo:lambda", "geo:chat"}
        # With more voters than types, replicas fill the rest, each agent once.
        result = await router.consensus("capital", FRANCE, n=4, quorum=4)
        agents = [vote["agent_id"] for vote in votes_of(result)]
        assert len(set(agents)) == 4
        assert "geo:chat:01" in agents


async def test_a_normaliser_makes_equal_what_differs_only_in_form() -> None:
    async with Router() as router:
        router.register(lambda_voter(answer="Paris"))
        router.register(chat_voter(reply="  paris "))
        router.register(await mcp_voter(answer="PARIS"))

        raw = await router.consensus("capital", FRANCE, n=3, quorum=2)
        assert raw.status is ResultStatus.NO_CONSENSUS
        assert "no answer had more votes" in (raw.error or "")

        normalised = await router.consensus(
            "capital", FRANCE, n=3, quorum=3, normalise=lambda text: text.strip().lower()
        )
        assert normalised.ok, normalised.error
        # The decision is an answer as an agent gave it, not its normalised form.
        assert normalised.payload in ("Paris", "  paris ", "PARIS")
        assert all(vote["agreed"] for vote in votes_of(normalised))


async def test_a_judge_capability_picks_among_the_answers(voters: Router) -> None:
    judged: list[Any] = []

    def judge(task: dict[str, Any]) -> dict[str, Any]:
        judged.append(task)
        # A judge that trusts the MCP server: picks its answer by index.
        return {"pick": next(a["index"] for a in task["answers"] if a["agent_id"] == "mcp:geo:0")}

    voters.register(
        LangChainAgent(
            RunnableLambda(judge), agent_id="geo:judge:01", capabilities=[{"name": "pick_capital"}]
        )
    )

    result = await voters.consensus("capital", FRANCE, n=5, quorum=3, vote="judge", judge="pick_capital")

    assert result.ok, result.error
    assert result.payload == "Paris"
    (given,) = judged
    assert given["capability"] == "capital"
    assert given["task"] == FRANCE
    assert sorted(a["payload"] for a in given["answers"]) == ["Lyon", "Paris", "Paris", "Paris", "Paris"]
    assert [a["index"] for a in given["answers"]] == [0, 1, 2, 3, 4]
    judge_info = result.extra["judge"]
    assert isinstance(judge_info, dict)
    assert judge_info["agent_id"] == "geo:judge:01"
    assert judge_info["task_id"] == f"{result.task_id}/judge"
    # The judge's reach is one of its own, in the same trace.
    record = voters.explain(f"{result.task_id}/judge")
    assert record.capability == "pick_capital"
    assert record.trace_id == result.trace_id
    agreed = {vote["agent_id"]: vote["agreed"] for vote in votes_of(result)}
    assert agreed["geo:wrong:01"] is False
    assert sum(agreed.values()) == 4


async def test_a_judge_nobody_declares_is_found_before_any_voter_is_asked() -> None:
    asked: list[str] = []

    def paris(country: str) -> str:
        asked.append(country)
        return "Paris"

    async with Router() as router:
        for n in (1, 2):
            router.register(FunctionAgent(paris, agent_id=f"geo:f{n}:01", capabilities=[CAPITAL]))

        result = await router.consensus("capital", FRANCE, n=2, quorum=2, vote="judge", judge="pick_capital")

        assert (result.status, result.fault, result.delivered) == (
            ResultStatus.NO_CANDIDATE,
            Fault.ROUTER,
            False,
        )
        assert "no agent declares the judge capability 'pick_capital', so no voter was asked" in str(
            result.error
        )
        assert asked == []


async def test_a_consensus_is_logged_as_voted_not_retried(voters: Router) -> None:
    result = await voters.consensus("capital", FRANCE, n=3, quorum=2)

    assert decision_type(voters.explain(result.task_id)) == "voted"


async def test_a_judges_scores_pick_the_best_and_become_the_voters_ratings() -> None:
    async with Router() as router:
        router.register(lambda_voter())
        router.register(chat_voter(reply="Lyon"))

        def scores(capability: str, task: Any, answers: list[dict[str, Any]]) -> dict[str, Any]:
            return {"scores": [1.0 if a["payload"] == "Paris" else 0.25 for a in answers]}

        router.register(FunctionAgent(scores, agent_id="geo:judge:01", capabilities=[{"name": "score"}]))

        result = await router.consensus("capital", FRANCE, n=2, quorum=2, vote="judge", judge="score")

        assert result.payload == "Paris"
        scored = {vote["agent_id"]: vote["score"] for vote in votes_of(result)}
        assert scored == {"geo:lambda:01": 1.0, "geo:chat:01": 0.25}
        alpha = router.policy.ratings.alpha
        assert router.ratings.of("geo:chat:01", "capital") == pytest.approx(1.0 + alpha * (0.25 - 1.0))
        assert router.ratings.of("geo:lambda:01", "capital") == 1.0


async def test_a_judge_answering_nothing_it_may_answer_fails_the_consensus_as_its_own_fault() -> None:
    async with Router() as router:
        router.register(lambda_voter())
        router.register(chat_voter())
        router.register(
            FunctionAgent(
                lambda capability, task, answers: {"best": "Paris"},
                agent_id="geo:judge:01",
                capabilities=[{"name": "muddle"}],
            )
        )

        result = await router.consensus("capital", FRANCE, n=2, quorum=2, vote="judge", judge="muddle")

        assert result.status is ResultStatus.ERROR
        assert result.fault is Fault.AGENT
        assert result.agent_id == "geo:judge:01"
        assert "picks none of the 2 answers" in (result.error or "")
        assert len(result.extra["votes"]) == 2  # type: ignore[arg-type]


async def test_a_custom_vote_function_decides_sync_or_async() -> None:
    async with Router() as router:
        router.register(lambda_voter())
        router.register(chat_voter(reply="Paris, France"))
        router.register(await mcp_voter())
        seen: list[list[Vote]] = []

        def longest(votes: list[Vote]) -> Verdict:
            seen.append(votes)
            best = max(votes, key=lambda vote: len(str(vote.payload)))
            return Verdict(best.payload, [vote.agent_id for vote in votes])

        result = await router.consensus("capital", FRANCE, n=3, quorum=3, vote=longest)
        assert result.payload == "Paris, France"
        assert sorted(vote.payload for vote in seen[0]) == ["Paris", "Paris", "Paris, France"]  # type: ignore[type-var]

        async def nobody(votes: list[Vote]) -> Verdict | None:
            await asyncio.sleep(0)
            return None

        undecided = await router.consensus("capital", FRANCE, n=3, quorum=1, vote=nobody)
        assert undecided.status is ResultStatus.NO_CONSENSUS

        def two(votes: list[Vote]) -> Verdict:
            return Verdict("Paris", [votes[0].agent_id, votes[1].agent_id])

        assert (
            await router.consensus("capital", FRANCE, n=3, quorum=3, vote=two)
        ).status is ResultStatus.NO_CONSENSUS
        assert (await router.consensus("capital", FRANCE, n=3, quorum=2, vote=two)).ok

        def junk(votes: list[Vote]) -> Any:
            return "Paris"

        wrong = await router.consensus("capital", FRANCE, n=3, quorum=2, vote=junk)
        assert (wrong.status, wrong.fault) == (ResultStatus.INVALID, Fault.CALLER)
        assert "return a Verdict, or None" in (wrong.error or "")

        def raises(votes: list[Vote]) -> Verdict:
            raise KeyError("oops")

        broken = await router.consensus("capital", FRANCE, n=3, quorum=2, vote=raises)
        assert (broken.status, broken.fault) == (ResultStatus.INVALID, Fault.CALLER)
        assert "the consensus vote function raised KeyError" in (broken.error or "")


async def test_a_message_asking_for_a_custom_vote_without_a_function_is_refused(voters: Router) -> None:
    hint = RoutingHint(mode="consensus", consensus=ConsensusHint(n=2, quorum=2, vote="custom"))
    message = ReachMessage(raw_payload=FRANCE, routing_hint=hint)
    message.meta_info.capability = "capital"

    result = await voters.dispatch(message)

    assert (result.status, result.fault) == (ResultStatus.INVALID, Fault.CALLER)
    assert "needs a Python function" in (result.error or "")
    # A consensus message as JSON, as other programs send it, decides by majority.
    plain = await voters.dispatch(
        {
            "raw_payload": FRANCE,
            "meta_info": {"capability": "capital"},
            "routing_hint": {"mode": "consensus", "consensus": {"n": 3, "quorum": 2}},
        }
    )
    assert plain.ok
    assert plain.payload == "Paris"


async def test_a_repeated_task_id_is_answered_once(voters: Router) -> None:
    first = await voters.consensus("capital", FRANCE, n=5, quorum=3, task_id="capital-of-france")
    again = await voters.consensus("capital", FRANCE, n=5, quorum=3, task_id="capital-of-france")

    assert again.served_by == "deduplicated"
    assert again.payload == first.payload
    assert info(voters, "geo:lambda:01").calls == 1
    other = await voters.consensus("capital", FRANCE, n=5, quorum=4, task_id="capital-of-france")
    assert other.status is ResultStatus.REJECTED


@pytest.mark.parametrize(
    ("arguments", "problem"),
    [
        ({"n": 2, "quorum": 3}, "quorum 3 is above n 2"),
        ({"n": 0}, "field 'n'"),
        ({"n": 99}, "field 'n'"),
        ({"vote": "loudest"}, "vote must be 'majority', 'judge' or a function"),
        ({"vote": "judge"}, "vote 'judge' needs judge: the name of the capability"),
        ({"judge": "pick"}, "judge 'pick' goes with vote 'judge' only"),
        (
            {"vote": "judge", "judge": "pick", "normalise": str.lower},
            "normalise is a function, for vote 'majority'",
        ),
    ],
)
async def test_bad_consensus_arguments_are_refused_before_any_agent_is_asked(
    voters: Router, arguments: dict[str, Any], problem: str
) -> None:
    with pytest.raises(InvalidMessageError, match=problem):
        await voters.consensus("capital", FRANCE, **arguments)
    assert info(voters, "geo:lambda:01").calls == 0


def test_consensus_sync_works_from_plain_code() -> None:
    router = Router()
    try:
        router.register(FunctionAgent(lambda country: "Paris", agent_id="geo:a:01", capabilities=[CAPITAL]))
        router.register(FunctionAgent(lambda country: "Paris", agent_id="geo:b:01", capabilities=[CAPITAL]))

        result = router.consensus_sync("capital", FRANCE, n=2, quorum=2)

        assert result.ok
        assert result.payload == "Paris"
    finally:
        router.close()


async def test_no_candidate_is_not_served_by_a_fallback_agent() -> None:
    async with Router(default_agent="geo:lambda:01") as router:
        router.register(lambda_voter())
        router.register(
            FunctionAgent(lambda: "x", agent_id="util:other:01", capabilities=[Capability(name="other")])
        )

        result = await router.consensus("nothing_declares_this", FRANCE, n=2, quorum=1)

        assert result.status is ResultStatus.NO_CANDIDATE
        assert info(router, "geo:lambda:01").calls == 0
