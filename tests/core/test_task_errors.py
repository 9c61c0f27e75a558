"""`TaskError`: an agent saying the task failed, not itself (a tool's "order 7 not found"): the
task's fault, after the agent ran, with the cause's type and its text masked as any agent error's."""

from __future__ import annotations

import uuid

import pytest

from middleware import Fault, ResultStatus
from reach_adapters import FunctionAgent, Router, RoutingPolicy, TaskError

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("expose", [True, False])
async def test_a_task_error_is_the_tasks_after_the_agent_ran(expose: bool) -> None:
    charged: list[str] = []

    async def pay(order: str) -> str:
        """Charge the order, then look its receipt up."""
        charged.append(order)
        try:
            raise LookupError(f"receipt {order} not found at postgres://app:hunter2@db/orders")
        except LookupError as exc:
            raise TaskError from exc

    async with Router(policy=RoutingPolicy(expose_agent_errors=expose)) as router:
        for instance in ("a", "b"):
            router.register(FunctionAgent(pay, agent_id=f"shop:pay:{instance}"))
        task_id = str(uuid.uuid4())
        first = await router.route("pay", {"order": "7"}, task_id=task_id)
        again = await router.route("pay", {"order": "7"}, task_id=task_id)
    assert (first.status, first.fault, first.error_type) == (ResultStatus.ERROR, Fault.TASK, "LookupError")
    # It ran: delivered, not tried on the replica, and the same task id is not run again.
    assert first.delivered
    assert charged == ["7"]
    assert (again.status, again.fault) == (first.status, first.fault)
    assert "hunter2" not in (first.error or "")
    assert (first.error or "").startswith("receipt 7 not found" if expose else "agent error (reference ")


async def test_a_task_error_without_a_cause_is_itself(router: Router) -> None:
    async def lookup(order: str) -> str:
        """Look an order up."""
        raise TaskError(f"order {order} not found")

    router.register(FunctionAgent(lookup, agent_id="shop:lookup:01"))
    result = await router.route("lookup", {"order": "7"})
    assert (result.fault, result.error_type, result.error) == (Fault.TASK, "TaskError", "order 7 not found")
