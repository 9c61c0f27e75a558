"""Replicas of a checkpointed graph, each with its own checkpointer (one factory, registered
twice): a thread's turns and the answer to its question reach the replica that holds it."""

from __future__ import annotations

import pytest

from middleware import ResultStatus
from reach_adapters import Router
from reach_adapters.langchain import LangChainAgent
from tests.gateway.agents import approval_graph, memo_graph

pytestmark = pytest.mark.timeout(30)


def said(text: str) -> dict[str, list[dict[str, str]]]:
    return {"messages": [{"role": "user", "content": text}]}


async def test_a_threads_turns_and_answers_reach_the_replica_that_holds_it(router: Router) -> None:
    for instance in ("01", "02"):
        router.register(LangChainAgent(memo_graph(), agent_id=f"chat:memo:{instance}"))
        router.register(LangChainAgent(approval_graph(), agent_id=f"chat:approval:{instance}"))
    for turn in range(3):
        result = await router.route(
            "memo", said(f"m{turn}"), configurable={"thread_id": "alice"}, strategy="rating"
        )
        assert result.payload == " / ".join(f"m{n}" for n in range(turn + 1))
    for n in range(4):
        thread = {"thread_id": f"t{n}"}
        asked = await router.route("approval", said("refund"), configurable=thread, strategy="rating")
        assert asked.status == ResultStatus.INPUT_REQUIRED, asked.error
        done = await router.route("approval", None, configurable=thread, resume="yes", strategy="rating")
        assert (done.status, done.agent_id) == (ResultStatus.OK, asked.agent_id), done.error
