"""The teamwork demo runs offline and shows what it promises: a consensus outvoting the wrong
agent, a failed chain undone (the ledger back to where it started), a deferred call answered."""

from __future__ import annotations

import re

import pytest

from tests.demos import assert_it_names_the_install, run_demo

pytestmark = pytest.mark.timeout(120)
LEDGER = "{'kettles_in_stock': 5, 'balance_eur': 0}"


def test_the_teamwork_demo_runs() -> None:
    out = run_demo("examples.teamwork")

    assert "voters: geo:table:01, geo:llm:01, mcp:atlas:0" in out
    assert "decision: 'Paris' [ok]" in out
    lines = re.findall(r"^  vote (\S+) +'(\w+)' +(agreed|dissented)$", out, re.MULTILINE)
    votes = {agent: (answer, verdict) for agent, answer, verdict in lines}
    assert votes == {
        "geo:table:01": ("Paris", "agreed"),
        "mcp:atlas:0": ("Paris", "agreed"),
        "geo:llm:01": ("Lyon", "dissented"),
    }
    assert "feedback 1.0 on the task rates the voters that agreed: " in out
    assert "catalog: geo:llm:01 is now rated 0.80 for capital" in out

    saga = out.split("== 2.")[1].split("== 3.")[0]
    assert f"ledger before: {LEDGER}" in saga
    assert "order to Atlantis: error (chain 'order_kettle': step 'ship'" in saga
    assert "no courier delivers to Atlantis" in saga
    assert "steps: draft ok, reserve ok, charge ok, ship error" in saga
    undone = "    undone charge with refund (undone)\n    undone reserve_stock with release_stock (undone)\n"
    before_cancel, on_demand = saga.split("the customer cancels: router.compensate(task_id)")
    moves = "  ledger moves: stock -1, balance +40, balance -40, stock +1\n"
    assert f"compensation: compensated\n{undone}{moves}  ledger after:  {LEDGER}" in before_cancel
    shipped = (
        "order to Lyon: ok -> {'shipped_to': 'Lyon'} (ledger {'kettles_in_stock': 4, 'balance_eur': 40})"
    )
    assert shipped in before_cancel
    assert f"compensation: compensated\n{undone}{moves}  ledger after:  {LEDGER}" in on_demand

    assert "route('translate', defer=True) is waiting: 1 call deferred" in out
    assert "answered: 'hello' by lang:translator:01 [ok]" in out
    assert re.search(r"explain: deferred, waited \d+\.\d s for an agent", out)


@pytest.mark.parametrize("missing", ["langchain_core", "mcp"])
def test_the_teamwork_demo_says_what_to_install(missing: str) -> None:
    assert_it_names_the_install("examples.teamwork", missing)
