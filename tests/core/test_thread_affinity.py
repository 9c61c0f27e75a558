"""A conversation stays with the agent that served it: each replica keeps its own threads (a
LangGraph checkpointer each, an A2A context), so a thread's turns go to the replica that has it."""

from __future__ import annotations

import pytest

from middleware import MetaInfo, ReachMessage, ReachResult, ResultStatus
from reach_adapters import Capability, FunctionAgent, Router
from reach_adapters.router.threads import ThreadAffinity

pytestmark = pytest.mark.timeout(30)


def memo(agent_id: str) -> FunctionAgent:
    """An agent that answers with all its thread was told, as far as this replica heard it."""
    memory: dict[str, list[str]] = {}

    async def answer(message: ReachMessage) -> str:
        thread = str((message.meta_info.configurable or {})["thread_id"])
        memory.setdefault(thread, []).append(str(message.raw_payload))
        return " / ".join(memory[thread])

    return FunctionAgent(answer, agent_id=agent_id, capabilities=[Capability(name="memo")])


async def test_each_threads_turns_go_to_the_replica_that_served_it(router: Router) -> None:
    router.register(memo("chat:memo:01"))
    router.register(memo("chat:memo:02"))
    served: dict[str, set[str | None]] = {}
    for turn in range(4):
        for thread in ("alice", "bob", "carol"):
            # The rating strategy takes the replicas in turn: without affinity, turns would alternate.
            result = await router.route(
                "memo", f"{thread}{turn}", configurable={"thread_id": thread}, strategy="rating"
            )
            assert result.payload == " / ".join(f"{thread}{n}" for n in range(turn + 1)), result.agent_id
            served.setdefault(thread, set()).add(result.agent_id)
    assert all(len(agents) == 1 for agents in served.values())
    # Calls that name no thread are spread as before.
    assert (
        len(
            {
                (
                    await router.route("memo", "x", strategy="rating", configurable={"thread_id": str(n)})
                ).agent_id
                for n in range(4)
            }
        )
        == 2
    )


async def test_tenants_reusing_a_thread_id_keep_their_own_agents(router: Router) -> None:
    for namespace in ("acme", "globex"):
        for instance in ("01", "02"):
            router.register(memo(f"{namespace}:memo:{instance}"))
    served: dict[str, set[str | None]] = {"acme": set(), "globex": set()}
    for turn in range(4):
        for namespace in served:
            thread = {"thread_id": "1"}
            result = await router.route(
                "memo", str(turn), namespace=namespace, configurable=thread, strategy="rating"
            )
            assert result.payload == " / ".join(map(str, range(turn + 1)))
            served[namespace].add(result.agent_id)
    assert [len(agents) for agents in served.values()] == [1, 1]


async def test_a_threads_agent_serves_it_among_more_replicas_than_are_sampled(router: Router) -> None:
    """Above `sample_above` candidates a call screens a random few: a thread's own agent is
    screened whether drawn or not."""
    for instance in range(40):
        router.register(memo(f"chat:memo:{instance:02d}"))
    served = set()
    for turn in range(5):
        result = await router.route("memo", str(turn), configurable={"thread_id": "alice"})
        assert result.payload == " / ".join(map(str, range(turn + 1)))
        served.add(result.agent_id)
    assert len(served) == 1


async def test_a_thread_whose_agent_is_gone_goes_on_elsewhere(router: Router) -> None:
    router.register(memo("chat:memo:01"))
    router.register(memo("chat:memo:02"))
    first = await router.route("memo", "a", configurable={"thread_id": "alice"})
    assert first.agent_id is not None
    await router.deregister(first.agent_id)
    then = await router.route("memo", "b", configurable={"thread_id": "alice"})
    assert (then.status, then.payload) == (ResultStatus.OK, "b")
    assert then.agent_id != first.agent_id


def test_the_threads_remembered_are_bounded() -> None:
    affinity = ThreadAffinity(size=2)
    for thread in ("a", "b", "c"):
        meta = MetaInfo(capability="memo", configurable={"thread_id": thread})
        affinity.remember(meta, ReachResult(status=ResultStatus.OK, task_id="t", agent_id="chat:memo:01"))
    assert len(affinity) == 2
