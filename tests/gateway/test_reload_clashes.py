"""A reload that clashes with what the router holds besides the config: refused whole, recoverable."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from reach_adapters import FunctionAgent
from reach_adapters.gateway import Gateway
from tests.gateway import agents
from tests.gateway.conftest import ECHO, PROBE_SERVER, PYTHON, SHOUT, write
from tests.waiting import alive, eventually

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


def slow_probe(pid_file: Path) -> str:
    """An MCP agent file whose server writes its pid, then takes a second to start."""
    return (
        "kind: mcp\nname: slow\ncommand: sh\n"
        f"args: [-c, 'echo $$ > {pid_file} && sleep 1 && exec {PYTHON} {PROBE_SERVER}']\n"
    )


async def test_code_deregistering_an_agent_while_a_reload_builds_does_not_break_it(
    config_dir: Path, tmp_path: Path
) -> None:
    write(config_dir, "util:echo:01.yaml", ECHO)
    async with await Gateway.start(config_dir) as gateway:
        router = gateway.router
        pid_file = tmp_path / "slow.pid"
        write(config_dir, "util:echo:01.yaml", ECHO + "capabilities:\n  - name: repeat\n")
        write(config_dir, "mcp:slow:0.yaml", slow_probe(pid_file))
        reloading = asyncio.create_task(gateway.reload())
        await eventually(pid_file.exists, what="the new server to be starting")
        await router.deregister("util:echo:01")  # while the new agents are still being built

        assert await asyncio.wait_for(reloading, 30) is True, gateway.last_error
        assert {info.agent_id for info in router.catalog()} == {"util:echo:01", "mcp:slow:0"}
        assert (await router.route("repeat", {"text": "again"})).ok
        assert set(gateway.config.agents) == {"util:echo:01", "mcp:slow:0"}


async def test_an_agent_code_took_out_without_closing_is_closed_when_its_file_changes(
    config_dir: Path, tmp_path: Path
) -> None:
    pid_file = tmp_path / "slow.pid"
    path = write(config_dir, "mcp:slow:0.yaml", slow_probe(pid_file))
    async with await Gateway.start(config_dir) as gateway:
        first = int(pid_file.read_text())
        await gateway.router.deregister("mcp:slow:0")  # no close: the process still runs
        assert alive(first)
        write(config_dir, path.name, slow_probe(pid_file) + "prefix: p_\n")

        assert await gateway.reload() is True, gateway.last_error
        await eventually(lambda: not alive(first), what="the old server process to stop")
        assert "p_say" in gateway.router.reachable()
