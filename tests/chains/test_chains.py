"""Chains declared in Python: steps are real LangChain agents and an MCP server, reached through
the router as nested calls; parallel branches join; failures say which step and whose fault."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from middleware import Fault, ResultStatus
from reach_adapters import (
    BreakerState,
    Capability,
    Chain,
    FunctionAgent,
    InvalidDeclarationError,
    Router,
    RoutingPolicy,
    Step,
)
from tests.chains.agents import TEXT_IN, Ledger, drafter, extra, reviewer

FAST = RoutingPolicy(backoff_ms=0.0, jitter_ms=0.0)


def publisher(calls: list[dict[str, Any]]) -> FunctionAgent:
    async def publish(text: str, verdict: str) -> dict[str, Any]:
        calls.append({"text": text, "verdict": verdict})
        return {"url": f"https://example.org/{len(calls)}", "verdict": verdict}

    return FunctionAgent(publish, agent_id="web:publish:01")


PUBLISH = Chain(
    name="blog_post",
    input_schema={"type": "object", "properties": {"topic": {"type": "string"}}, "required": ["topic"]},
    steps=[
        Step("draft", "write_draft", input={"topic": "$input.topic"}),
        Step("review", "review_text", input="$steps.draft.output.text"),
        Step(
            "publish",
            "publish",
            input={"text": "$steps.draft.output.text", "verdict": "$steps.review.output"},
        ),
    ],
    output={"url": "$steps.publish.output.url", "review": "$steps.review.output", "topic": "$input.topic"},
)


async def test_a_chain_of_langchain_agents_runs_as_one_capability_with_its_steps_recorded() -> None:
    published: list[dict[str, Any]] = []
    async with Router(FAST) as router:
        router.register(drafter())
        router.register(reviewer(["LGTM"]))
        router.register(publisher(published))
        assert router.add_chain(PUBLISH) == "chain:blog_post:0"

        result = await router.route("blog_post", {"topic": "tides"}, trace_id="trace-publish-1")

        assert result.status is ResultStatus.OK, result.error
        assert result.payload == {"url": "https://example.org/1", "review": "LGTM", "topic": "tides"}
        assert published == [{"text": "a draft on tides", "verdict": "LGTM"}]
        assert result.agent_id == "chain:blog_post:0"
        record = router.explain(result.task_id)
        assert record.steps == [f"{result.task_id}/{step}" for step in ("draft", "review", "publish")]
        assert record.to_dict()["steps"] == record.steps
        for step_task, agent in zip(
            record.steps, ["write:draft:01", "ai:review:01", "web:publish:01"], strict=True
        ):
            step_record = router.explain(step_task)
            assert step_record.chosen == agent
            # Nested reaches: the chain's trace, one level down, the chain agent in the lineage.
            assert step_record.trace_id == "trace-publish-1"
        assert router.chains() == {"blog_post": PUBLISH}
        assert "blog_post" in router.reachable()


async def test_a_caller_mistake_in_the_chains_input_is_the_callers_fault() -> None:
    async with Router(FAST) as router:
        router.register(drafter())
        router.add_chain(
            Chain(name="drafts", steps=[Step("draft", "write_draft", input={"topic": "$input.topic"})])
        )
        # The topic is a number: the draft step's schema refuses it, a mistake of the chain's caller.
        result = await router.route("drafts", {"topic": 7})
        assert result.status is ResultStatus.INVALID
        assert result.fault is Fault.CALLER
        failed = extra(result)["chain"]["failed"]
        assert failed["step"] == "draft"
        assert failed["fault"] == "caller"
        # A missing key of the chain's input is the caller's too, found before any reach.
        missing = await router.route("drafts", {"subject": "tides"})
        assert missing.status is ResultStatus.INVALID
        assert missing.fault is Fault.CALLER
        assert "$input.topic" in (missing.error or "")


async def test_a_failing_agent_fails_the_chain_as_a_task_error_naming_the_step_and_whose_fault() -> None:
    async def broken(text: str) -> Any:
        msg = "spell checker crashed"
        raise RuntimeError(msg)

    async with Router(FAST) as router:
        router.register(drafter())
        router.register(
            FunctionAgent(
                broken, agent_id="web:check:01", capabilities=[Capability(name="check", input_schema=TEXT_IN)]
            )
        )
        router.add_chain(
            Chain(
                name="checked",
                steps=[
                    Step("draft", "write_draft", input={"topic": "$input.topic"}),
                    Step("check", "check", input={"text": "$steps.draft.output.text"}),
                ],
            )
        )
        result = await router.route("checked", {"topic": "tides"})
        assert result.status is ResultStatus.ERROR
        # The chain did its work and the task could not be done: not counted against the chain.
        assert result.fault is Fault.TASK
        assert "step 'check'" in (result.error or "")
        assert "the agent's fault" in (result.error or "")
        failed = extra(result)["chain"]["failed"]
        assert (failed["step"], failed["fault"], failed["agent_id"]) == ("check", "agent", "web:check:01")
        await router.route("checked", {"topic": "tides"})
        # Twice would open a breaker (two failures in a row): the agent's does, the chain's does not.
        info = {agent.agent_id: agent for agent in router.catalog()}
        assert info["web:check:01"].breaker is BreakerState.OPEN
        assert info["chain:checked:0"].breaker is BreakerState.CLOSED
        assert info["chain:checked:0"].failures == 0


async def test_independent_steps_run_at_once_and_a_step_referencing_both_joins_them() -> None:
    both_running = asyncio.Barrier(2)

    async def branch(side: str) -> dict[str, str]:
        # Returns only once the other branch runs too: steps run one after another would hang.
        async with asyncio.timeout(10):
            await both_running.wait()
        return {"side": side}

    async def join(left: dict[str, str], right: dict[str, str]) -> list[str]:
        return [left["side"], right["side"]]

    async with Router(FAST) as router:
        router.register(
            FunctionAgent(branch, agent_id="work:left:01", capabilities=[Capability(name="left")])
        )
        router.register(
            FunctionAgent(branch, agent_id="work:right:01", capabilities=[Capability(name="right")])
        )
        router.register(FunctionAgent(join, agent_id="work:join:01"))
        router.add_chain(
            Chain(
                name="fork",
                steps=[
                    Step("l", "left", input={"side": "L"}),
                    Step("r", "right", input={"side": "R"}),
                    Step("j", "join", input={"left": "$steps.l.output", "right": "$steps.r.output"}),
                ],
            )
        )
        result = await router.route("fork", {})
        assert result.status is ResultStatus.OK, result.error
        assert result.payload == ["L", "R"]


async def test_steps_are_nested_reaches_a_chain_reaching_itself_is_a_loop() -> None:
    async with Router(FAST) as router:
        router.add_chain(Chain(name="ouroboros", steps=[Step("again", "ouroboros")]))
        result = await router.route("ouroboros", {})
        assert result.status is ResultStatus.ERROR
        failed = extra(result)["chain"]["failed"]
        assert failed["error_type"] == "LoopDetectedError"
        assert "chain:ouroboros:0" in failed["error"]


async def test_per_step_options_reach_the_step_the_version_picks_the_agent() -> None:
    async def v1(text: str) -> str:
        return "v1"

    async def v2(text: str) -> str:
        return "v2"

    async with Router(FAST) as router:
        router.register(
            FunctionAgent(v1, agent_id="t:one:01", capabilities=[Capability(name="tag", version="1")])
        )
        router.register(
            FunctionAgent(v2, agent_id="t:two:01", capabilities=[Capability(name="tag", version="2")])
        )
        router.add_chain(
            Chain(name="tagged", steps=[Step("t", "tag", input={"text": "x"}, version="2", timeout_ms=5000)])
        )
        for _ in range(4):
            assert (await router.route("tagged", {})).payload == "v2"


async def test_a_step_that_outlives_the_chains_deadline_ends_the_chain_and_its_work_is_undone() -> None:
    ledger = Ledger()
    hold = asyncio.Event()

    async def slow(text: str) -> str:
        await hold.wait()
        return text

    async with Router(FAST) as router:
        router.register(await ledger.agent())
        router.register(FunctionAgent(slow, agent_id="t:slow:01"))
        router.add_chain(
            Chain(
                name="hurried",
                timeout_ms=300,
                steps=[
                    Step("res", "reserve", input={"item": "kayak"}),
                    Step("s", "slow", input={"text": "x"}, after=["res"]),
                ],
            )
        )
        result = await router.route("hurried", {})
        assert result.status is ResultStatus.TIMEOUT
        # Cut off at its deadline, the chain's reservation is still undone, in the background.
        async with asyncio.timeout(10):
            while ledger.entries or not ledger.released:
                await asyncio.sleep(0.01)
        assert ledger.released == ["ledger-1"]
        hold.set()


@pytest.mark.parametrize(
    ("steps", "output", "problem"),
    [
        ([Step("a", "x"), Step("a", "y")], None, "steps.1.id: step id 'a' is also step 0's"),
        ([Step("a", "x", input="$steps.b.output")], None, "names step 'b', which the chain does not have"),
        ([Step("a", "x", after=["ghost"])], None, "steps.0.after: ghost names step 'ghost'"),
        (
            [Step("a", "x", input="$steps.b.output"), Step("b", "y", input={"v": "$steps.a.output"})],
            None,
            "cycle: a → b → a",
        ),
        ([Step("a", "x", input="$inptu.topic")], None, "is not a reference"),
        ([Step("a", "x")], "$steps.z.output", "output: $steps.z.output names step 'z'"),
    ],
)
def test_a_chain_declaration_is_checked_whole(steps: list[Step], output: Any, problem: str) -> None:
    with pytest.raises(InvalidDeclarationError, match="chain 'c'") as caught:
        Chain(name="c", steps=steps, output=output)
    assert problem in str(caught.value)


def test_a_step_must_name_a_capability() -> None:
    with pytest.raises(InvalidDeclarationError, match="step 'a': field 'capability'"):
        Step("a")
