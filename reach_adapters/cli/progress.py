"""A status line on the terminal while something slow runs: what it is doing, and for how long."""

from __future__ import annotations

import asyncio
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TextIO

__all__ = ["progress"]

_TICK_S = 0.2
# Erase to the end of the line: the status is redrawn in place, and erased when done.
_ERASE = "\x1b[K"


@asynccontextmanager
async def progress(label: str, stream: TextIO | None = None, *, quiet: bool = False) -> AsyncIterator[None]:
    """Show `label` and the seconds elapsed on `stream` (default stderr) while the block runs.

    Only on a terminal, and not when `quiet` (``--log-json``: stderr is for programs then): piped
    output, log files and tests see nothing. The cursor goes back to the start of the line after
    each redraw, so a log line written meanwhile overwrites the status rather than joining it.
    """
    out = sys.stderr if stream is None else stream
    if quiet or not out.isatty():
        yield
        return
    started = time.monotonic()

    async def redraw() -> None:
        while True:
            out.write(f"{_ERASE}{label} ({time.monotonic() - started:.1f} s)\r")
            out.flush()
            await asyncio.sleep(_TICK_S)

    ticker = asyncio.get_running_loop().create_task(redraw(), name="reach progress")
    try:
        yield
    finally:
        # Cancelled at its sleep, it draws no more; awaiting it here could swallow our own cancel.
        ticker.cancel()
        out.write(_ERASE)
        out.flush()
