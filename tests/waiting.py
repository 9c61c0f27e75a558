"""Helpers for tests that wait on processes and servers, shared by the test packages."""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable

import pytest

__all__ = ["alive", "eventually", "until", "wait_until"]


async def eventually(check: Callable[[], bool], *, timeout: float = 20.0, what: str = "condition") -> None:
    """Wait until `check()` holds; fail the test when it does not within `timeout` seconds."""
    try:
        async with asyncio.timeout(timeout):
            while not check():
                await asyncio.sleep(0.01)
    except TimeoutError:
        pytest.fail(f"{what} did not happen within {timeout} s")


async def until(
    check: Callable[[], Awaitable[bool]], *, timeout: float = 20.0, what: str = "condition"
) -> None:
    """`eventually` for a check that asks a server: awaited until it holds, within `timeout` s."""
    try:
        async with asyncio.timeout(timeout):
            while not await check():
                await asyncio.sleep(0.01)
    except TimeoutError:
        pytest.fail(f"{what} did not happen within {timeout} s")


def wait_until(check: Callable[[], bool], *, timeout: float = 20.0, what: str = "condition") -> None:
    """`eventually` for synchronous tests: poll `check()` in this thread."""
    end = time.monotonic() + timeout
    while not check():
        if time.monotonic() > end:
            pytest.fail(f"{what} did not happen within {timeout} s")
        time.sleep(0.02)


def alive(pid: int) -> bool:
    """Whether a process with this pid still exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True
