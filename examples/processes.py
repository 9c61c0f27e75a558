"""Servers the demos start as subprocesses: started, awaited until they say they listen, stopped.

Every wait is bounded; a server that does not start ends the demo with its own last log line.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
from collections.abc import AsyncIterator
from pathlib import Path

__all__ = ["ready_fields", "running"]


async def ready_fields(
    process: asyncio.subprocess.Process, prefix: str, log: Path, what: str, timeout_s: float = 60
) -> dict[str, str]:
    """The ``key=value`` fields of the first line the server prints, which must start with `prefix`."""
    assert process.stdout is not None
    try:
        line = (await asyncio.wait_for(process.stdout.readline(), timeout=timeout_s)).decode().strip()
    except TimeoutError:
        line = f"nothing within {timeout_s:.0f} s"
    if not line.startswith(prefix):
        # The server's own one-line error is the last line of its log.
        said = log.read_text().strip().splitlines() or [f"it printed {line!r}"]
        msg = f"{what} did not start: {said[-1]}"
        raise SystemExit(msg)
    return dict(part.split("=", 1) for part in line.removeprefix(prefix).split())


@contextlib.asynccontextmanager
async def running(*command: str, cwd: Path, log: Path) -> AsyncIterator[asyncio.subprocess.Process]:
    """`command` with its stdout piped and its stderr written to `log`; SIGTERM when the block
    ends (SIGKILL if it is not gone 30 s later), so no server outlives the demo."""
    with log.open("w") as log_file:
        process = await asyncio.create_subprocess_exec(
            *command, cwd=cwd, stdout=asyncio.subprocess.PIPE, stderr=log_file
        )
        try:
            yield process
        finally:
            if process.returncode is None:
                process.send_signal(signal.SIGTERM)
            try:
                await asyncio.wait_for(process.wait(), timeout=30)
            except TimeoutError:
                process.kill()
                await process.wait()
