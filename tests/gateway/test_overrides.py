"""Capability overrides on real agents, in process: applied at start and to later re-declarations."""

from __future__ import annotations

from pathlib import Path

import pytest

from reach_adapters import Capability, FunctionAgent, Router
from reach_adapters.config import ConfigFileError, load_config
from reach_adapters.gateway import Gateway, PatchedAgent
from tests.gateway import agents
from tests.gateway.conftest import PROBE, write
from tests.waiting import eventually

pytestmark = pytest.mark.timeout(60)


def capabilities(router: Router, agent_id: str) -> dict[str, Capability]:
    info = next(info for info in router.catalog() if info.agent_id == agent_id)
    return {cap.name: cap for cap in info.capabilities}


async def test_overrides_survive_a_servers_new_tool_list(config_dir: Path) -> None:
    write(
        config_dir,
        "mcp:probe:0.yaml",
        PROBE + "prefix: p_\noverrides:\n  say:\n    weight: 99\n    idempotent: true\n",
    )
    async with await Gateway.start(config_dir) as gateway:
        router = gateway.router
        said = capabilities(router, "mcp:probe:0")["p_say"]
        assert (said.weight, said.idempotent) == (99.0, True)
        assert capabilities(router, "mcp:probe:0")["p_pid"].weight == 50.0
        grown = await router.route("p_grow", {"name": "fresh"})
        assert grown.ok, grown.error
        await eventually(lambda: "p_fresh" in capabilities(router, "mcp:probe:0"), what="the new tool")
        again = capabilities(router, "mcp:probe:0")
        assert (again["p_say"].weight, again["p_say"].idempotent) == (99.0, True)
        answer = await router.route("p_say", {"text": "still routed"})
        assert answer.payload == "still routed"


async def test_an_override_for_a_tool_the_server_lacks_is_an_error(config_dir: Path) -> None:
    path = write(config_dir, "mcp:probe:0.yaml", PROBE + "overrides:\n  shout:\n    weight: 1\n")
    with pytest.raises(ConfigFileError) as caught:
        await Gateway.start(config_dir)
    error = caught.value
    assert (error.file, error.line, error.field) == (path, 6, "overrides.shout")
    assert (
        "declares no capability 'shout'; it declares ['pid', 'say', 'seen', 'environment', 'grow']"
        in error.problem
    )


async def test_langchain_and_function_agents_take_overrides_too(config_dir: Path) -> None:
    write(
        config_dir,
        "text:reverse:01.yaml",
        "kind: langchain\nagent_id: text:reverse:01\nrunnable: tests.gateway.agents:reverser_factory\n"
        "overrides:\n  reverse:\n    keywords: [backwards]\n    max_concurrency: 2\n",
    )
    write(
        config_dir,
        "util:shout:01.yaml",
        "kind: function\nagent_id: util:shout:01\nfunction: tests.gateway.agents:shout\n"
        "capabilities:\n  - name: loud\n    input_schema: {type: object, required: [text]}\n"
        "overrides:\n  loud:\n    timeout_ms: 1500\n",
    )
    config = load_config(config_dir)
    async with await Gateway.from_config(config) as gateway:
        reverse = capabilities(gateway.router, "text:reverse:01")["reverse"]
        assert (reverse.keywords, reverse.max_concurrency) == (["backwards"], 2)
        loud = capabilities(gateway.router, "util:shout:01")["loud"]
        assert (loud.timeout_ms, loud.input_schema["required"]) == (1500, ["text"])
        result = await gateway.router.route("loud", {"text": "hey"})
        assert result.payload == "HEY"
        missing = await gateway.router.route("loud", {})
        assert missing.status == "invalid"


def test_a_patched_agent_is_the_agent_it_wraps() -> None:
    inner = FunctionAgent(agents.shout, agent_id="util:shout:01")
    patched = PatchedAgent(inner, {"shout": {"weight": 5.0}})
    assert patched.agent_id == "util:shout:01"
    assert patched.capabilities[0].weight == 5.0
    assert inner.capabilities[0].weight == 50.0
    assert not hasattr(patched, "probe")
    assert patched.wrapped is inner
