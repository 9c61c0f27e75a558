"""A reload that clashes with what the router holds besides the config: refused whole, recoverable."""

from __future__ import annotations

from pathlib import Path

import pytest

from reach_adapters import FunctionAgent
from reach_adapters.gateway import Gateway
from tests.gateway import agents
from tests.gateway.conftest import ECHO, SHOUT, write

pytestmark = pytest.mark.timeout(60)

ECHO_TWIN = "kind: function\nagent_id: util:aaa:01\nfunction: tests.gateway.agents:echo\n"


async def test_an_agent_id_registered_in_code_refuses_the_change_and_leaves_nothing_behind(
    config_dir: Path,
) -> None:
    write(config_dir, "util:echo:01.yaml", ECHO)
    async with await Gateway.start(config_dir) as gateway:
        router = gateway.router
        router.register(FunctionAgent(agents.shout, agent_id="util:shout:01"))
        write(config_dir, "util:aaa:01.yaml", ECHO_TWIN)
        path = write(config_dir, "util:shout:01.yaml", SHOUT)

        assert await gateway.reload() is False
        assert gateway.last_error is not None
        assert gateway.last_error.startswith(str(path))
        assert "util:shout:01 is already registered" in gateway.last_error
        assert {info.agent_id for info in router.catalog()} == {"util:echo:01", "util:shout:01"}
        assert gateway.generation == 1

        # Without the clash the same change applies: the refused attempt left no half of it behind.
        path.unlink()
        assert await gateway.reload() is True
        ids = {info.agent_id for info in router.catalog()}
        assert ids == {"util:echo:01", "util:shout:01", "util:aaa:01"}
        assert gateway.generation == 2


async def test_config_agents_deregistered_in_code_can_still_be_changed_and_removed(
    config_dir: Path,
) -> None:
    write(config_dir, "util:echo:01.yaml", ECHO)
    shout = write(config_dir, "util:shout:01.yaml", SHOUT)
    async with await Gateway.start(config_dir) as gateway:
        router = gateway.router
        await router.deregister("util:echo:01")
        await router.deregister("util:shout:01")
        # Changed: registered again from its new file. Removed: nothing left to deregister.
        write(config_dir, "util:echo:01.yaml", ECHO + "capabilities:\n  - name: repeat\n")
        shout.unlink()

        assert await gateway.reload() is True, gateway.last_error
        assert {info.agent_id for info in router.catalog()} == {"util:echo:01"}
        repeated = await router.route("repeat", {"text": "again"})
        assert repeated.ok, repeated.error
        assert gateway.generation == 2
