"""The event loop that holds the sessions synchronous code opens (`MCPServerAgent.connect_sync`):
one daemon thread, started on first use, whose sessions are closed at interpreter exit."""

from __future__ import annotations

import asyncio
import atexit
import weakref
from collections.abc import Coroutine
from typing import Any, Protocol, TypeVar

from reach_adapters.router import Portal

__all__ = ["call", "close_at_exit"]

T = TypeVar("T")


class _Closable(Protocol):
    async def aclose(self) -> None: ...


_LOOP = Portal()
_OPEN: weakref.WeakSet[Any] = weakref.WeakSet()
_closing_at_exit = False


def call(coro: Coroutine[Any, Any, T], *, method: str, instead: str | None = None) -> T:
    """Run `coro` on the loop and wait for it (`Portal.call`: `method` names the sync call,
    `instead` what to await in async code)."""
    return _LOOP.call(coro, method=method, instead=instead)


def close_at_exit(agent: _Closable) -> None:
    """Close `agent` (with its session, stopping a server process) at interpreter exit, unless it
    is gone first. The exit hook is registered after the loop's first call, since exit hooks run
    last-registered-first and the portal's own hook (registered when its loop starts) would
    otherwise stop the loop before the sessions are closed on it."""
    global _closing_at_exit
    _OPEN.add(agent)
    if not _closing_at_exit:
        atexit.register(_close_loop)
        _closing_at_exit = True


def _close_loop() -> None:
    """Close the sessions synchronous code left open, then the loop: a daemon thread killed at
    exit would leave both behind."""
    agents = list(_OPEN)
    if agents:
        _LOOP.call(_close_all(agents), method="interpreter exit")
    _LOOP.close()


async def _close_all(agents: list[_Closable]) -> None:
    await asyncio.gather(*(agent.aclose() for agent in agents), return_exceptions=True)
