"""Fixtures every test package uses."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from reach_adapters import Router


@pytest.fixture
async def router() -> AsyncIterator[Router]:
    """A fresh router, closed (with its agents) after the test."""
    router = Router()
    try:
        yield router
    finally:
        await router.aclose()
