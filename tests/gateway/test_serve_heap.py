"""`reach serve` readies the garbage collector for a long-running server before it says ready."""

from __future__ import annotations

import gc
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest

from reach_adapters.cli import serve
from reach_adapters.gateway import Gateway
from tests.gateway.conftest import ECHO, write

pytestmark = pytest.mark.timeout(30)


@pytest.fixture
def own_collector() -> Iterator[None]:
    """The test process's collector settings, restored after the test changes them."""
    thresholds = gc.get_threshold()
    try:
        yield
    finally:
        gc.unfreeze()
        gc.set_threshold(*thresholds)


@pytest.mark.usefixtures("own_collector")
async def test_the_startup_heap_is_frozen_until_a_reload_retires_agents(config_dir: Path) -> None:
    gc.unfreeze()
    young, middle, _ = gc.get_threshold()
    write(config_dir, "util:echo:01.yaml", ECHO)
    async with await Gateway.start(config_dir) as gateway:
        started = weakref.ref(gateway._agents["util:echo:01"])
        serve._settle_heap(gateway)
        # What the process holds now is out of every later pass; full passes come more rarely.
        assert gc.get_freeze_count() > 0
        assert gc.get_threshold() == (young, middle, 100)
        (config_dir / "util:echo:01.yaml").unlink()
        write(config_dir, "util:echo:02.yaml", ECHO.replace("util:echo:01", "util:echo:02"))
        assert await gateway.reload()
        # The agent built at start is retired: no longer frozen, it is freed.
        assert gc.get_freeze_count() == 0
        gc.collect()
        assert started() is None


async def test_a_reload_listener_is_called_after_each_change_until_removed(config_dir: Path) -> None:
    write(config_dir, "util:echo:01.yaml", ECHO)
    calls: list[int] = []
    async with await Gateway.start(config_dir) as gateway:
        remove = gateway.on_reload(lambda: calls.append(len(gateway.router.catalog())))
        write(config_dir, "util:echo:02.yaml", ECHO.replace("util:echo:01", "util:echo:02"))
        assert await gateway.reload()
        # Called once the change is in: the new agent is already registered.
        assert calls == [2]
        remove()
        remove()
        (config_dir / "util:echo:02.yaml").unlink()
        assert await gateway.reload()
        assert calls == [2]
