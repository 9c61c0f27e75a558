"""How an MCP session ended, in words a log line or an error can carry: the failure from under
the SDK's exception groups, with the secrets an HTTP client's error names masked."""

from __future__ import annotations

import asyncio

from mcp.shared.exceptions import MCPError
from mcp.types import CONNECTION_CLOSED

from reach_adapters.security import redact_text

__all__ = ["EOF", "FORGOTTEN", "cause", "ended", "leaf", "settle"]

EOF = "the server closed the connection (did its process exit? see its stderr)"
FORGOTTEN = "the server no longer knows its session (did it restart?); opening a new one"


def leaf(exc: BaseException) -> BaseException:
    """The exception that says what went wrong, from under the SDK's exception groups."""
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return exc


def cause(exc: BaseException) -> str:
    """What went wrong, secrets masked: an HTTP client's error names the URL it tried."""
    exc = leaf(exc)
    if isinstance(exc, MCPError):
        return EOF if exc.code == CONNECTION_CLOSED else redact_text(f"MCP error {exc.code}: {exc.message}")
    return redact_text(f"{type(exc).__name__}: {exc}")


def ended(task: asyncio.Task[None]) -> str:
    """Why the session that `task` ran ended."""
    if task.cancelled():
        return "the session was cancelled"
    exc = task.exception()
    return "the session ended" if exc is None else cause(exc)


async def settle(task: asyncio.Task[None]) -> None:
    """Wait for `task` and consume its outcome, so no failure is reported as never retrieved."""
    await asyncio.wait({task})
    if not task.cancelled():
        task.exception()
