"""An A2A agent in another process: it dies, goes OFFLINE, and is back once its card answers."""

from __future__ import annotations

from reach_adapters import Router
from reach_adapters.a2a import A2AAgent
from tests.a2a.conftest import AgentProcess
from tests.waiting import eventually


def _state(router: Router) -> str:
    return router.catalog()[0].state.value


async def test_a_dead_agent_goes_offline_and_comes_back(agent_process: AgentProcess, router: Router) -> None:
    options = {"reprobe": {"initial_delay_s": 0.05, "max_delay_s": 0.2, "jitter_s": 0}}
    agent = await A2AAgent.connect(agent_process.url, options=options)
    router.register(agent)
    assert (await router.route("echo", "before")).payload == "before"

    agent_process.stop()
    dead = await router.route("echo", "while dead")
    assert dead.status.value == "error"
    assert dead.delivered is False  # refused: never sent, so safe to send elsewhere
    assert f"A2A agent at {agent_process.url} cannot connect" in (dead.error or "")
    assert _state(router) == "offline"
    assert not await agent.probe()

    again = AgentProcess("--port", str(agent_process.port))
    try:
        await eventually(lambda: _state(router) == "online", what="the agent to be back")
        assert (await router.route("echo", "after")).payload == "after"
    finally:
        again.stop()


async def test_the_router_probe_brings_back_an_agent(agent_process: AgentProcess, router: Router) -> None:
    agent = await A2AAgent.connect(agent_process.url, options={"reprobe": {"enabled": False}})
    router.register(agent)
    agent_process.stop()
    assert (await router.route("echo", "x")).status.value == "error"
    assert _state(router) == "offline"
    again = AgentProcess("--port", str(agent_process.port))
    try:
        await router.probe_now()
        assert _state(router) == "online"
        assert (await router.route("echo", "x")).payload == "x"
    finally:
        again.stop()
    await agent.aclose()
    await agent.aclose()  # twice is fine
    assert not agent.connected
