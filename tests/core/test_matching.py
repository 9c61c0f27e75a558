"""Tasks that name no capability are matched to one from their text."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from middleware import ReachMessage, ResultStatus
from reach_adapters import Capability, FunctionAgent, InvalidDeclarationError, Router, RoutingPolicy
from reach_adapters.router.matching import LexicalMatcher
from tests.core.conftest import Down

pytestmark = pytest.mark.timeout(20)


def agent(agent_id: str, **cap: Any) -> FunctionAgent:
    async def handle(message: ReachMessage) -> Any:
        return {"by": agent_id, "capability": message.meta_info.capability}

    return FunctionAgent(handle, agent_id=agent_id, capabilities=[Capability(**cap)])


def shop() -> Router:
    router = Router()
    router.register(
        agent(
            "support:refund:01",
            name="refund_order",
            description="Refund a customer's order and return the money",
            keywords=["refund", "money back", "退款"],
        )
    )
    router.register(
        agent(
            "logistics:track:01",
            name="track_parcel",
            description="Tell where a parcel is and when it will arrive",
            keywords=["where is", "delivery", "物流"],
            examples=["where is my parcel", "when will my order arrive"],
        )
    )
    router.register(
        agent(
            "legal:review:01",
            name="review_contract",
            description="Review a contract for risk points",
            strict_keywords=["contract", "合同"],
        )
    )
    return router


async def test_a_keyword_hit_routes_to_its_capability() -> None:
    router = shop()
    result = await router.route(None, text="I want a refund for order 42")
    assert result.ok
    assert result.agent_id == "support:refund:01"
    assert result.capability == "refund_order"
    record = router.explain(result.task_id)
    assert record.matches[0][0] == "refund_order"


async def test_chinese_keywords_match_without_a_segmenter() -> None:
    router = shop()
    result = await router.route(None, "我的物流到哪了")
    assert result.agent_id == "logistics:track:01"


async def test_strict_keywords_must_hit() -> None:
    router = shop()
    matched = await router.route(None, text="please review this contract for risks")
    assert matched.agent_id == "legal:review:01"
    scores = dict(await LexicalMatcher().match("review these risk points", router.reachable()))
    assert scores["review_contract"] == 0.0


async def test_a_task_that_matches_nothing_falls_back() -> None:
    router = Router(default_agent="ops:human:01")
    router.register(agent("ops:human:01", name="anything"))
    router.register(agent("support:refund:01", name="refund_order", keywords=["refund"]))
    result = await router.route(None, text="sing me a song")
    assert result.served_by == "default"
    assert result.agent_id == "ops:human:01"


async def test_no_text_and_no_capability_is_invalid() -> None:
    router = shop()
    result = await router.route(None, {"order": 42})
    assert result.status is ResultStatus.INVALID
    assert "no task text" in (result.error or "")


async def test_close_matches_are_tried_best_first() -> None:
    async def refuse(message: ReachMessage) -> Any:
        raise Down("down")

    router = Router(RoutingPolicy(backoff_ms=0.0, jitter_ms=0.0, match_direct=0.9, match_confirm=0.7))
    first = Capability(name="first", keywords=["parcel", "late", "lost"])
    router.register(FunctionAgent(refuse, agent_id="a:first:01", capabilities=[first]))
    router.register(agent("a:second:01", name="second", keywords=["parcel"]))
    result = await router.route(None, text="my parcel is late")
    assert result.ok
    assert result.agent_id == "a:second:01"
    assert result.capability == "second"
    assert router.explain(result.task_id).matches == [("first", 0.875), ("second", 0.75)]


class FixedMatcher:
    """A custom matcher: the protocol is one async method."""

    async def match(self, text: str, capabilities: Mapping[str, Capability]) -> list[tuple[str, float]]:
        return [(name, 0.9 if name == "track_parcel" else 0.1) for name in capabilities]


async def test_a_custom_matcher_is_used() -> None:
    router = Router(matcher=FixedMatcher())
    router.register(agent("logistics:track:01", name="track_parcel"))
    router.register(agent("support:refund:01", name="refund_order"))
    assert (await router.route(None, text="anything at all")).agent_id == "logistics:track:01"


class BrokenMatcher:
    """A matcher whose embedding service is down."""

    async def match(self, text: str, capabilities: Mapping[str, Capability]) -> list[tuple[str, float]]:
        msg = "embedding service unreachable"
        raise ConnectionError(msg)


async def test_a_failing_matcher_is_an_error_result_or_goes_to_the_default_agent() -> None:
    router = Router(matcher=BrokenMatcher())
    router.register(agent("logistics:track:01", name="track_parcel"))
    failed = await router.route(None, text="where is my parcel")
    assert failed.status is ResultStatus.ERROR
    assert failed.error_type == "ConnectionError"
    assert (
        failed.error
        == "matching the task text to a capability failed: ConnectionError: embedding service unreachable"
    )
    assert router.explain(failed.task_id) is not None

    router.register(agent("support:human:01", name="human"))
    router.update_policy(RoutingPolicy(default_agent="support:human:01"))
    served = await router.route(None, text="where is my parcel")
    assert served.ok
    assert (served.agent_id, served.served_by) == ("support:human:01", "default")


# -- whole words, honest scores, explanations (issue 10, item 10) ---------------------------


async def test_keywords_match_whole_words_not_parts_of_words() -> None:
    tax = Capability(name="file_return", keywords=["tax"], strict_keywords=["tax"])
    clock = Capability(name="clock", keywords=["time"])
    matcher = LexicalMatcher()
    scores = dict(
        await matcher.match(
            "fix the syntax of this sometimes broken query", {"file_return": tax, "clock": clock}
        )
    )
    assert scores == {"file_return": 0.0, "clock": 0.0}
    hit = dict(await matcher.match("my tax return, on time please", {"file_return": tax, "clock": clock}))
    assert hit["file_return"] >= 0.75
    assert hit["clock"] >= 0.75


async def test_keyword_phrases_match_as_phrases() -> None:
    refund = Capability(name="refund_order", keywords=["money back"])
    matcher = LexicalMatcher()
    assert dict(await matcher.match("I want my money back", {"r": refund}))["r"] >= 0.75
    assert dict(await matcher.match("back then I had money", {"r": refund}))["r"] < 0.7


async def test_chinese_keywords_still_match_inside_a_sentence() -> None:
    track = Capability(name="track", keywords=["物流"])
    assert dict(await LexicalMatcher().match("我的物流到哪了", {"t": track}))["t"] >= 0.75


async def test_name_words_alone_are_not_a_sure_match() -> None:
    router = Router()
    router.register(agent("shop:orders:01", name="cancel_order"))
    scores = dict(await LexicalMatcher().match("how do I order the cancel button", router.reachable()))
    assert 0.7 <= scores["cancel_order"] < 0.85
    with_keyword = Capability(name="cancel_order", keywords=["cancel"])
    sure = dict(await LexicalMatcher().match("cancel my order", {"c": with_keyword}))
    assert sure["c"] == 1.0


async def test_explain_of_a_task_that_matched_nothing_lists_the_best_scores() -> None:
    router = shop()
    result = await router.route(None, text="sing me a song about contracts and parcels")
    assert result.status is ResultStatus.NO_CANDIDATE
    record = router.explain(result.task_id)
    assert record.matches == []
    assert record.best_matches
    assert "match_confirm" in (record.note or "")
    assert "0.70" in (record.note or "")
    why = record.why_not("support:refund:01")
    assert "matched none well enough" in why
    assert "None" not in why


async def test_why_not_for_broadcasts_and_ties_reads_correctly() -> None:
    router = Router()
    for n in (1, 2):
        router.register(agent(f"svc:twin:0{n}", name="twin"))
    many = await router.broadcast("twin", {})
    record = router.explain(many.task_id)
    for n in (1, 2):
        assert record.why_not(f"svc:twin:0{n}") == f"svc:twin:0{n} received the broadcast and answered ok"
    one = await router.route("twin", {})
    record = router.explain(one.task_id)
    loser = next(c.agent_id for c in record.candidates if c.agent_id != one.agent_id)
    why = record.why_not(loser)
    assert "tied with" in why
    assert "ties are broken at random" in why
    assert "below" not in why


async def test_keywords_in_any_script_are_words() -> None:
    weather = Capability(name="ru_weather", keywords=["погода"], strict_keywords=["погода"])
    money = Capability(name="money", keywords=["rich"])
    matcher = LexicalMatcher()
    caps = {"ru_weather": weather, "money": money}
    assert dict(await matcher.match("погода в Москве", caps))["ru_weather"] >= 0.75
    assert dict(await matcher.match("weather forecast please", caps))["ru_weather"] == 0.0
    assert dict(await matcher.match("flights to Zürich", caps))["money"] == 0.0


def test_a_keyword_without_a_word_in_it_is_refused_at_declaration() -> None:
    with pytest.raises(InvalidDeclarationError, match="could never match a word"):
        Capability(name="shout", strict_keywords=["!!!"])


async def test_why_not_under_the_rating_strategy_speaks_of_turns() -> None:
    router = Router(RoutingPolicy(strategy="rating"))
    for n in (1, 2):
        router.register(agent(f"svc:twin:0{n}", name="twin"))
    result = await router.route("twin", {})
    other = "svc:twin:02" if result.agent_id == "svc:twin:01" else "svc:twin:01"
    why = router.explain(result.task_id).why_not(other)
    assert "gives agents turns" in why
    assert "below" not in why
    assert "tied" not in why
