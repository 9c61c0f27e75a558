"""Chains and compensation at their edges: a chain that runs out of time, chains run as steps of
chains, undos that may have been made already, two compensations of one task at once, mistakes
of a chain's author, and the task ids derived from a parent's."""

from __future__ import annotations

import asyncio
from functools import partial
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
from reach_adapters.router.chains.calls import _ChainRecords
from reach_adapters.router.messages import MAX_TASK_ID_LENGTH, derived_task_id
from tests.chains.agents import extra
from tests.waiting import eventually

FAST = RoutingPolicy(backoff_ms=0.0, jitter_ms=0.0)
ACCOUNT_IN = {"type": "object", "properties": {"account": {"type": "string"}}, "required": ["account"]}


class Bank:
    """``charge`` (undone by ``refund``, another agent's), with the accounts to check."""

    def __init__(self) -> None:
        self.balance: dict[str, int] = {}
        self.refunds: list[str] = []

    def charge(self, account: str, amount: int) -> dict[str, Any]:
        self.balance[account] = self.balance.get(account, 0) + amount
        return {"account": account, "charged": amount}

    def refund(self, task_id: str, capability: str, input: Any, output: dict[str, Any]) -> dict[str, Any]:
        self.balance[output["account"]] -= output["charged"]
        self.refunds.append(task_id)
        return {"refunded": output["charged"]}

    def register(self, router: Router) -> None:
        router.register(
            FunctionAgent(
                self.charge,
                agent_id="pay:charge:01",
                capabilities=[Capability(name="charge", compensate_with="refund")],
            )
        )
        router.register(
            FunctionAgent(self.refund, agent_id="pay:refund:01", capabilities=[Capability(name="refund")])
        )


async def test_a_chain_out_of_time_answers_timeout_its_own_fault_task_with_its_steps_and_undo() -> None:
    bank, hold = Bank(), asyncio.Event()

    async def slow(account: str) -> dict[str, Any]:
        await hold.wait()
        return {"shipped": account}

    async with Router(FAST) as router:
        bank.register(router)
        router.register(FunctionAgent(slow, agent_id="ship:slow:01", capabilities=[Capability(name="ship")]))
        router.add_chain(
            Chain(
                name="late",
                timeout_ms=600,
                steps=[
                    Step("c", "charge", input={"account": "$input.account", "amount": 3}),
                    Step("s", "ship", input={"account": "$input.account"}, after=["c"]),
                ],
            )
        )
        for account in ("ada", "bob"):
            result = await router.route("late", {"account": account})
            assert result.status is ResultStatus.TIMEOUT
            # The chain ran; its step was late: the chain's own answer, not the router's timeout.
            assert result.fault is Fault.TASK
            assert result.agent_id == "chain:late:0"
            chain = extra(result)["chain"]
            assert [step["step"] for step in chain["steps"]] == ["c", "s"]
            assert (chain["failed"]["step"], chain["failed"]["status"]) == ("s", "timeout")
            # The late step's agent answers for its timeout.
            assert chain["failed"]["fault"] == "agent"
            report = extra(result)["compensation"]
            assert report["status"] in ("compensated", "undoing")
            record = router.explain(result.task_id)
            assert record.steps == [f"{result.task_id}/c", f"{result.task_id}/s"]
            # Asked now, compensation waits for the undo under way and says how it ended.
            again: Any = await router.compensate(result.task_id)
            assert again["status"] == "already_compensated"
            assert bank.balance[account] == 0
        # Two failures in a row: the slow agent's breaker opens, the chain's stays closed.
        info = {agent.agent_id: agent for agent in router.catalog()}
        assert info["chain:late:0"].breaker is BreakerState.CLOSED
        assert info["chain:late:0"].failures == 0
        assert info["ship:slow:01"].breaker is BreakerState.OPEN
        hold.set()


async def test_a_chain_run_as_a_step_of_another_is_undone_with_it() -> None:
    bank = Bank()

    def ship(account: str) -> dict[str, Any]:
        msg = "no carrier today"
        raise ValueError(msg)

    async with Router(FAST) as router:
        bank.register(router)
        router.register(FunctionAgent(ship, agent_id="ship:fail:01"))
        router.add_chain(
            Chain(name="pay", steps=[Step("c", "charge", input={"account": "$input.account", "amount": 10})])
        )
        router.add_chain(
            Chain(
                name="order",
                steps=[
                    Step("pay", "pay", input={"account": "$input.account"}),
                    Step("ship", "ship", input={"account": "$input.account"}, after=["pay"]),
                ],
            )
        )
        result = await router.route("order", {"account": "ada"})

        assert result.status is ResultStatus.ERROR
        report = extra(result)["compensation"]
        assert report["status"] == "compensated"
        assert [item["task_id"] for item in report["undone"]] == [f"{result.task_id}/pay/c"]
        assert bank.balance == {"ada": 0}
        # The inner chain's own record knows it was undone: compensating it does nothing more.
        inner: Any = await router.compensate(f"{result.task_id}/pay")
        assert inner["status"] == "already_compensated"
        assert bank.refunds == [f"{result.task_id}/pay/c"]


async def test_an_undo_that_may_have_been_made_is_not_tried_again_unless_safe_to_repeat() -> None:
    calls: list[str] = []

    def charge(account: str) -> dict[str, Any]:
        return {"account": account}

    def refund(task_id: str, capability: str, input: Any, output: Any) -> Any:
        calls.append(task_id)
        msg = "lost the bank's reply"  # after the refund was made
        raise ConnectionResetError(msg)

    async with Router(FAST) as router:
        for name, undo in (("charge", "refund"), ("book", "unbook")):
            router.register(
                FunctionAgent(
                    charge,
                    agent_id=f"pay:{name}:01",
                    capabilities=[Capability(name=name, compensate_with=undo)],
                )
            )
        router.register(
            FunctionAgent(refund, agent_id="pay:refund:01", capabilities=[Capability(name="refund")])
        )
        charged = await router.route("charge", {"account": "ada"})

        report: Any = await router.compensate(charged.task_id)

        (failed,) = report["not_undone"]
        # One reach of the undo, and only the router's own retries within it: none, the refund
        # may have been made.
        assert failed["attempts"] == [f"{charged.task_id}/undo"]
        assert len(calls) == len(router.explain(f"{charged.task_id}/undo").attempts) == 1
        # An undo that reached no agent (none declares it) was not made: it is tried again.
        booked = await router.route("book", {"account": "bob"})
        missing: Any = await router.compensate(booked.task_id)
        (unmade,) = missing["not_undone"]
        assert unmade["fault"] == "router"
        assert len(unmade["attempts"]) == FAST.max_retries + 1


def _has(calls: list[str], count: int) -> bool:
    return len(calls) == count


async def test_two_compensations_of_one_task_at_once_both_report_how_the_undo_ended() -> None:
    calls: list[str] = []
    gate = asyncio.Event()

    def work(account: str) -> dict[str, Any]:
        return {"account": account}

    async def undo(task_id: str, capability: str, input: Any, output: Any) -> Any:
        calls.append(task_id)
        await gate.wait()
        if output["account"] == "nobody":
            msg = "refund desk says no"
            raise PermissionError(msg)
        return {"undone": True}

    async with Router(FAST) as router:
        router.register(
            FunctionAgent(
                work, agent_id="w:work:01", capabilities=[Capability(name="work", compensate_with="undo")]
            )
        )
        router.register(FunctionAgent(undo, agent_id="w:undo:01", capabilities=[Capability(name="undo")]))
        for account, ending, reaches in (("nobody", "incomplete", 1), ("ada", "compensated", 2)):
            done = await router.route("work", {"account": account})
            first = asyncio.ensure_future(router.compensate(done.task_id))
            second = asyncio.ensure_future(router.compensate(done.task_id))
            await eventually(partial(_has, calls, reaches), what="the undo under way")
            gate.set()
            a: Any = await first
            b: Any = await second
            gate.clear()
            assert a["status"] == ending
            if ending == "incomplete":
                # The second call waited for the first's undo and reports its failure, not success.
                assert b["status"] == "incomplete"
                assert b["not_undone"] == a["not_undone"]
            else:
                assert b["status"] == "already_compensated"
                assert b["already_undone"] == a["undone"]
        # One undo reach per compensation in progress, none for the one waiting.
        assert len(calls) == 2


async def test_mistakes_in_a_chains_declaration_are_its_authors() -> None:
    # An unknown strategy is refused when the chain is declared, not blamed on its callers.
    with pytest.raises(InvalidDeclarationError, match="step 'n': field 'strategy'"):
        Chain(name="c", steps=[Step("n", "noop", strategy="nope")])

    def noop(account: str) -> dict[str, Any]:
        return {"ok": account}

    async with Router(FAST) as router:
        router.register(
            FunctionAgent(
                noop,
                agent_id="misc:strict:01",
                capabilities=[Capability(name="strict", input_schema=ACCOUNT_IN)],
            )
        )
        router.add_chain(Chain(name="literal", steps=[Step("s", "strict", input={"account": 42})]))
        router.add_chain(
            Chain(name="mixed", steps=[Step("s", "strict", input={"account": "$input.who", "note": 1})])
        )
        router.add_chain(Chain(name="fed", steps=[Step("s", "strict", input={"account": "$input.who"})]))
        # A literal the chain's author wrote broke the step's schema: the chain's fault.
        literal = await router.route("literal", {"who": "ada"})
        assert (literal.status, literal.fault) == (ResultStatus.ERROR, Fault.TASK)
        assert extra(literal)["chain"]["failed"]["fault"] == "caller"
        # Part of it the caller's, part the author's: the caller is not blamed.
        mixed = await router.route("mixed", {"who": 7})
        assert (mixed.status, mixed.fault) == (ResultStatus.ERROR, Fault.TASK)
        # Made wholly from the caller's input: the caller's.
        fed = await router.route("fed", {"who": 7})
        assert (fed.status, fed.fault) == (ResultStatus.INVALID, Fault.CALLER)


def test_task_ids_derived_from_a_parent_stay_within_the_limit_and_readable_when_they_can() -> None:
    assert derived_task_id("order-1", "undo") == "order-1/undo"
    long = "t" * 125
    derived = derived_task_id(long, "judge")
    assert len(derived) <= MAX_TASK_ID_LENGTH
    assert derived.endswith("/judge")
    # The same parent gives the same id: a repeat is recognised by the idempotency window.
    assert derived_task_id(long, "judge") == derived
    assert derived_task_id(long + "x", "judge") != derived
    assert len(derived_task_id("p", "s" * 200)) <= MAX_TASK_ID_LENGTH


async def test_reaches_pay_for_chains_only_once_a_chain_runs() -> None:
    def echo(account: str) -> dict[str, Any]:
        return {"account": account}

    async with Router(FAST) as router:
        router.register(FunctionAgent(echo, agent_id="u:echo:01"))
        router.add_chain(Chain(name="echoed", steps=[Step("e", "echo")]))
        await router.route("echo", {"account": "ada"})

        def watching() -> bool:
            return any(isinstance(observer, _ChainRecords) for observer in router._dispatcher.observers)

        assert not watching()
        result = await router.route("echoed", {"account": "ada"})
        assert watching()
        assert router.explain(result.task_id).steps == [f"{result.task_id}/e"]
