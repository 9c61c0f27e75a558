"""Chains in config files (``kind: chain``): checked with the file and field named, served by a
real `reach serve` and called, explained and compensated over HTTP and with `reach compensate`."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import pytest

from reach_adapters.config import ConfigFileError, load_config
from tests.gateway.conftest import ReachServer, config_dir, run_reach, serve, write

__all__ = ["config_dir", "serve"]

PAY = """\
kind: function
agent_id: shop:pay:01
function: tests.chains.agents:charge
capabilities:
  - name: charge
    compensate_with: refund
"""
REFUND = "kind: function\nagent_id: shop:refund:01\nfunction: tests.chains.agents:refund\n"
SHIP = "kind: function\nagent_id: shop:ship:01\nfunction: tests.chains.agents:ship\n"
ORDER = """\
kind: chain
name: order
description: Charge the account, then ship.
input_schema:
  type: object
  properties: {account: {type: string}}
  required: [account]
steps:
  - id: pay
    capability: charge
    input: {account: $input.account, amount: 25}
  - id: ship
    capability: ship
    input: {account: $steps.pay.output.account}
output: {shipped: $steps.ship.output.shipped_to, charged: $steps.pay.output.charged}
"""


def load_error(directory: Path, text: str) -> str:
    write(directory, "chain:order:0.yaml", text)
    with pytest.raises(ConfigFileError) as caught:
        load_config(directory)
    return str(caught.value)


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            ("$steps.pay.output.account", "$steps.paid.output.account"),
            "names step 'paid', which the chain does not have",
        ),
        (("  - id: ship", "  - id: pay"), "step id 'pay' is also step 0's"),
        (
            ("input: {account: $input.account, amount: 25}", "input: {account: $steps.ship.output}"),
            "cycle: pay → ship → pay",
        ),
        (("    capability: ship\n", ""), "field 'steps.1.capability': missing; this field is required"),
        (("$input.account,", "$inpt.account,"), "is not a reference"),
    ],
)
def test_a_chain_file_is_checked_whole_naming_file_line_and_field(
    config_dir: Path, change: tuple[str, str], expected: str
) -> None:
    error = load_error(config_dir, ORDER.replace(*change))
    assert "chain:order:0.yaml" in error
    assert expected in error


def test_a_chain_file_is_named_after_its_agent(config_dir: Path) -> None:
    write(config_dir, "order.yaml", ORDER)
    with pytest.raises(ConfigFileError, match=r"rename the file to 'chain:order:0\.yaml'"):
        load_config(config_dir)


def test_a_chain_file_served_is_called_explained_and_compensated_over_http(
    serve: Callable[..., ReachServer], config_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ledger = tmp_path / "ledger.json"
    monkeypatch.setenv("REACH_TEST_LEDGER", str(ledger))
    for name, text in {
        "shop:pay:01.yaml": PAY,
        "shop:refund:01.yaml": REFUND,
        "shop:ship:01.yaml": SHIP,
        "chain:order:0.yaml": ORDER,
    }.items():
        write(config_dir, name, text)
    server = serve(config_dir)

    catalog = server.api("GET", "/catalog").json()
    assert "chain:order:0" in [agent["agent_id"] for agent in catalog]

    done = server.api("POST", "/route", json={"capability": "order", "payload": {"account": "ada"}}).json()
    assert done["status"] == "ok", done
    assert done["payload"] == {"shipped": "ada", "charged": 25}
    assert json.loads(ledger.read_text()) == {"ada": 25}
    record = server.api("GET", f"/explain/{done['task_id']}").json()
    assert record["steps"] == [f"{done['task_id']}/pay", f"{done['task_id']}/ship"]

    # The carrier refuses: the chain fails at its second step and its charge is refunded.
    failed = server.api(
        "POST", "/route", json={"capability": "order", "payload": {"account": "nowhere"}}
    ).json()
    assert failed["status"] == "error"
    assert failed["fault"] == "task"
    assert failed["extra"]["chain"]["failed"]["step"] == "ship"
    assert failed["extra"]["compensation"]["status"] == "compensated"
    assert json.loads(ledger.read_text()) == {"ada": 25, "nowhere": 0}

    # The finished chain undone on demand, over HTTP, then with the CLI: the second does nothing.
    undone = server.api("POST", f"/compensate/{done['task_id']}").json()
    assert undone["status"] == "compensated"
    assert json.loads(ledger.read_text()) == {"ada": 0, "nowhere": 0}
    again = run_reach("compensate", done["task_id"], "--url", server.url)
    assert again.returncode == 0, again.stderr
    assert "already compensated" in again.stdout
    assert json.loads(ledger.read_text()) == {"ada": 0, "nowhere": 0}
    explained = run_reach("explain", failed["task_id"], "--url", server.url)
    assert f"step      {failed['task_id']}/ship" in explained.stdout
    assert f"undo      {failed['task_id']}/pay with refund: undone" in explained.stdout
    unknown = server.api("POST", "/compensate/no-such-task")
    assert unknown.status_code == 404
    assert "nothing to compensate" in unknown.json()["error"]
