"""Feedback that has no one agent to rate says where to send it instead."""

from __future__ import annotations

import pytest

from reach_adapters import Capability, Chain, FunctionAgent, InvalidFeedbackError, Router, Step

pytestmark = pytest.mark.timeout(60)

WORK = Capability(name="work")


def upper(text: str) -> dict[str, str]:
    return {"text": text.upper()}


async def test_feedback_on_a_chain_is_refused_naming_the_step_tasks_to_rate() -> None:
    async with Router() as router:
        router.register(FunctionAgent(upper, agent_id="txt:up:01", capabilities=[Capability(name="upper")]))
        router.add_chain(Chain(name="shout", steps=[Step("u", "upper", input={"text": "$input.text"})]))
        result = await router.route("shout", {"text": "hi"})
        assert result.ok, result.error
        step_task = router.explain(result.task_id).steps[0]

        with pytest.raises(InvalidFeedbackError, match="is a chain's") as refused:
            await router.feedback(result.task_id, 0.0)

        assert step_task in str(refused.value)
        assert router.ratings.of(result.agent_id or "", "shout") == 1.0
        # The step's task takes the feedback, and rates the agent that did the work.
        done = await router.feedback(step_task, 0.0)
        assert [change.agent_id for change in done.rated] == ["txt:up:01"]


async def test_feedback_on_a_broadcast_says_no_one_agent_answered() -> None:
    async with Router() as router:
        for agent_id in ("team:a:01", "team:b:01"):
            router.register(FunctionAgent(lambda: 1, agent_id=agent_id, capabilities=[WORK]))
        result = await router.broadcast("work")
        assert result.ok, result.error

        with pytest.raises(InvalidFeedbackError) as refused:
            await router.feedback(result.task_id, 0.0)

        message = str(refused.value)
        assert "a broadcast's answer is every target's" in message
        assert "rate tasks that ended ok" not in message
