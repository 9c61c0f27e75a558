"""Whose fault a reach server's failure is, read by a reach client over the A2A hop as over MCP:
the server's agent failing is that router's to judge, so its gateway is not quarantined here."""

from __future__ import annotations

import asyncio

import pytest

from middleware import Fault, ResultStatus
from reach_adapters import BreakerState, Capability, FunctionAgent, Router
from reach_adapters.a2a import A2AAgent
from tests.a2a_serve.agents import TEXT_IN, shout
from tests.a2a_serve.conftest import Serve

pytestmark = pytest.mark.timeout(60)


def failing(name: str, exc: Exception, calls: list[str]) -> FunctionAgent:
    """``far:<name>:01``: its capability `name` raises `exc`, each call's text added to `calls`."""

    def run(text: str) -> str:
        calls.append(text)
        raise exc

    capability = Capability(name=name, description=f"fails with {type(exc).__name__}", input_schema=TEXT_IN)
    return FunctionAgent(run, agent_id=f"far:{name}:01", capabilities=[capability])


async def test_an_agent_failing_behind_a_reach_server_is_that_routers_not_the_gateways(served: Serve) -> None:
    server = await served()
    far = server.gateway.router
    broken_calls: list[str] = []
    flaky_calls: list[str] = []
    far.register(failing("broken", RuntimeError("bug far away"), broken_calls))
    far.register(failing("flaky", ConnectionResetError("reset far away"), flaky_calls))
    far.register(shout())
    async with Router() as near, asyncio.timeout(30):
        agent = await A2AAgent.connect(server.url)
        near.register(agent)
        broken = [await near.route("broken", {"text": f"b{index}"}) for index in range(3)]
        # Another replica of the gateway is there, but the work may have been done over there.
        near.register(await A2AAgent.connect(server.url, options={"instance": "2"}))
        flaky = await near.route("flaky", {"text": "f"})
        [info] = [each for each in near.catalog() if each.agent_id == agent.agent_id]
        shouted = await near.send(agent.agent_id, {"text": "still here"}, capability="shout")
    for result in broken:
        assert (result.status, result.fault, result.error_type) == (
            ResultStatus.ERROR,
            Fault.ROUTER,
            "RuntimeError",
        )
        assert (result.delivered, result.retryable) == (True, False)
    # Far's agent is quarantined there; the gateway itself stays healthy here.
    assert [each.breaker for each in far.catalog() if each.agent_id == "far:broken:01"] == [BreakerState.OPEN]
    assert (info.breaker, info.failures) == (BreakerState.CLOSED, 0)
    assert shouted.payload == "STILL HERE", shouted.error
    # Far says another agent might get past it, and that its agent had the task: not re-sent here.
    assert (flaky.fault, flaky.retryable, flaky.delivered) == (Fault.ROUTER, True, True)
    assert flaky_calls == ["f"]
    assert len(near.explain(flaky.task_id).attempts) == 1
