"""The answer of a task retried on other agents: a try the router itself could not deliver (the
agent busy, say) says less than the failure before it, which stays the answer; a try that
reached its agent is the answer, whoever's fault it is."""

from __future__ import annotations

from typing import Any

from middleware import Fault, ReachMessage, ReachResult, ResultStatus
from reach_adapters import AgentBusyError, Capability, FunctionAgent, Router
from reach_adapters.router import error_result
from tests.core.conftest import FAST, Down, failing_agent

ONE_RETRY = FAST.model_copy(update={"max_retries": 1})


class Refused(ConnectionError):
    """A connection refused: the agent never had the task."""

    delivered = False


class Relayed:
    """An agent behind another router, whose own agent failed there: the router's fault, after
    the task was delivered."""

    agent_id = "svc:book:02"
    capabilities = (Capability(name="book", idempotent=True, weight=1),)

    async def invoke(self, message: ReachMessage) -> ReachResult:
        return error_result(
            message,
            ResultStatus.ERROR,
            "Relayed",
            "its agent failed",
            fault=Fault.ROUTER,
            retryable=True,
            delivered=True,
        )


async def test_a_busy_retry_leaves_the_failure_before_it_the_answer() -> None:
    router = Router(ONE_RETRY)
    router.register(
        failing_agent("svc:book:01", Down("reset"), capability="book", idempotent=True, weight=100)
    )
    router.register(
        failing_agent("svc:book:02", AgentBusyError("no room"), capability="book", idempotent=True)
    )

    result = await router.route("book", {})

    assert (result.agent_id, result.fault, result.error_type) == ("svc:book:01", Fault.AGENT, "Down"), (
        result.error
    )
    assert len(router.explain(result.task_id).attempts) == 2


async def test_a_retry_that_reached_its_agent_is_the_answer_whatever_its_fault() -> None:
    router = Router(ONE_RETRY)
    router.register(
        failing_agent("svc:book:01", Refused("refused"), capability="book", idempotent=True, weight=100)
    )
    router.register(Relayed())

    result = await router.route("book", {})

    assert (result.agent_id, result.fault, result.delivered) == ("svc:book:02", Fault.ROUTER, True), (
        result.error
    )


async def test_a_busy_fallback_leaves_the_failure_before_it_the_answer() -> None:
    router = Router(FAST)
    router.register(failing_agent("svc:book:01", Down("reset"), capability="book"))

    async def spare(payload: Any) -> Any:
        msg = "no room"
        raise AgentBusyError(msg)

    router.register(FunctionAgent(spare, agent_id="svc:spare:02", capabilities=[Capability(name="spare")]))

    result = await router.route("book", {}, fallback=["svc:spare:02"])

    assert (result.agent_id, result.fault, result.error_type) == ("svc:book:01", Fault.AGENT, "Down"), (
        result.error
    )
