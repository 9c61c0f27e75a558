"""A chain as a saga: draft -> reserve stock -> charge -> ship. Reserving and charging can be
undone (`compensate_with`); when shipping fails the router undoes them, newest first, and the
shop's ledger shows it. A chain that succeeded is undone later on demand: `router.compensate`."""

from __future__ import annotations

from typing import Any

from reach_adapters import Capability, Chain, FunctionAgent, Router, Step

# The shop's state: what the compensable steps change and their undos put back.
LEDGER: dict[str, int] = {"kettles_in_stock": 5, "balance_eur": 0}
# What the shop did, in order: shows that the work was done before it was undone, newest first.
HISTORY: list[str] = []
PRICE = 40
ORDER = {"type": "object", "properties": {"item": {"type": "string"}, "city": {"type": "string"}}}


def draft(item: str, city: str) -> dict[str, Any]:
    """Write the order down."""
    return {"item": item, "city": city, "price": PRICE}


def reserve(item: str) -> dict[str, Any]:
    """Take the item out of stock: a change the chain may have to undo."""
    LEDGER["kettles_in_stock"] -= 1
    HISTORY.append("stock -1")
    return {"reserved": item}


def release(payload: dict[str, Any]) -> str:
    """The undo of `reserve`: it gets the reserve call's task id, capability, input and output."""
    LEDGER["kettles_in_stock"] += 1
    HISTORY.append("stock +1")
    return f"released {payload['output']['reserved']}"


def charge(amount: int) -> dict[str, Any]:
    """Take the customer's money: undone by `refund`."""
    LEDGER["balance_eur"] += amount
    HISTORY.append(f"balance +{amount}")
    return {"charged": amount}


def refund(payload: dict[str, Any]) -> str:
    """The undo of `charge`: it pays back what the charge's output says was taken."""
    LEDGER["balance_eur"] -= payload["output"]["charged"]
    HISTORY.append(f"balance -{payload['output']['charged']}")
    return f"refunded {payload['output']['charged']} EUR"


def ship(city: str) -> dict[str, Any]:
    """Hand the parcel to a courier; fails for a city no courier reaches, after the charge."""
    if city == "Atlantis":
        msg = "no courier delivers to Atlantis"
        raise ValueError(msg)
    return {"shipped_to": city}


def shop() -> list[FunctionAgent]:
    reserve_cap = Capability(name="reserve_stock", compensate_with="release_stock")
    charge_cap = Capability(name="charge", compensate_with="refund")
    release_cap = Capability(name="release_stock", description="Put a reserved item back in stock.")
    return [
        FunctionAgent(draft, agent_id="shop:orders:01"),
        FunctionAgent(reserve, agent_id="shop:stock:01", capabilities=[reserve_cap]),
        FunctionAgent(release, agent_id="shop:stock-undo:01", capabilities=[release_cap]),
        FunctionAgent(charge, agent_id="shop:pay:01", capabilities=[charge_cap]),
        FunctionAgent(
            refund,
            agent_id="shop:pay-undo:01",
            capabilities=[Capability(name="refund", description="Pay a charge back.")],
        ),
        FunctionAgent(ship, agent_id="shop:courier:01"),
    ]


ORDER_KETTLE = Chain(
    name="order_kettle",
    description="Draft an order, reserve the kettle, charge for it and ship it.",
    input_schema=ORDER,
    steps=[
        Step("draft", "draft", input={"item": "$input.item", "city": "$input.city"}),
        Step("reserve", "reserve_stock", input={"item": "$steps.draft.output.item"}),
        Step("charge", "charge", input={"amount": "$steps.draft.output.price"}, after=["reserve"]),
        Step("ship", "ship", input={"city": "$steps.draft.output.city"}, after=["charge"]),
    ],
)


def _json(value: object) -> dict[str, Any]:
    """A JSON object of a result's `extra`, typed for reading."""
    assert isinstance(value, dict)
    return value


def _undone(report: dict[str, Any]) -> None:
    """What the compensation report says, then what the shop's ledger went through."""
    print(f"  compensation: {report['status']}")
    for undo in report["undone"]:
        print(f"    undone {undo['capability']} with {undo['compensate_with']} ({undo['status']})")
    for left in report["not_undone"]:
        print(f"    NOT undone {left['capability']}: {left['error']}")
    print(f"  ledger moves: {', '.join(HISTORY)}")
    print(f"  ledger after:  {LEDGER}")
    HISTORY.clear()


async def saga() -> None:
    async with Router() as router:
        for agent in shop():
            router.register(agent)
        router.add_chain(ORDER_KETTLE)
        print(f"  ledger before: {LEDGER}")

        failed = await router.route("order_kettle", {"item": "kettle", "city": "Atlantis"})
        print(f"  order to Atlantis: {failed.status} ({failed.error})")
        print(
            "  steps: "
            + ", ".join(f"{s['step']} {s['status']}" for s in _json(failed.extra["chain"])["steps"])
        )
        _undone(_json(failed.extra["compensation"]))

        shipped = await router.route("order_kettle", {"item": "kettle", "city": "Lyon"})
        print(f"  order to Lyon: {shipped.status} -> {shipped.payload} (ledger {LEDGER})")
        print("  the customer cancels: router.compensate(task_id)")
        _undone(await router.compensate(shipped.task_id))
