"""`reach serve` readies the garbage collector for a long-running server before it says ready."""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest

from reach_adapters.cli import serve


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
def test_startup_objects_are_frozen_and_full_passes_spaced_out() -> None:
    gc.unfreeze()
    young, middle, _ = gc.get_threshold()
    held: list[object] = []
    held.append(held)
    serve._settle_heap()
    # What the process holds now is out of every later pass; the rest of the settings stay.
    assert gc.get_freeze_count() > 0
    assert not any(item is held for item in gc.get_objects())
    assert gc.get_threshold() == (young, middle, 100)
