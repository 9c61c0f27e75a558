"""Compensation: a failed chain undoes its compensable steps newest first, checked by their side
effects on a real MCP server's ledger and a function's accounts; `compensate` on demand, twice."""

from __future__ import annotations

from typing import Any

import pytest

from middleware import MetaInfo, ReachMessage, ResultStatus
from reach_adapters import (
    Capability,
    Chain,
    FunctionAgent,
    Router,
    RoutingPolicy,
    Step,
    UnknownTaskError,
)
from reach_adapters.router.guard import Refusal
from tests.chains.agents import Ledger, extra

FAST = RoutingPolicy(backoff_ms=0.0, jitter_ms=0.0)


class Accounts:
    """A payment agent: ``charge`` (undone by ``refund``, which it also declares)."""

    def __init__(self) -> None:
        self.balance: dict[str, int] = {}
        self.refunds: list[str] = []

        async def work(message: ReachMessage) -> Any:
            payload: Any = message.raw_payload
            if message.meta_info.capability == "charge":
                self.balance[payload["account"]] = self.balance.get(payload["account"], 0) + payload["amount"]
                return {"account": payload["account"], "charged": payload["amount"]}
            charged = payload["output"]
            self.balance[charged["account"]] -= charged["charged"]
            self.refunds.append(payload["task_id"])
            return {"refunded": charged["charged"]}

        self.agent = FunctionAgent(
            work,
            agent_id="pay:accounts:01",
            capabilities=[Capability(name="charge", compensate_with="refund"), Capability(name="refund")],
        )


def carrier(fail: bool) -> FunctionAgent:
    async def ship(item: str) -> dict[str, str]:
        if fail:
            msg = "no carrier today"
            raise ValueError(msg)
        return {"shipped": item}

    return FunctionAgent(ship, agent_id="post:carrier:01")


ORDER = Chain(
    name="order",
    steps=[
        Step("reserve", "reserve", input={"item": "$input.item"}),
        Step("charge", "charge", input={"account": "$input.account", "amount": 30}, after=["reserve"]),
        Step("ship", "ship", input={"item": "$input.item"}, after=["charge"]),
    ],
)


async def test_a_chain_whose_third_step_fails_undoes_the_first_two_newest_first() -> None:
    ledger, accounts = Ledger(), Accounts()
    async with Router(FAST) as router:
        router.register(await ledger.agent())
        router.register(accounts.agent)
        router.register(carrier(fail=True))
        router.add_chain(ORDER)

        result = await router.route("order", {"item": "kayak", "account": "ada"})

        assert result.status is ResultStatus.ERROR
        assert extra(result)["chain"]["failed"]["step"] == "ship"
        # The side effects are gone: the reservation released, the charge refunded.
        assert ledger.entries == {}
        assert ledger.released == ["ledger-1"]
        assert accounts.balance == {"ada": 0}
        report = extra(result)["compensation"]
        assert report["status"] == "compensated"
        undone = report["undone"]
        assert [item["task_id"] for item in undone] == [
            f"{result.task_id}/charge",
            f"{result.task_id}/reserve",
        ]
        # Each undo asked the agent that did the work: it declares the compensating capability.
        assert [item["agent_id"] for item in undone] == ["pay:accounts:01", "mcp:ledger:0"]
        assert report["not_undone"] == []
        # The error says it too, for callers that read only the message (a CLI, an MCP client).
        assert result.error is not None
        assert result.error.endswith("; undone: " + ", ".join(item["capability"] for item in undone))
        record = router.explain(result.task_id).to_dict()
        assert [item["task_id"] for item in record["compensations"]] == [item["task_id"] for item in undone]
        # Compensating the failed chain again does nothing, and says so.
        again: Any = await router.compensate(result.task_id)
        assert again["status"] == "already_compensated"
        assert len(again["already_undone"]) == 2
        assert ledger.release_calls == 1
        assert accounts.refunds == [f"{result.task_id}/charge"]


async def test_compensate_a_finished_chain_on_demand_and_a_second_time_does_nothing() -> None:
    ledger, accounts = Ledger(), Accounts()
    async with Router(FAST) as router:
        router.register(await ledger.agent())
        router.register(accounts.agent)
        router.register(carrier(fail=False))
        router.add_chain(ORDER)
        result = await router.route("order", {"item": "canoe", "account": "bob"})
        assert result.status is ResultStatus.OK, result.error
        assert ledger.entries == {"ledger-1": "canoe"}
        assert accounts.balance == {"bob": 30}

        report: Any = await router.compensate(result.task_id)

        assert report["status"] == "compensated"
        assert report["task_id"] == result.task_id
        assert ledger.entries == {}
        assert accounts.balance == {"bob": 0}
        second: Any = await router.compensate(result.task_id)
        assert second["status"] == "already_compensated"
        assert second["undone"] == []
        assert ledger.release_calls == 1
        assert accounts.balance == {"bob": 0}


async def test_compensate_one_finished_task_and_unknown_ones_are_refused() -> None:
    ledger = Ledger()
    async with Router(FAST) as router:
        router.register(await ledger.agent())
        reserved = await router.route("reserve", {"item": "tent"})
        assert ledger.entries == {"ledger-1": "tent"}
        report: Any = await router.compensate(reserved.task_id)
        assert report["status"] == "compensated"
        assert ledger.entries == {}
        assert (await router.compensate(reserved.task_id))["status"] == "already_compensated"
        assert ledger.release_calls == 1
        with pytest.raises(UnknownTaskError, match="nothing to compensate"):
            await router.compensate("no-such-task")
        # A capability that names no undo leaves nothing to compensate.
        undo = await router.route(
            "release", {"task_id": "t", "capability": "c", "input": {}, "output": {"reservation": "x"}}
        )
        with pytest.raises(UnknownTaskError):
            await router.compensate(undo.task_id)


async def test_a_transient_failure_of_an_undo_is_retried_an_answered_no_is_reported() -> None:
    undo_calls: list[str] = []

    async def flaky_undo(payload: dict[str, Any]) -> str:
        undo_calls.append(payload["task_id"])
        # More failures than the router's own retries within one reach: the undo is tried again.
        if len(undo_calls) <= FAST.max_retries + 1:
            msg = "connection reset"
            raise ConnectionError(msg)
        return "undone"

    async def stubborn_undo(payload: dict[str, Any]) -> str:
        msg = "this cannot be undone"
        raise ValueError(msg)

    async def work(payload: dict[str, Any]) -> str:
        return "done"

    async with Router(FAST) as router:
        router.register(
            FunctionAgent(
                work, agent_id="w:a:01", capabilities=[Capability(name="a", compensate_with="undo_a")]
            )
        )
        router.register(
            FunctionAgent(
                work, agent_id="w:b:01", capabilities=[Capability(name="b", compensate_with="undo_b")]
            )
        )
        router.register(
            FunctionAgent(
                flaky_undo,
                agent_id="w:undo-a:01",
                # Safe to repeat: only then is an undo that may have been made tried again.
                capabilities=[Capability(name="undo_a", idempotent=True)],
            )
        )
        router.register(
            FunctionAgent(stubborn_undo, agent_id="w:undo-b:01", capabilities=[Capability(name="undo_b")])
        )
        router.add_chain(
            Chain(name="ab", steps=[Step("a", "a", input={}), Step("b", "b", input={}, after=["a"])])
        )
        done = await router.route("ab", {})
        report: Any = await router.compensate(done.task_id)

        assert report["status"] == "incomplete"
        (undone,) = report["undone"]
        assert undone["task_id"] == f"{done.task_id}/a"
        assert undone["attempts"] == [f"{done.task_id}/a/undo", f"{done.task_id}/a/undo-2"]
        (failed,) = report["not_undone"]
        # An error that would not pass is not tried again.
        assert failed["task_id"] == f"{done.task_id}/b"
        assert failed["error"] == "this cannot be undone"
        assert failed["fault"] == "agent"
        assert len(failed["attempts"]) == 1
        # Asked again, what could not be undone is tried again; what was undone is left alone.
        again: Any = await router.compensate(done.task_id)
        assert again["status"] == "incomplete"
        assert [item["task_id"] for item in again["already_undone"]] == [f"{done.task_id}/a"]
        assert len(undo_calls) == FAST.max_retries + 2


async def test_the_agent_that_did_the_work_undoes_it() -> None:
    first, second = Ledger("ledger-a"), Ledger("ledger-b")
    async with Router(FAST) as router:
        router.register(await first.agent())
        router.register(await second.agent())
        agents = ["mcp:ledger-a:0", "mcp:ledger-b:0"] * 3
        tasks = [
            (await router.send(agent, {"item": "oar"}, capability="reserve")).task_id for agent in agents
        ]
        assert len(first.entries) == len(second.entries) == 3
        for task_id in tasks:
            assert (await router.compensate(task_id))["status"] == "compensated"
        # Each replica released exactly its own: asked elsewhere, the other would not know the id.
        assert first.entries == second.entries == {}
        assert first.release_calls + second.release_calls == len(tasks)


class OwnTasks:
    """A guard that lets everyone call anything and lets only ``admin`` see others' tasks."""

    async def admit(self, message: ReachMessage, calling_agent: str | None) -> Refusal | None:
        return None

    def forbids(self, principal: str, capability: str, agent_id: str, namespace: str) -> str | None:
        return None

    async def fan_out(self, principal: str, targets: int) -> Refusal | None:
        return None

    def sees_all(self, principal: str) -> bool:
        return principal == "admin"

    def hop_token(self, meta: MetaInfo, agent_id: str, target: str) -> str | None:
        return None


async def test_a_principal_compensates_only_its_own_tasks() -> None:
    ledger = Ledger()
    async with Router(FAST, guard=OwnTasks()) as router:
        router.register(await ledger.agent())
        alices = await router.route("reserve", {"item": "sled"}, principal="alice")
        with pytest.raises(UnknownTaskError):
            await router.compensate(alices.task_id, principal="bob")
        assert ledger.entries
        assert (await router.compensate(alices.task_id, principal="alice"))["status"] == "compensated"
        assert ledger.entries == {}
        assert (await router.compensate(alices.task_id, principal="admin"))["status"] == "already_compensated"


async def test_the_journal_keeps_the_latest_tasks_only() -> None:
    ledger = Ledger()
    async with Router(FAST.model_copy(update={"compensation_journal_size": 1})) as router:
        router.register(await ledger.agent())
        older = await router.route("reserve", {"item": "rope"})
        newer = await router.route("reserve", {"item": "pitons"})
        with pytest.raises(UnknownTaskError, match="compensation_journal_size"):
            await router.compensate(older.task_id)
        assert (await router.compensate(newer.task_id))["status"] == "compensated"
        assert ledger.entries == {"ledger-1": "rope"}
