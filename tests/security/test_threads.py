"""A principal's threads are its own: the router scopes every thread id to the call's principal
once the guard admitted it, for every way of calling, and shows callers the ids they named."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import JsonValue

from middleware import MetaInfo, ReachMessage, ReachResult, ResultStatus
from reach_adapters import Capability, Router
from reach_adapters.langchain import LangChainAgent
from reach_adapters.router import ok_result, own_thread
from reach_adapters.security.guard import SecurityGuard
from reach_adapters.security.spec import SecuritySpec
from tests.core.conftest import FAST
from tests.gateway.agents import approval_graph, memo_graph

pytestmark = pytest.mark.timeout(30)


class Threads:
    """Records the configurable each call reaches it with."""

    agent_id = "util:threads:01"
    capabilities = (Capability(name="threads"),)

    def __init__(self) -> None:
        self.seen: list[dict[str, JsonValue] | None] = []

    async def invoke(self, message: ReachMessage) -> ReachResult:
        self.seen.append(message.meta_info.configurable)
        return ok_result(message, self.agent_id, None)


def said(text: str) -> dict[str, Any]:
    return {"messages": [{"role": "user", "content": text}]}


def guarded(*principals: str) -> Router:
    spec = SecuritySpec.model_validate({"principals": {name: {"allow": ["*"]} for name in principals}})
    router = Router(FAST, guard=SecurityGuard(spec))
    router.register(LangChainAgent(memo_graph(), agent_id="chat:memo:01"))
    router.register(LangChainAgent(approval_graph(), agent_id="chat:approval:01"))
    return router


async def test_a_principal_naming_anothers_thread_reaches_a_thread_of_its_own() -> None:
    router = guarded("alice", "bob")
    thread = {"thread_id": "t-1"}
    first = await router.route("memo", said("my card is 4111"), configurable=thread, principal="alice")
    bobs = await router.route("memo", said("what did she say?"), configurable=thread, principal="bob")
    again = await router.route("memo", said("and?"), configurable=thread, principal="alice")
    assert (first.payload, bobs.payload, again.payload) == (
        "my card is 4111",
        "what did she say?",
        "my card is 4111 / and?",
    )
    # The owner of the router is not restricted: it reaches alice's thread by its scoped name.
    owner = await router.route("memo", said("owner"), configurable={"thread_id": "alice/t-1"})
    assert owner.payload == "my card is 4111 / and? / owner"


async def test_a_principal_cannot_answer_anothers_interrupt_and_is_shown_its_own_thread() -> None:
    router = guarded("alice", "bob")
    thread = {"thread_id": "refund-7"}
    asked = await router.route("approval", said("refund 900"), configurable=thread, principal="alice")
    assert asked.status is ResultStatus.INPUT_REQUIRED
    intruded = await router.route("approval", None, configurable=thread, resume="by bob", principal="bob")
    assert intruded.status is ResultStatus.INVALID
    assert "thread 'refund-7' of agent chat:approval:01 waits on no interrupt" in (intruded.error or "")
    done = await router.route("approval", None, configurable=thread, resume="yes", principal="alice")
    assert (done.status, done.payload) == (ResultStatus.OK, "approved: yes")


async def test_submitted_tasks_and_dispatched_messages_are_scoped_once() -> None:
    router = guarded("alice", "a/b")
    agent = Threads()
    router.register(agent)
    submitted = await router.submit("threads", None, configurable={"thread_id": 7}, principal="alice")
    await router.wait(submitted.task_id, principal="alice")
    # A message already carrying the principal's thread (dispatched again) is not scoped twice.
    meta = MetaInfo(capability="threads", principal="alice", configurable={"thread_id": "alice/7"})
    message = ReachMessage(meta_info=meta)
    await router.dispatch(message)
    assert message.meta_info.configurable == {"thread_id": "alice/7"}  # the caller's copy stays
    # No two principals' threads meet, whatever their names hold: 'a' naming 'b/c', 'a/b' naming 'c'.
    router = guarded("a", "a/b")
    router.register(agent)
    await router.route("threads", None, configurable={"thread_id": "b/c"}, principal="a")
    await router.route("threads", None, configurable={"thread_id": "c", "k": 1}, principal="a/b")
    assert agent.seen == [
        {"thread_id": "alice/7"},
        {"thread_id": "alice/7"},
        {"thread_id": "a/b/c"},
        {"thread_id": "a%2Fb/c", "k": 1},
    ]


async def test_calls_without_a_thread_or_a_principal_are_left_as_they_are() -> None:
    router = guarded("alice")
    agent = Threads()
    router.register(agent)
    await router.route("threads", None, configurable={"k": 1}, principal="alice")
    await router.route("threads", None, configurable={"thread_id": "t"})
    await router.route("threads", None, principal="alice")
    assert agent.seen == [{"k": 1}, {"thread_id": "t"}, None]
    assert own_thread("a%2Fb/c", "a/b") == "c"
    assert own_thread("bob/t", "alice") == "bob/t"
    assert own_thread(None, "alice") is None
